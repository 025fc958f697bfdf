"""How a finished workload is reported: the XCom of a success, the message of a failure or an expiry (pure).

Why here and not in the operator: the operator's ``execute_complete``, its adopt-after-success shortcut and
the sensor all report the same way, and the wording is tested without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from airflow_k8s_ml.status import WorkloadState

__all__ = ["deadline_message", "failure_message", "format_budget", "result_payload"]


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def result_payload(
    identity: Mapping[str, Any], state: WorkloadState, attempts: int, resumed_from: str | None
) -> dict[str, Any]:
    """The XCom of a succeeded workload: identity, final state, timing, attempts and the resume source.

    ``identity`` holds kind, name, namespace and uid. Times are the controller's (``status.startTime`` /
    ``completionTime``), so they describe the workload, not the Airflow task around it.
    """
    started_at = state.details.get("startTime")
    finished_at = state.details.get("completionTime")
    start, end = _parse_time(started_at), _parse_time(finished_at)
    duration = (end - start).total_seconds() if start and end else None
    return {
        "kind": identity["kind"],
        "name": identity["name"],
        "namespace": identity["namespace"],
        "uid": identity["uid"],
        "state": state.to_payload(),
        "reason": state.reason,
        "started_at": started_at,
        "finished_at": finished_at,
        "duration_seconds": duration,
        "attempts": attempts,
        "resumed_from": resumed_from,
    }


def failure_message(kind: str, namespace: str, name: str, state: WorkloadState, headline: str) -> str:
    """``Job ml/ft-abc failed: BackoffLimitExceeded: Job has reached the specified backoff limit; pod
    ft-abc-x7k2p exited 3 (Error): <last log line>``."""
    text = f"{kind} {namespace}/{name} failed: {state.reason or 'Failed'}"
    if state.message:
        text += f": {state.message}"
    if headline:
        text += f"; {headline}"
    return text


def format_budget(budget: timedelta | datetime | None) -> str:
    """``0:30:00`` for a duration, ISO 8601 for an absolute deadline, "" when unknown."""
    if isinstance(budget, datetime):
        return budget.isoformat()
    return str(budget) if budget is not None else ""


def deadline_message(phase: str, budget: timedelta | datetime | None, why: str) -> str:
    """``admission deadline 0:00:05 exceeded: 0/1 nodes are available: 1 Insufficient nvidia.com/gpu.``"""
    text = f"{phase} deadline"
    if budget is not None:
        text += f" {format_budget(budget)}"
    text += " exceeded"
    return f"{text}: {why}" if why else text
