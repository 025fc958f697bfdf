"""A TrainJob's status as Kubeflow Trainer's controller computes it (pure): trainjob_controller.go
(``setSuspendedCondition``, ``setFailedCondition``, ``reconcileDeadline``) and the jobset plugin's
``Status`` (JobSet Completed/Failed copied as Complete/Failed with their reason and message, ``jobsStatus``
from ``replicatedJobsStatus``).
"""

from __future__ import annotations

import copy

from ...meta import parse_time
from ..metav1_conditions import condition, find, is_true, set_status_condition
from .api import (
    COMPLETE,
    DEADLINE_EXCEEDED_MESSAGE,
    DEADLINE_EXCEEDED_REASON,
    FAILED,
    RESUMED_MESSAGE,
    RESUMED_REASON,
    RUNTIME_NOT_SUPPORTED_REASON,
    SUSPENDED,
    SUSPENDED_MESSAGE,
    SUSPENDED_REASON,
    Obj,
    registry_key,
    supported,
    suspended,
)

JOBSET_COMPLETED, JOBSET_FAILED = "Completed", "Failed"


def is_finished(tj: Obj) -> bool:
    conditions = (tj.get("status") or {}).get("conditions")
    return is_true(conditions, COMPLETE) or is_true(conditions, FAILED)


def set_suspended(status: Obj, tj: Obj, now: float) -> None:
    """Suspended True while ``spec.suspend``; turned False (Resumed) once it is lifted, never added False."""
    conditions = status.setdefault("conditions", [])
    if suspended(tj):
        set_status_condition(
            conditions, condition(SUSPENDED, "True", SUSPENDED_REASON, SUSPENDED_MESSAGE, now)
        )
    elif is_true(conditions, SUSPENDED):
        set_status_condition(conditions, condition(SUSPENDED, "False", RESUMED_REASON, RESUMED_MESSAGE, now))


def set_failed(status: Obj, reason: str, message: str, now: float) -> None:
    set_status_condition(status.setdefault("conditions", []), condition(FAILED, "True", reason, message, now))


def from_jobset(status: Obj, jobset: Obj) -> None:
    """The jobset plugin's ``Status``: terminal JobSet conditions and the per-job counts."""
    js_status = jobset.get("status") or {}
    conditions = status.setdefault("conditions", [])
    for source, target in ((JOBSET_COMPLETED, COMPLETE), (JOBSET_FAILED, FAILED)):
        found = find(js_status.get("conditions"), source)
        if found is not None and found.get("status") == "True":
            set_status_condition(conditions, {**copy.deepcopy(found), "type": target})
    jobs = [
        {
            k: int(s.get(k) or 0) if k != "name" else s.get("name")
            for k in ("name", "ready", "succeeded", "failed", "active", "suspended")
        }
        for s in js_status.get("replicatedJobsStatus") or []
    ]
    if jobs:
        status["jobsStatus"] = jobs
    else:
        status.pop("jobsStatus", None)


def deadline(tj: Obj, status: Obj) -> float | None:
    """When ``activeDeadlineSeconds`` runs out: from creation, or from the last resume (None: no deadline,
    finished or suspended)."""
    seconds = (tj.get("spec") or {}).get("activeDeadlineSeconds")
    if not seconds or suspended(tj) or is_finished({"status": status}):
        return None
    start = parse_time(tj["metadata"]["creationTimestamp"])
    resumed = find(status.get("conditions"), SUSPENDED)
    if resumed is not None and resumed.get("status") == "False" and resumed.get("lastTransitionTime"):
        start = parse_time(resumed["lastTransitionTime"])
    return start + float(seconds)


def exceed_deadline(status: Obj, now: float) -> None:
    set_failed(status, DEADLINE_EXCEEDED_REASON, DEADLINE_EXCEEDED_MESSAGE, now)


def next_status(tj: Obj, jobset: Obj | None, now: float) -> tuple[Obj, bool]:
    """One reconcile's status (``Reconcile`` after ``reconcileObjects``), and whether the active deadline
    ran out now (the caller then deletes the JobSet). A DeadlineExceeded failure survives the JobSet's."""
    status = copy.deepcopy(tj.get("status") or {})
    if not supported(tj):
        set_failed(status, RUNTIME_NOT_SUPPORTED_REASON, f"unsupported runtime: {registry_key(tj)}", now)
    set_suspended(status, tj, now)
    kept = find(status.get("conditions"), FAILED)
    if kept is not None and kept.get("reason") != DEADLINE_EXCEEDED_REASON:
        kept = None
    if jobset is not None:
        from_jobset(status, jobset)
    if kept is not None:
        set_failed(status, DEADLINE_EXCEEDED_REASON, str(kept.get("message")), now)
    due = deadline(tj, status)
    exceeded = due is not None and now > due
    if exceeded:
        exceed_deadline(status, now)
    return status, exceeded
