"""Workload objects for queued jobs (upstream's jobframework reconciler): their names, specs and the
condition changes of their life (finished, evicted, quota released). Pure functions."""

from __future__ import annotations

import hashlib
from typing import Any

from ...meta import owner_reference
from ..metav1_conditions import condition, find, is_true, set_status_condition
from .api import (
    ADMITTED,
    API_VERSION,
    EVICTED,
    FINISHED,
    JOB_UID_LABEL,
    NO_RESERVATION_MESSAGE,
    PODS_NOT_READY_MESSAGE,
    PODS_READY,
    PODS_READY_MESSAGE,
    PRIORITY_CLASS_LABEL,
    QUOTA_RESERVED,
    REASON_NO_RESERVATION,
    REASON_PENDING,
    REASON_PODS_READY,
    REASON_WAIT_FOR_START,
    REQUEUED,
    WORKLOAD_PRIORITY_CLASS_REF,
)
from .integrations import Integration

Obj = dict[str, Any]

_HASH_LENGTH = 5
_MAX_PREFIX = 252 - _HASH_LENGTH


def workload_name(integration: Integration, job: Obj) -> str:
    """``GetWorkloadNameForOwnerWithGVK``: ``<kind>-<name>`` cut to fit, then 5 hex digits of a sha1 over
    kind, group, name and uid, so a recreated job of the same name gets another Workload."""
    meta = job["metadata"]
    prefixed = f"{integration.prefix}-{meta['name']}"[:_MAX_PREFIX]
    digest = hashlib.sha1(
        "\n".join((integration.kind, integration.rt.group, meta["name"], meta.get("uid", ""))).encode()
    ).hexdigest()
    return f"{prefixed}-{digest[:_HASH_LENGTH]}"


def new_workload(
    integration: Integration, job: Obj, pod_sets: list[Obj], priority_classes: dict[str, int]
) -> Obj:
    meta = job["metadata"]
    labels = meta.get("labels") or {}
    spec: Obj = {
        "podSets": pod_sets,
        "queueName": labels.get("kueue.x-k8s.io/queue-name", ""),
        "active": True,
    }
    priority_class = labels.get(PRIORITY_CLASS_LABEL)
    if priority_class and priority_class in priority_classes:
        spec.update(
            priorityClassRef={**WORKLOAD_PRIORITY_CLASS_REF, "name": priority_class},
            priority=priority_classes[priority_class],
        )
    else:
        spec["priority"] = 0
    return {
        "apiVersion": API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(integration, job),
            "namespace": meta["namespace"],
            "labels": {JOB_UID_LABEL: meta.get("uid", "")},
            "ownerReferences": [owner_reference(job)],
        },
        "spec": spec,
    }


def conditions_of(workload: Obj) -> list[Obj]:
    return list((workload.get("status") or {}).get("conditions") or [])


def has_reservation(workload: Obj) -> bool:
    return is_true(conditions_of(workload), QUOTA_RESERVED) and bool(
        (workload.get("status") or {}).get("admission")
    )


def is_admitted(workload: Obj) -> bool:
    return has_reservation(workload) and is_true(conditions_of(workload), ADMITTED)


def is_finished(workload: Obj) -> bool:
    return is_true(conditions_of(workload), FINISHED)


def is_live(workload: Obj) -> bool:
    """Still in a queue's books: neither finished nor being deleted."""
    return not is_finished(workload) and not workload["metadata"].get("deletionTimestamp")


def is_evicted(workload: Obj) -> bool:
    return is_true(conditions_of(workload), EVICTED)


def priority(workload: Obj) -> int:
    return int((workload.get("spec") or {}).get("priority") or 0)


def with_conditions(status: Obj, *new: Obj) -> Obj:
    """``status`` with each condition set as ``meta.SetStatusCondition`` does (a copy)."""
    conditions = [dict(c) for c in status.get("conditions") or []]
    for cond in new:
        set_status_condition(conditions, cond)
    return {**status, "conditions": conditions}


def finished_status(workload: Obj, reason: str, message: str, now: float) -> Obj:
    return with_conditions(workload.get("status") or {}, condition(FINISHED, "True", reason, message, now))


def released_status(workload: Obj, now: float) -> Obj:
    """An evicted workload whose job was stopped: quota given back, requeued (``UnsetQuotaReservation``)."""
    status = {k: v for k, v in (workload.get("status") or {}).items() if k != "admission"}
    evicted = find(status.get("conditions"), EVICTED) or {}
    message = str(evicted.get("message", ""))
    reason = str(evicted.get("reason", ""))
    return with_conditions(
        status,
        condition(QUOTA_RESERVED, "False", REASON_PENDING, message, now),
        condition(ADMITTED, "False", REASON_NO_RESERVATION, NO_RESERVATION_MESSAGE, now),
        condition(REQUEUED, "True", reason, message, now),
        *(
            [condition(PODS_READY, "False", REASON_WAIT_FOR_START, PODS_NOT_READY_MESSAGE, now)]
            if find(status.get("conditions"), PODS_READY)
            else []
        ),
    )


def pods_ready_status(workload: Obj, ready: bool, now: float) -> Obj:
    if ready:
        cond = condition(PODS_READY, "True", REASON_PODS_READY, PODS_READY_MESSAGE, now)
    else:
        cond = condition(PODS_READY, "False", REASON_WAIT_FOR_START, PODS_NOT_READY_MESSAGE, now)
    return with_conditions(workload.get("status") or {}, cond)
