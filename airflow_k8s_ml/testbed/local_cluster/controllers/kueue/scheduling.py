"""One scheduling pass over every ClusterQueue (upstream's ``pkg/scheduler`` cycle, without cohorts):
pure, from the queues and Workloads to the Workload and queue statuses to write and the workloads to evict.

Pending workloads of a ClusterQueue are tried highest priority first, then oldest first. One that fits
gets its quota reserved and is admitted (no admission checks here); one that does not gets QuotaReserved
False with the flavor assigner's reason. ``StrictFIFO`` stops at the first that does not fit;
``BestEffortFIFO`` goes on with the next. With ``preemption.withinClusterQueue: LowerPriority`` a workload
that does not fit evicts admitted workloads of lower priority (lowest first, most recently admitted first)
until it would fit; it is admitted on a later pass, once their jobs are stopped and their quota released.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_k8s_ml.k8s.selectors import SelectorError, label_selector_from_match

from ...kubelet.status import go_duration
from ...meta import parse_time
from ..metav1_conditions import condition, find
from .api import (
    ADMITTED,
    ADMITTED_MESSAGE,
    BEST_EFFORT_FIFO,
    EVICTED,
    LOWER_PRIORITY,
    PODS_READY,
    QUOTA_RESERVED,
    REASON_ADMITTED,
    REASON_INADMISSIBLE,
    REASON_PENDING,
    REASON_PREEMPTED,
    REASON_QUOTA_RESERVED,
    REQUEUED,
    STRICT_FIFO,
    preempted_message,
    quota_reserved_message,
)
from .preemption import preemption_victims
from .queue_status import cluster_queue_status, local_queue_status
from .quota import Usage, add_usage, assign_flavors, workload_usage
from .workloads import has_reservation, is_evicted, is_live, priority, with_conditions

Obj = dict[str, Any]
Key = tuple[str, str]


@dataclass
class Plan:
    workloads: dict[Key, Obj] = field(default_factory=dict)  # new status per (namespace, name)
    cluster_queues: dict[str, Obj] = field(default_factory=dict)
    local_queues: dict[Key, Obj] = field(default_factory=dict)
    events: list[tuple[Key, str, str, str]] = field(default_factory=list)  # (workload, type, reason, message)


def _key(obj: Obj) -> Key:
    return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def queue_order(workload: Obj) -> tuple[int, str, str]:
    """The order a ClusterQueue tries its pending workloads in: highest priority first, then oldest. The
    one place it is decided: the visibility API's positions (:mod:`.visibility`) are read from it too."""
    return (
        -priority(workload),
        workload["metadata"].get("creationTimestamp", ""),
        workload["metadata"]["name"],
    )


def _missing_flavors(cq: Obj, flavors: set[str]) -> list[str]:
    names = [
        str(f.get("name"))
        for g in (cq.get("spec") or {}).get("resourceGroups") or []
        for f in g.get("flavors") or []
    ]
    return sorted({n for n in names if n not in flavors})


def _selects(cq: Obj, namespace_labels: Mapping[str, str]) -> bool:
    """A null namespaceSelector selects nothing, ``{}`` everything (upstream's documented default)."""
    try:
        return label_selector_from_match((cq.get("spec") or {}).get("namespaceSelector")).matches(
            namespace_labels
        )
    except SelectorError:
        return False


def schedule(
    cluster_queues: list[Obj],
    local_queues: list[Obj],
    workloads: list[Obj],
    namespace_labels: Mapping[str, Mapping[str, str]],
    flavors: set[str],
    now: float,
) -> Plan:
    plan = Plan()
    cqs = {cq["metadata"]["name"]: cq for cq in cluster_queues}
    lqs = {_key(lq): lq for lq in local_queues}
    per_cq: dict[str, list[Obj]] = {name: [] for name in cqs}
    live = [w for w in workloads if is_live(w)]

    def put(wl: Obj, *conds: Obj, admission: Obj | None = None) -> None:
        status = with_conditions(wl.get("status") or {}, *conds)
        if admission is not None:
            status["admission"] = admission
        if status != (wl.get("status") or {}):
            plan.workloads[_key(wl)] = status

    def pending(wl: Obj, reason: str, message: str) -> None:
        """QuotaReserved False, and upstream's ``Pending`` event when the reason's words change."""
        old = find((wl.get("status") or {}).get("conditions"), QUOTA_RESERVED) or {}
        put(wl, condition(QUOTA_RESERVED, "False", reason, message, now))
        if old.get("status") != "False" or old.get("message") != message:
            plan.events.append((_key(wl), "Normal", REASON_PENDING, message))

    for wl in live:
        if has_reservation(wl):
            cq_name = str(wl["status"]["admission"].get("clusterQueue", ""))
            if cq_name in per_cq:
                per_cq[cq_name].append(wl)
            continue
        namespace, _ = _key(wl)
        queue = str((wl.get("spec") or {}).get("queueName", ""))
        lq = lqs.get((namespace, queue))
        if lq is None:
            pending(wl, REASON_INADMISSIBLE, f"LocalQueue {queue} doesn't exist")
            continue
        cq_name = str((lq.get("spec") or {}).get("clusterQueue", ""))
        cq = cqs.get(cq_name)
        if cq is None:
            pending(wl, REASON_INADMISSIBLE, f"ClusterQueue {cq_name} doesn't exist")
        elif not _selects(cq, namespace_labels.get(namespace, {})):
            pending(wl, REASON_INADMISSIBLE, "Workload namespace doesn't match ClusterQueue selector")
        elif _missing_flavors(cq, flavors):
            pending(wl, REASON_INADMISSIBLE, f"ClusterQueue {cq_name} is inactive")
        else:
            per_cq[cq_name].append(wl)

    for name, cq in cqs.items():
        _schedule_queue(cq, per_cq[name], plan, put, pending, now)
        plan.cluster_queues[name] = _cq_status(cq, per_cq[name], plan, flavors, now)
    for key, lq in lqs.items():
        plan.local_queues[key] = _lq_status(lq, live, cqs, plan, now)
    return plan


