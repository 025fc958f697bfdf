"""WorkloadEvent: the one payload between the trigger and the operator."""

from __future__ import annotations

import json

import pytest

from airflow_k8s_ml.status import WorkloadState
from airflow_k8s_ml.triggers.events import WorkloadEvent


def test_round_trip_through_json() -> None:
    state = WorkloadState(
        "failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit", {"failed": 2}
    )
    event = WorkloadEvent(
        outcome="failed",
        kind="Job",
        name="ft",
        namespace="ml",
        uid="u1",
        state=state.to_payload(),
        message="Job ml/ft failed",
        log_cursor={"ft-abc": {"ts": "2024-05-01T10:00:00.1Z", "n": 1}},
        pods=[{"replica": "ft-abc", "exit_code": 3, "last_lines": ["boom"]}],
        warnings=["Job/ft BackoffLimitExceeded"],
        admitted_at="2024-05-01T09:59:00Z",
    )
    payload = json.loads(json.dumps(event.to_payload()))
    again = WorkloadEvent.from_payload(payload)
    assert again == event
    assert again.workload_state == state


def test_minimal_payload_defaults() -> None:
    event = WorkloadEvent.from_payload({"outcome": "error", "message": "gone"})
    assert event.expired_deadline is None and event.log_cursor is None and event.pods == []
    assert event.admitted_at is None
    assert event.workload_state.phase == "pending"


def test_unknown_outcome_is_refused() -> None:
    with pytest.raises(ValueError, match="outcome"):
        WorkloadEvent("timeout", "Job", "a", "b", "", {"phase": "pending"}, "")
