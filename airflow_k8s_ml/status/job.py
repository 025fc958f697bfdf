"""batch/v1 Job status -> :class:`WorkloadState`, from the conditions the job controller writes.

Why conditions and not counters: ``failed > backoffLimit`` and friends are the controller's decision, and it
records the outcome as a condition (``FailureTarget`` then ``Failed``; ``SuccessCriteriaMet`` then
``Complete``). Reading the earliest terminal condition reports a failure as soon as it is decided, before the
controller has finished deleting pods, with the controller's own reason and message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.status._conditions import count, find, is_true, status_of
from airflow_k8s_ml.status.state import FAILED, PENDING, RUNNING, SUCCEEDED, WorkloadState

__all__ = ["classify_job"]


def _details(job: Mapping[str, Any]) -> dict[str, Any]:
    status = status_of(job)
    details: dict[str, Any] = {
        key: count(status, key) for key in ("active", "ready", "succeeded", "failed", "terminating")
    }
    for key in ("startTime", "completionTime"):
        if status.get(key):
            details[key] = status[key]
    return details


def classify_job(job: Mapping[str, Any]) -> WorkloadState:
    """Failed/FailureTarget -> failed (BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy, ...);
    Complete/SuccessCriteriaMet -> succeeded; Suspended or ``spec.suspend`` -> pending (JobSuspended, e.g.
    waiting for Kueue admission); active pods -> running; otherwise pending until the controller starts."""
    details = _details(job)
    for condition_type in ("Failed", "FailureTarget"):
        condition = find(job, condition_type)
        if is_true(condition):
            assert condition is not None
            return WorkloadState(
                FAILED, str(condition.get("reason") or "Failed"), str(condition.get("message") or ""), details
            )
    for condition_type in ("Complete", "SuccessCriteriaMet"):
        condition = find(job, condition_type)
        if is_true(condition):
            assert condition is not None
            return WorkloadState(
                SUCCEEDED,
                str(condition.get("reason") or "Complete"),
                str(condition.get("message") or "Job completed"),
                details,
            )
    suspended = find(job, "Suspended")
    if is_true(suspended) or (job.get("spec") or {}).get("suspend") is True:
        message = str((suspended or {}).get("message") or "Job suspended")
        return WorkloadState(PENDING, "JobSuspended", message, details)
    counts = (
        f"{details['active']} active ({details['ready']} ready), {details['succeeded']} succeeded, "
        f"{details['failed']} failed"
    )
    if details["active"] > 0:
        return WorkloadState(RUNNING, "Running", counts, details)
    if "startTime" in details:
        # Started but no pod active: between a failed pod and its replacement (pod backoff delay).
        return WorkloadState(RUNNING, "Retrying", f"waiting for a replacement pod: {counts}", details)
    return WorkloadState(PENDING, "Created", "waiting for the job controller to create pods", details)
