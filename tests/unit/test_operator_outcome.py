"""How outcomes are reported (pure): the success XCom and the task-log report of a failure."""

from __future__ import annotations

from airflow_k8s_ml.operators.outcome import event_report, result_payload
from airflow_k8s_ml.status import WorkloadState


def test_result_payload_has_identity_state_timing_and_attempts() -> None:
    state = WorkloadState(
        "succeeded",
        "CompletionsReached",
        "Reached expected number of succeeded pods",
        {"startTime": "2024-05-01T00:00:00Z", "completionTime": "2024-05-01T01:30:00Z"},
    )
    identity = {"kind": "Job", "name": "ft-a2", "namespace": "ml", "uid": "u"}
    result = result_payload(identity, state, 2, "s3://b/step-4/")
    assert result == {
        **identity,
        "state": state.to_payload(),
        "reason": "CompletionsReached",
        "started_at": "2024-05-01T00:00:00Z",
        "finished_at": "2024-05-01T01:30:00Z",
        "duration_seconds": 5400.0,
        "attempts": 2,
        "resumed_from": "s3://b/step-4/",
        "admitted_at": None,
    }
    assert result_payload(identity, WorkloadState("succeeded"), 1, None)["duration_seconds"] is None
    queued = result_payload(identity, state, 1, None, "2024-05-01T00:00:00Z")
    assert queued["admitted_at"] == "2024-05-01T00:00:00Z"


def test_event_report_lists_pods_first_failure_first_with_lines_and_events() -> None:
    pods = [
        {
            "replica": "worker-1",
            "pod": "pt-worker-1",
            "exit_code": 1,
            "problem": "Error",
            "last_lines": ["NCCL timeout"],
        },
        {
            "replica": "ft-abc",
            "pod": "ft-abc",
            "exit_code": None,
            "problem": "Unschedulable",
            "last_lines": [],
        },
    ]
    text = event_report(
        "PyTorchJob ml/pt", WorkloadState("failed", "PyTorchJobFailed"), pods, ["Pod/x FailedScheduling: no"]
    )
    assert text.splitlines() == [
        "PyTorchJob ml/pt: failed (PyTorchJobFailed)",
        "[worker-1] pod pt-worker-1 exited 1: Error",
        "  | NCCL timeout",
        "pod ft-abc: Unschedulable",
        "Warning events:",
        "  Pod/x FailedScheduling: no",
    ]
