"""kubeflow.org/v1 PyTorchJob (and TFJob) status -> :class:`WorkloadState`.

The training operator's v1 kinds share one job status (``JobStatus``: conditions, replica statuses) and one
condition logic; only the reasons' prefix is the kind's (``PyTorchJobFailed``, ``TFJobFailed``), so
:func:`classify_kubeflow_job` reads any of them and :func:`classify_pytorchjob` is it for PyTorchJob.

The training operator keeps one condition per type (Created, Running, Restarting, Succeeded, Failed,
Suspended); it flips Running/Restarting against each other and appends the newest last. So: ``Failed`` True
wins whenever present (it is sticky, even if a later Running shows up), then ``Succeeded``, then the last
condition with status True. The operator's failure reason is always ``PyTorchJobFailed``; the message says
why, so we derive the same reasons Jobs use (BackoffLimitExceeded, DeadlineExceeded) and keep the original
in ``details["condition_reason"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.status._conditions import conditions, find, is_true, status_of
from airflow_k8s_ml.status.state import FAILED, PENDING, RUNNING, SUCCEEDED, Phase, WorkloadState

__all__ = ["classify_kubeflow_job", "classify_pytorchjob", "failure_reason"]

_PHASE_BY_CONDITION: dict[str, Phase] = {
    "Created": PENDING,
    "Suspended": PENDING,
    "Running": RUNNING,
    "Restarting": RUNNING,
    "Succeeded": SUCCEEDED,
    "Failed": FAILED,
}


def failure_reason(condition_reason: str, message: str, kind: str = "PyTorchJob") -> str:
    """Map the operator's generic ``<Kind>Failed`` to a specific reason when the message tells it."""
    text = message.lower()
    if "backoff limit" in text:
        return "BackoffLimitExceeded"
    if "active longer than specified deadline" in text:
        return "DeadlineExceeded"
    return condition_reason or f"{kind}Failed"


def _details(job: Mapping[str, Any], condition: Mapping[str, Any] | None) -> dict[str, Any]:
    status = status_of(job)
    details: dict[str, Any] = {}
    replica_statuses = status.get("replicaStatuses")
    if isinstance(replica_statuses, Mapping):
        details["replicaStatuses"] = {
            role: {k: v for k, v in counts.items() if k in ("active", "succeeded", "failed")}
            for role, counts in replica_statuses.items()
            if isinstance(counts, Mapping)
        }
    for key in ("startTime", "completionTime"):
        if status.get(key):
            details[key] = status[key]
    if condition is not None and condition.get("reason"):
        details["condition_reason"] = condition["reason"]
    return details


def classify_pytorchjob(job: Mapping[str, Any]) -> WorkloadState:
    return classify_kubeflow_job(job, "PyTorchJob")


def classify_kubeflow_job(job: Mapping[str, Any], kind: str) -> WorkloadState:
    """A training-operator v1 job of ``kind`` (PyTorchJob, TFJob) as a :class:`WorkloadState`."""
    failed = find(job, "Failed")
    if is_true(failed):
        assert failed is not None
        message = str(failed.get("message") or "")
        reason = failure_reason(str(failed.get("reason") or ""), message, kind)
        return WorkloadState(FAILED, reason, message, _details(job, failed))
    succeeded = find(job, "Succeeded")
    if is_true(succeeded):
        assert succeeded is not None
        reason = str(succeeded.get("reason") or f"{kind}Succeeded")
        return WorkloadState(SUCCEEDED, reason, str(succeeded.get("message") or ""), _details(job, succeeded))
    latest = next((c for c in reversed(conditions(job)) if is_true(c)), None)
    suspended_in_spec = ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True
    if suspended_in_spec and (latest is None or latest.get("type") != "Suspended"):
        return WorkloadState(PENDING, f"{kind}Suspended", f"{kind} is suspended", _details(job, latest))
    if latest is None or latest.get("type") not in _PHASE_BY_CONDITION:
        return WorkloadState(
            PENDING, "Pending", "waiting for the training operator to create pods", _details(job, latest)
        )
    condition_type = str(latest["type"])
    reason = str(latest.get("reason") or f"{kind}{condition_type}")
    return WorkloadState(
        _PHASE_BY_CONDITION[condition_type], reason, str(latest.get("message") or ""), _details(job, latest)
    )
