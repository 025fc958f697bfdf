"""trainer.kubeflow.org/v1alpha1 TrainJob status -> :class:`WorkloadState`.

Upstream's TrainJob controller keeps three condition types (``pkg/apis/trainer/v1alpha1/trainjob_types.go``,
``pkg/controller/trainjob_controller.go``): ``Suspended`` (True with reason ``Suspended``, flipped to False
with reason ``Resumed`` when un-suspended), and ``Complete``/``Failed``, which are the JobSet's ``Completed``
and ``Failed`` conditions copied with their reason and message (``AllJobsCompleted`` "jobset completed
successfully"; ``FailedJobs`` "jobset failed due to one or more job failures", ``ReachedMaxRestarts``, ...),
plus ``Failed`` with ``DeadlineExceeded`` ("TrainJob exceeded its active deadline") from
``activeDeadlineSeconds`` and ``TrainingRuntimeNotSupported``. There is no Running condition: while neither
is set, ``status.jobsStatus`` (the JobSet's replicated jobs: ready/active/succeeded/failed/suspended Job
counts) says whether nodes run. ``Failed`` wins over ``Complete`` (upstream keeps a deadline failure even
if the JobSet later completes), and ``spec.suspend`` counts before the controller wrote its condition, so a
Kueue-queued TrainJob is charged to the admission budget from its first observation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.status._conditions import count, find, is_true, status_of
from airflow_k8s_ml.status.state import FAILED, PENDING, RUNNING, SUCCEEDED, Phase, WorkloadState

__all__ = ["SUSPENDED_MESSAGE", "SUSPENDED_REASON", "classify_trainjob"]

#: Upstream's ``TrainJobSuspendedReason`` and ``TrainJobSuspendedMessage``.
SUSPENDED_REASON = "Suspended"
SUSPENDED_MESSAGE = "TrainJob is suspended"


def _jobs_status(job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = status_of(job).get("jobsStatus")
    return [item for item in items if isinstance(item, Mapping)] if isinstance(items, list) else []


def _details(job: Mapping[str, Any], condition: Mapping[str, Any] | None) -> dict[str, Any]:
    details: dict[str, Any] = {}
    counts = ("ready", "active", "succeeded", "failed", "suspended")
    jobs = {str(item.get("name")): {k: count(item, k) for k in counts} for item in _jobs_status(job)}
    if jobs:
        details["jobsStatus"] = jobs
    trainer = status_of(job).get("trainerStatus")
    if isinstance(trainer, Mapping):
        for key in ("progressPercentage", "estimatedRemainingSeconds"):
            if isinstance(trainer.get(key), int):
                details[key] = trainer[key]
    if condition is not None and condition.get("reason"):
        details["condition_reason"] = condition["reason"]
    return details


def _state(phase: Phase, condition: Mapping[str, Any], job: Mapping[str, Any], default: str) -> WorkloadState:
    reason = str(condition.get("reason") or default)
    return WorkloadState(phase, reason, str(condition.get("message") or ""), _details(job, condition))


def classify_trainjob(job: Mapping[str, Any]) -> WorkloadState:
    failed = find(job, "Failed")
    if is_true(failed):
        assert failed is not None
        return _state(FAILED, failed, job, "TrainJobFailed")
    complete = find(job, "Complete")
    if is_true(complete):
        assert complete is not None
        return _state(SUCCEEDED, complete, job, "TrainJobComplete")
    suspended = find(job, "Suspended")
    if ((job.get("spec") or {}).get("suspend") is True) or is_true(suspended):
        message = str((suspended or {}).get("message") or "") if is_true(suspended) else ""
        details = _details(job, suspended)
        return WorkloadState(PENDING, SUSPENDED_REASON, message or SUSPENDED_MESSAGE, details)
    jobs = _jobs_status(job)
    if any(count(item, "active") or count(item, "ready") for item in jobs):
        return WorkloadState(RUNNING, "Running", "the JobSet's jobs are active", _details(job, None))
    waiting = "waiting for the TrainJob controller to create its JobSet's pods"
    return WorkloadState(PENDING, "Pending", waiting, _details(job, None))
