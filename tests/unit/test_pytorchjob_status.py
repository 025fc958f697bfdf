"""PyTorchJob status rules: replica counting, UpdateJobStatus, backoff and deadline checks."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.testbed.local_cluster.controllers.pytorchjob.admission import set_defaults
from airflow_k8s_ml.testbed.local_cluster.controllers.pytorchjob.status import (
    count_pod,
    limit_failure,
    normalized,
    slices,
    update_job_status,
)

T0 = 1_700_000_000.0


def job(worker_policy: str = "OnFailure", **run_policy: Any) -> dict[str, Any]:
    def replica(replicas: int, policy: str) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "restartPolicy": policy,
            "template": {"spec": {"containers": [{"name": "pytorch", "image": "img"}]}},
        }

    body = {
        "metadata": {"name": "train", "namespace": "ml", "uid": "u"},
        "spec": {
            "pytorchReplicaSpecs": {"Master": replica(1, "OnFailure"), "Worker": replica(2, worker_policy)},
            "runPolicy": run_policy,
        },
    }
    set_defaults(body)
    return body


def pod(rtype: str, index: int, phase: str, restarts: int = 0, terminating: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"train-{rtype}-{index}",
        "labels": {
            "training.kubeflow.org/replica-type": rtype,
            "training.kubeflow.org/replica-index": str(index),
        },
    }
    if terminating:
        meta["deletionTimestamp"] = "2023-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "pytorch", "restartCount": restarts, "state": {"running": {}}}],
        },
    }


def status_for(
    body: dict[str, Any], pods: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[tuple[str, ...]]]:
    status: dict[str, Any] = {"replicaStatuses": {}}
    for rtype in ("Master", "Worker"):
        rs = status["replicaStatuses"].setdefault(rtype, {})
        for p in pods:
            if p["metadata"]["labels"]["training.kubeflow.org/replica-type"] == rtype.lower():
                count_pod(rs, p)
    events: list[tuple[str, ...]] = []
    update_job_status(body, status, T0, lambda *e: events.append(e))
    return status, events


def true_types(status: dict[str, Any]) -> list[str]:
    return [c["type"] for c in status.get("conditions") or [] if c["status"] == "True"]


def test_pending_pods_count_nothing_and_terminating_running_pods_count_failed() -> None:
    rs: dict[str, Any] = {}
    for p in (
        pod("worker", 0, "Pending"),
        pod("worker", 1, "Running", terminating=True),
        pod("worker", 2, "Running"),
        pod("worker", 3, "Succeeded"),
    ):
        count_pod(rs, p)
    assert rs == {"failed": 1, "active": 1, "succeeded": 1}


def test_slices_place_pods_by_index_and_keep_out_of_range_ones() -> None:
    buckets = slices(
        [pod("worker", 3, "Running"), pod("worker", 0, "Running"), pod("master", 0, "Running")], "Worker", 2
    )
    assert [[p["metadata"]["name"] for p in b] for b in buckets] == [
        ["train-worker-0"],
        [],
        [],
        ["train-worker-3"],
    ]


def test_master_running_then_succeeded() -> None:
    status, _ = status_for(job(), [pod("master", 0, "Running"), pod("worker", 0, "Pending")])
    assert true_types(status) == ["Running"]
    assert status["startTime"] == "2023-11-14T22:13:20Z"
    assert status["replicaStatuses"]["Worker"]["selector"].endswith("replica-type=worker")

    status, events = status_for(job(), [pod("master", 0, "Succeeded"), pod("worker", 0, "Running")])
    assert true_types(status) == ["Succeeded"]
    assert status["completionTime"] == "2023-11-14T22:13:20Z"
    assert events == [("Normal", "PyTorchJobSucceeded", "PyTorchJob train is successfully completed.")]


def test_worker_failure_restarts_or_fails_by_policy() -> None:
    pods = [pod("master", 0, "Running"), pod("worker", 0, "Failed"), pod("worker", 1, "Running")]
    status, events = status_for(job(), pods)
    assert true_types(status) == ["Restarting"]
    assert events == [
        (
            "Warning",
            "PyTorchJobRestarting",
            "PyTorchJob train is restarting because 1 Worker replica(s) failed.",
        )
    ]

    status, events = status_for(job("Never"), pods)
    assert true_types(status) == ["Failed"]
    assert events == [
        ("Normal", "PyTorchJobFailed", "PyTorchJob train is failed because 1 Worker replica(s) failed.")
    ]


def test_backoff_limit_counts_restarts_of_running_pods() -> None:
    body = job(backoffLimit=3)
    pods = [pod("master", 0, "Running", restarts=1), pod("worker", 0, "Running", restarts=2)]
    assert limit_failure(body, {}, pods, 3, T0) == (
        "Job train has failed because it has reached the specified backoff limit"
    )
    assert limit_failure(body, {}, [pods[0], pod("worker", 0, "Pending", restarts=5)], 3, T0) is None
    # Never replicas are not counted: only the Master's one restart is left, below the limit.
    assert limit_failure(job("Never", backoffLimit=3), {}, pods, 3, T0) is None


def test_backoff_limit_zero_fails_on_a_new_failed_pod() -> None:
    pods = [pod("master", 0, "Running"), pod("worker", 0, "Failed"), pod("worker", 1, "Running")]
    assert limit_failure(job(backoffLimit=0), {}, pods, 3, T0) is not None
    already_counted = {"replicaStatuses": {"Worker": {"failed": 1}}}
    assert limit_failure(job(backoffLimit=0), already_counted, pods, 3, T0) is None


def test_active_deadline_counts_from_start_time() -> None:
    status = {"startTime": "2023-11-14T22:13:20Z"}
    assert limit_failure(job(activeDeadlineSeconds=10), status, [], 3, T0 + 9) is None
    assert limit_failure(job(activeDeadlineSeconds=10), status, [], 3, T0 + 10) == (
        "Job train has failed because it was active longer than specified deadline"
    )


def test_normalized_drops_zero_counters_like_omitempty() -> None:
    status = {
        "completionTime": "c",
        "replicaStatuses": {"Worker": {"active": 0, "failed": 2, "selector": "s"}, "Master": {}},
        "startTime": "s",
        "conditions": [],
    }
    assert normalized(status) == {
        "conditions": [],
        "replicaStatuses": {"Master": {}, "Worker": {"failed": 2, "selector": "s"}},
        "startTime": "s",
        "completionTime": "c",
    }
    assert list(normalized(status)) == ["conditions", "replicaStatuses", "startTime", "completionTime"]
