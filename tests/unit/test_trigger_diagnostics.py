"""Failure diagnostics in the event: first failure first, small payload, one clear message."""

from __future__ import annotations

from airflow_k8s_ml.status import WorkloadState
from airflow_k8s_ml.triggers.diagnostics import failed_pods, failure_message, pod_report


def pod(name: str, replica: str, exit_code: int, finished: str) -> dict:
    return {
        "metadata": {
            "name": name,
            "labels": {
                "training.kubeflow.org/replica-type": replica.split("-")[0],
                "training.kubeflow.org/replica-index": replica.split("-")[1],
            },
        },
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "state": {
                        "terminated": {"exitCode": exit_code, "reason": "Error", "finishedAt": finished}
                    },
                }
            ],
        },
    }


def test_first_failure_first_and_message() -> None:
    pods = [
        pod("pt-master-0", "master-0", 1, "2024-05-01T10:00:09Z"),
        pod("pt-worker-1", "worker-1", 137, "2024-05-01T10:00:05Z"),
        {"metadata": {"name": "pt-worker-0"}, "status": {"phase": "Running"}},
    ]
    ordered = failed_pods(pods)
    assert [p["metadata"]["name"] for p in ordered] == ["pt-worker-1", "pt-master-0"]
    reports = [pod_report(ordered[0], ["x" * 1000, "RuntimeError: NCCL timeout"]), pod_report(ordered[1], [])]
    assert reports[0]["exit_code"] == 137 and len(reports[0]["last_lines"][0]) == 300
    state = WorkloadState(
        "failed", "PyTorchJobFailed", "PyTorchJob pt is failed because 1 Worker replica(s) failed."
    )
    message = failure_message("PyTorchJob", "ml", "pt", state, reports)
    assert message.startswith("PyTorchJob ml/pt failed (PyTorchJobFailed): PyTorchJob pt is failed")
    assert (
        "first failure: [worker-1] container pytorch terminated with exit code 137 (Error): RuntimeError"
        in message
    )
    assert "\n  [master-0] container pytorch terminated with exit code 1 (Error)" in message


def test_message_without_pods_is_the_state() -> None:
    state = WorkloadState("failed", "DeadlineExceeded", "Job was active longer than specified deadline")
    assert failure_message("Job", "ml", "ft", state, []) == (
        "Job ml/ft failed (DeadlineExceeded): Job was active longer than specified deadline"
    )


def test_within_the_same_second_the_replica_that_exited_on_its_own_is_the_first_failure() -> None:
    """A JobSet stops the other nodes as soon as one fails: they end by SIGTERM in the same second."""
    pods = [
        pod("tj-node-0-0-abcde", "master-0", 143, "2024-05-01T10:00:05Z"),
        pod("tj-node-0-1-fghij", "worker-1", 3, "2024-05-01T10:00:05Z"),
    ]
    assert [p["metadata"]["name"] for p in failed_pods(pods)] == ["tj-node-0-1-fghij", "tj-node-0-0-abcde"]
