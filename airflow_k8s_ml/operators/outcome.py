"""How a finished workload is reported: the XCom of a success, the task-log report of a failure (pure).

Why here and not in the operator: the operator's ``execute_complete``, its return-without-relaunch shortcut
and the sensor all report the same way, and the wording is tested without a cluster. The failure *message*
itself is composed once, by the trigger (:func:`airflow_k8s_ml.triggers.diagnostics.failure_message`), and
travels in the :class:`~airflow_k8s_ml.triggers.events.WorkloadEvent`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from airflow_k8s_ml.status import WorkloadState
from airflow_k8s_ml.task_state_keys import OUTCOME_KEY

__all__ = ["OUTCOME_KEY", "event_report", "killed_message", "outcome_record", "result_payload"]


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def result_payload(
    identity: Mapping[str, Any],
    state: WorkloadState,
    attempts: int,
    resumed_from: str | None,
    admitted_at: str | None = None,
) -> dict[str, Any]:
    """The XCom of a succeeded workload: identity, final state, timing, attempts and the resume source.

    ``identity`` holds kind, name, namespace and uid. Times are the controller's (``status.startTime`` /
    ``completionTime``), so they describe the workload, not the Airflow task around it; ``admitted_at`` is
    Kueue's (its Workload's ``Admitted`` condition), None for a workload that was not queued.
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
        "admitted_at": admitted_at,
    }


def outcome_record(
    attempt: int, outcome: str, state: WorkloadState, expired_deadline: str | None, at: float
) -> dict[str, Any]:
    """What a failed attempt leaves in ``task_state_store`` for the UI: the outcome, the workload's final
    state (phase, reason, the controller's message) and the deadline that ran out.

    Not the event's message: that carries the failed pod's last log line, and the tab is readable by users
    who may not read the task logs.
    """
    payload = state.to_payload()
    return {
        "attempt": attempt,
        "outcome": outcome,
        "phase": payload.get("phase"),
        "reason": payload.get("reason") or "",
        "message": payload.get("message") or "",
        "expired_deadline": expired_deadline,
        "at": at,
    }


def event_report(
    what: str, state: WorkloadState, pods: Iterable[Mapping[str, Any]], warnings: Iterable[str]
) -> str:
    """:func:`airflow_k8s_ml.triggers.diagnostics.event_report`, by its old name: the report lives with the
    diagnostics it prints, where both waits log it (loaded on first use, not when a DAG is parsed)."""
    from airflow_k8s_ml.triggers.diagnostics import event_report as report

    return report(what, state, pods, warnings)


def killed_message(what: str) -> str:
    """Why the task failed when its own ``on_kill`` deleted the workload: the one wording.

    Why: a workload deleted in the foreground has its pods killed first, so its controller reads it as
    failed (a Job's ``BackoffLimitExceeded``, a PyTorchJob's failed replica) before it is gone, and a wait
    that reported that state would blame the training code for what the task's kill did."""
    return (
        f"{what} was deleted by the task's on_kill: the task was killed (marked failed or stopped) while "
        "the workload ran; a failed state it reads as afterwards is that deletion's, not the workload's"
    )
