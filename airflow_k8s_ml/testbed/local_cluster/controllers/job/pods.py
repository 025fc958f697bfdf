"""Pure helpers about a Job's pods: which are active, finished, failed or ready, when they finished,
and how a new pod is built from the Job's template (pkg/controller/job and pkg/controller/controller_utils).

Kept free of I/O so the counting rules, the subtle part of the Job controller, are unit-testable.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from ...meta import owner_reference, parse_time

Obj = dict[str, Any]

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
MAX_NAME = 63
RANDOM_SUFFIX = 5


def phase(pod: Mapping[str, Any]) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def is_deleting(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_active(pod: Mapping[str, Any]) -> bool:
    """``controller.FilterActivePods``: not terminal and not being deleted."""
    return phase(pod) not in ("Succeeded", "Failed") and not is_deleting(pod)


def is_terminating(pod: Mapping[str, Any]) -> bool:
    """``controller.CountTerminatingPods``: being deleted but its processes not yet stopped."""
    return is_deleting(pod) and phase(pod) not in ("Succeeded", "Failed")


def is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def has_tracking_finalizer(pod: Mapping[str, Any]) -> bool:
    return TRACKING_FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or [])


def only_replace_failed(job: Mapping[str, Any]) -> bool:
    """``onlyReplaceFailedPods``: podReplacementPolicy Failed (always so with a podFailurePolicy)."""
    spec = job.get("spec") or {}
    return spec.get("podReplacementPolicy") == "Failed" or spec.get("podFailurePolicy") is not None


def is_failed(pod: Mapping[str, Any], job: Mapping[str, Any]) -> bool:
    """``isPodFailed``: a Failed pod; or, unless only failed pods are replaced, a deleted pod that did not
    succeed (it may never reach the Failed phase, so it counts at once)."""
    if phase(pod) == "Failed":
        return True
    if only_replace_failed(job):
        return False
    return is_deleting(pod) and phase(pod) != "Succeeded"


def uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid", ""))


def completion_index(pod: Mapping[str, Any]) -> int | None:
    """The pod's completion index annotation, or None when missing or not a non-negative integer."""
    value = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX_KEY)
    if value is None or not str(value).isdigit():
        return None
    return int(value)


def restart_count(pods: Iterable[Mapping[str, Any]]) -> int:
    """Sum of container (and init container) restarts of the Pending/Running pods."""
    total = 0
    for pod in pods:
        if phase(pod) not in ("Running", "Pending"):
            continue
        status = pod.get("status") or {}
        for cs in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            total += int(cs.get("restartCount") or 0)
    return total


def finished_time(pod: Mapping[str, Any]) -> float:
    """``getFinishedTime``: the latest container finish, else the Ready=False transition, else the deletion
    time minus its grace period, else creation."""
    status = pod.get("status") or {}
    finishes: list[float] = []
    statuses = status.get("containerStatuses") or []
    for cs in statuses:
        finished_at = ((cs.get("state") or {}).get("terminated") or {}).get("finishedAt")
        if not finished_at:
            finishes = []
            break
        finishes.append(parse_time(finished_at))
    if finishes:
        return max(finishes)
    for condition in status.get("conditions") or []:
        if (
            condition.get("type") == "Ready"
            and condition.get("status") == "False"
            and condition.get("lastTransitionTime")
        ):
            return parse_time(condition["lastTransitionTime"])
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return parse_time(meta["deletionTimestamp"]) - float(meta.get("deletionGracePeriodSeconds") or 0)
    return parse_time(meta["creationTimestamp"]) if meta.get("creationTimestamp") else 0.0


def removal_order_key(pod: Mapping[str, Any]) -> tuple[bool, bool, int, float]:
    """``controller.ActivePods`` order: delete not-ready before ready, unscheduled before scheduled,
    pending before running, and the newest first."""
    rank = {"Pending": 0, "Unknown": 1, "Running": 2}.get(phase(pod), 1)
    created = (pod.get("metadata") or {}).get("creationTimestamp")
    age_key = -parse_time(created) if created else 0.0
    return (is_ready(pod), bool((pod.get("spec") or {}).get("nodeName")), rank, age_key)


def generate_name_prefix(job_name: str, index: int | None) -> str:
    """``<job>-`` or, for Indexed Jobs, ``<job>-<index>-`` (the job name cut so the pod name fits)."""
    if index is None:
        return f"{job_name}-"
    suffix = f"-{index}-"
    return job_name[: MAX_NAME - RANDOM_SUFFIX - len(suffix)] + suffix


def new_pod(job: Mapping[str, Any], index: int | None) -> Obj:
    """A pod for ``job`` from its template (``GetPodFromTemplate`` + the job controller's additions)."""
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    template_meta = template.get("metadata") or {}
    job_meta = job["metadata"]
    labels = dict(template_meta.get("labels") or {})
    annotations = dict(template_meta.get("annotations") or {})
    finalizers = list(template_meta.get("finalizers") or [])
    if TRACKING_FINALIZER not in finalizers:
        finalizers.append(TRACKING_FINALIZER)
    spec = template.get("spec") or {}
    if index is not None:
        annotations[COMPLETION_INDEX_KEY] = str(index)
        labels[COMPLETION_INDEX_KEY] = str(index)
        spec["hostname"] = f"{job_meta['name']}-{index}"
        _add_completion_index_env(spec)
    meta: Obj = {
        "generateName": generate_name_prefix(job_meta["name"], index),
        "namespace": job_meta.get("namespace"),
        "labels": labels,
        "finalizers": finalizers,
        "ownerReferences": [owner_reference(dict(job), controller=True, block=True)],
    }
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _add_completion_index_env(spec: Obj) -> None:
    """``addCompletionIndexEnvVariables``: JOB_COMPLETION_INDEX from the pod's own annotation."""
    env_var = {
        "name": COMPLETION_INDEX_ENV,
        "valueFrom": {
            "fieldRef": {"apiVersion": "v1", "fieldPath": f"metadata.annotations['{COMPLETION_INDEX_KEY}']"}
        },
    }
    for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        env = container.setdefault("env", [])
        if not any(e.get("name") == COMPLETION_INDEX_ENV for e in env):
            env.append(copy.deepcopy(env_var))
