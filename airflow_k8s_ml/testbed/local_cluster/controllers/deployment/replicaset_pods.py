"""Pods of a ReplicaSet (pkg/controller/replicaset + controller_utils), pure.

``pod_from_template`` is ``GetPodFromTemplate`` (``generateName: <rs>-``, template labels and annotations,
a controller ownerReference). ``pods_to_delete`` ranks victims as ``ActivePodsWithRanks`` does, so a scale
down removes pending and unready pods before ready ones and the most recently ready before the oldest.
``replicaset_status`` is ``calculateStatus`` with the ReplicaFailure condition.
"""

from __future__ import annotations

import copy
import functools
import math
from typing import Any

from airflow_k8s_ml.k8s.selectors import label_selector_from_set

from ...meta import owner_reference, parse_time, rfc3339

Obj = dict[str, Any]

REPLICA_FAILURE = "ReplicaFailure"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDER = {"Pending": 0, "Unknown": 1, "Running": 2}


def pod_from_template(rs: Obj) -> Obj:
    template = (rs.get("spec") or {}).get("template") or {}
    meta = template.get("metadata") or {}
    pod_meta: Obj = {
        "generateName": f"{rs['metadata']['name']}-",
        "namespace": rs["metadata"]["namespace"],
        "ownerReferences": [owner_reference(rs)],
    }
    for key in ("labels", "annotations", "finalizers"):
        if meta.get(key):
            pod_meta[key] = copy.deepcopy(meta[key])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


def is_active(pod: Obj) -> bool:
    """``IsPodActive``: not finished and not being deleted."""
    phase = (pod.get("status") or {}).get("phase")
    return phase not in ("Succeeded", "Failed") and not (pod.get("metadata") or {}).get("deletionTimestamp")


def ready_condition(pod: Obj) -> Obj | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition
    return None


def is_ready(pod: Obj) -> bool:
    condition = ready_condition(pod)
    return condition is not None and condition.get("status") == "True"


def is_available(pod: Obj, min_ready_seconds: int, now: float) -> bool:
    """Ready, and for longer than minReadySeconds (``IsPodAvailable``)."""
    if not is_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = (ready_condition(pod) or {}).get("lastTransitionTime")
    if not since:
        return False
    return parse_time(since) + min_ready_seconds < now


# -- choosing pods to delete ---------------------------------------------------------------------------
def _time(value: str | None) -> float | None:
    return parse_time(value) if value else None


def _log_rank_diff(t1: float, t2: float, now: float) -> int:
    """``logarithmicRankDiff``: compare ages in powers of two (LogarithmicScaleDown, on by default)."""

    def rank(t: float) -> int:
        age_ns = (now - t) * 1e9
        return int(math.log2(age_ns)) if age_ns > 0 else -1

    return rank(t1) - rank(t2)


def _max_restarts(pod: Obj) -> int:
    return max(
        (int(s.get("restartCount") or 0) for s in (pod.get("status") or {}).get("containerStatuses") or []),
        default=0,
    )


def _cost(pod: Obj) -> int:
    try:
        return int(((pod.get("metadata") or {}).get("annotations") or {}).get(DELETION_COST, 0))
    except ValueError:
        return 0


def _compare_times(a: Obj, b: Obj, ta: float | None, tb: float | None, now: float) -> int:
    """Empty time first, then the more recent one (in log buckets), ties broken by uid."""
    if ta == tb:
        return 0
    if ta is None or tb is None:
        return -1 if ta is None else 1
    diff = _log_rank_diff(ta, tb, now)
    if diff == 0:
        ua, ub = a["metadata"].get("uid", ""), b["metadata"].get("uid", "")
        return -1 if ua < ub else (1 if ua > ub else 0)
    return -1 if diff < 0 else 1


def _compare(a: Obj, b: Obj, now: float) -> int:
    """-1 when ``a`` should be deleted before ``b`` (``ActivePodsWithRanks.Less``; one node, so the
    doubled-up rank never differs)."""
    na, nb = (a.get("spec") or {}).get("nodeName") or "", (b.get("spec") or {}).get("nodeName") or ""
    if na != nb and (not na or not nb):
        return -1 if not na else 1
    pa = _PHASE_ORDER.get((a.get("status") or {}).get("phase") or "", 0)
    pb = _PHASE_ORDER.get((b.get("status") or {}).get("phase") or "", 0)
    if pa != pb:
        return -1 if pa < pb else 1
    if is_ready(a) != is_ready(b):
        return -1 if not is_ready(a) else 1
    if _cost(a) != _cost(b):
        return -1 if _cost(a) < _cost(b) else 1
    if is_ready(a) and is_ready(b):
        ra = _time((ready_condition(a) or {}).get("lastTransitionTime"))
        rb = _time((ready_condition(b) or {}).get("lastTransitionTime"))
        result = _compare_times(a, b, ra, rb, now)
        if result:
            return result
    if _max_restarts(a) != _max_restarts(b):
        return -1 if _max_restarts(a) > _max_restarts(b) else 1
    ca, cb = _time(a["metadata"].get("creationTimestamp")), _time(b["metadata"].get("creationTimestamp"))
    return _compare_times(a, b, ca, cb, now)


def pods_to_delete(pods: list[Obj], count: int, now: float) -> list[Obj]:
    if count >= len(pods):
        return list(pods)

    def compare(a: Obj, b: Obj) -> int:
        return _compare(a, b, now)

    ranked = sorted(pods, key=functools.cmp_to_key(compare))
    return ranked[:count]


# -- status --------------------------------------------------------------------------------------------
def replicaset_status(rs: Obj, pods: list[Obj], now: float, manage_error: str | None) -> Obj:
    """``calculateStatus``: counts over the active pods; ``replicas`` is always present."""
    status = copy.deepcopy(rs.get("status") or {})
    spec = rs.get("spec") or {}
    template_labels = label_selector_from_set(
        ((spec.get("template") or {}).get("metadata") or {}).get("labels")
    )
    min_ready = int(spec.get("minReadySeconds") or 0)
    counts = {
        "fullyLabeledReplicas": sum(
            1 for p in pods if template_labels.matches(p["metadata"].get("labels") or {})
        ),
        "readyReplicas": sum(1 for p in pods if is_ready(p)),
        "availableReplicas": sum(1 for p in pods if is_available(p, min_ready, now)),
    }
    _failure_condition(status, rs, len(pods), now, manage_error)
    status["replicas"] = len(pods)
    for name, value in counts.items():
        if value:
            status[name] = value
        else:
            status.pop(name, None)
    return status


def _failure_condition(status: Obj, rs: Obj, pod_count: int, now: float, manage_error: str | None) -> None:
    conditions = status.get("conditions") or []
    existing = next((c for c in conditions if c.get("type") == REPLICA_FAILURE), None)
    if manage_error is not None and existing is None:
        diff = pod_count - int((rs.get("spec") or {}).get("replicas") or 0)
        reason = "FailedCreate" if diff < 0 else ("FailedDelete" if diff > 0 else "")
        conditions.append(
            {
                "type": REPLICA_FAILURE,
                "status": "True",
                "lastTransitionTime": rfc3339(now),
                "reason": reason,
                "message": manage_error,
            }
        )
        status["conditions"] = conditions
    elif manage_error is None and existing is not None:
        kept = [c for c in conditions if c.get("type") != REPLICA_FAILURE]
        if kept:
            status["conditions"] = kept
        else:
            status.pop("conditions", None)