def _schedule_queue(cq: Obj, members: list[Obj], plan: Plan, put: Any, pending: Any, now: float) -> None:
    name = cq["metadata"]["name"]
    reserved = [w for w in members if has_reservation(w)]
    used: Usage = {}
    for wl in reserved:
        used = add_usage(used, workload_usage(wl))
    spec = cq.get("spec") or {}
    strategy = spec.get("queueingStrategy") or BEST_EFFORT_FIFO
    # LowerOrNewerEqualPriority is served as LowerPriority (equal-priority newer victims are not considered).
    policy = (spec.get("preemption") or {}).get("withinClusterQueue") or "Never"
    preempt = policy in (LOWER_PRIORITY, "LowerOrNewerEqualPriority")
    evicting = [w for w in reserved if is_evicted(w)]
    for wl in sorted((w for w in members if not has_reservation(w)), key=queue_order):
        assignment = assign_flavors(wl, cq, used)
        if assignment.fits:
            used = add_usage(used, assignment.usage)
            put(
                wl,
                *_admitted_conditions(wl, name, now),
                admission={"clusterQueue": name, "podSetAssignments": assignment.pod_sets},
            )
            waited = _waited(now - _queued_at(wl))
            reserved_text = f"Quota reserved in ClusterQueue {name}, wait time since queued was {waited}"
            plan.events.append((_key(wl), "Normal", REASON_QUOTA_RESERVED, reserved_text))
            admitted_text = f"Admitted by ClusterQueue {name}, wait time since reservation was 0s"
            plan.events.append((_key(wl), "Normal", REASON_ADMITTED, admitted_text))
            continue
        message = assignment.message
        if preempt:
            victims = preemption_victims(wl, cq, [w for w in reserved if w not in evicting], evicting, used)
            waiting = [w for w in evicting if priority(w) < priority(wl)]
            if victims is not None:
                for victim in victims:
                    text = preempted_message(wl)
                    put(victim, condition(EVICTED, "True", REASON_PREEMPTED, text, now))
                    plan.events.append((_key(victim), "Normal", REASON_PREEMPTED, text))
                    evicting.append(victim)
                if victims or waiting:
                    message = (
                        f"{message}. Pending the preemption of {len(victims) + len(waiting)} workload(s)"
                    )
        pending(wl, REASON_PENDING, message)
        if strategy == STRICT_FIFO:
            break


def _queued_at(wl: Obj) -> float:
    """When the workload last entered the queue: its requeue, else its creation."""
    requeued = find((wl.get("status") or {}).get("conditions"), REQUEUED) or {}
    stamp = requeued.get("lastTransitionTime") or wl["metadata"].get("creationTimestamp")
    return parse_time(stamp) if stamp else 0.0


def _waited(seconds: float) -> str:
    """Go's ``time.Duration.Round(time.Second).String()``: 0s, 45s, 1m5s."""
    total = max(0, round(seconds))
    return go_duration(float(total)) if total else "0s"


def _admitted_conditions(wl: Obj, cq_name: str, now: float) -> list[Obj]:
    conds = [
        condition(QUOTA_RESERVED, "True", REASON_QUOTA_RESERVED, quota_reserved_message(cq_name), now),
        condition(ADMITTED, "True", REASON_ADMITTED, ADMITTED_MESSAGE, now),
    ]
    # ``SetQuotaReservation``: a former eviction (and readiness) is kept as history, turned False.
    for type_ in (EVICTED, PODS_READY):
        old = find((wl.get("status") or {}).get("conditions"), type_)
        if old is not None and old.get("status") == "True":
            conds.append(
                condition(type_, "False", REASON_QUOTA_RESERVED, f"Previously: {old.get('message', '')}", now)
            )
    return conds


def _status_of(key: Key, wl: Obj, plan: Plan) -> Obj:
    return {**wl, "status": plan.workloads.get(key, wl.get("status") or {})}


def _cq_status(cq: Obj, members: list[Obj], plan: Plan, flavors: set[str], now: float) -> Obj:
    current = [_status_of(_key(w), w, plan) for w in members]
    return cluster_queue_status(cq, current, _missing_flavors(cq, flavors), now)


def _lq_status(lq: Obj, live: list[Obj], cqs: dict[str, Obj], plan: Plan, now: float) -> Obj:
    namespace, name = _key(lq)
    mine = [
        _status_of(_key(w), w, plan)
        for w in live
        if _key(w)[0] == namespace and (w.get("spec") or {}).get("queueName") == name
    ]
    return local_queue_status(lq, mine, str((lq.get("spec") or {}).get("clusterQueue", "")) in cqs, now)
