"""ReplicaSet pods: the pod built from the template, which pods a scale-down removes, the RS status."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.testbed.local_cluster.controllers.deployment.replicaset_pods import (
    pod_from_template,
    pods_to_delete,
    replicaset_status,
)
from airflow_k8s_ml.testbed.local_cluster.meta import rfc3339

NOW = 1_700_000_000.0


def rs(min_ready: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-abc", "namespace": "ns", "uid": "rs-uid"},
        "spec": {
            "replicas": 3,
            "minReadySeconds": min_ready,
            "template": {
                "metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}, "annotations": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }


def pod(
    name: str,
    phase: str = "Running",
    ready_since: float | None = None,
    created: float = NOW - 1000,
    node: str = "local-node",
    restarts: int = 0,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    conditions = (
        []
        if ready_since is None
        else [{"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(ready_since)}]
    )
    return {
        "metadata": {
            "name": name,
            "uid": name,
            "creationTimestamp": rfc3339(created),
            "labels": labels or {"app": "web", "pod-template-hash": "abc"},
        },
        "spec": {"nodeName": node},
        "status": {
            "phase": phase,
            "conditions": conditions,
            "containerStatuses": [{"name": "c", "restartCount": restarts}],
        },
    }


def test_pod_from_template() -> None:
    built = pod_from_template(rs())
    assert built["metadata"]["generateName"] == "web-abc-"
    assert built["metadata"]["labels"] == {"app": "web", "pod-template-hash": "abc"}
    assert built["metadata"]["annotations"] == {"a": "b"}
    assert built["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web-abc",
            "uid": "rs-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert built["spec"] == {"containers": [{"name": "c", "image": "x"}]}


def test_scale_down_prefers_unscheduled_pending_unready_then_recently_ready() -> None:
    pods = [
        pod("old-ready", ready_since=NOW - 10_000),
        pod("new-ready", ready_since=NOW - 5),
        pod("unready"),
        pod("pending", phase="Pending"),
        pod("unscheduled", phase="Pending", node=""),
    ]
    order = [p["metadata"]["name"] for p in pods_to_delete(pods, 4, NOW)]
    assert order == ["unscheduled", "pending", "unready", "new-ready"]
    assert [p["metadata"]["name"] for p in pods_to_delete(pods, 10, NOW)] == [
        p["metadata"]["name"] for p in pods
    ]


def test_restarts_then_age_break_ties() -> None:
    pods = [
        pod("steady", created=NOW - 10_000),
        pod("flaky", restarts=3, created=NOW - 10_000),
        pod("young", created=NOW - 2),
    ]
    assert [p["metadata"]["name"] for p in pods_to_delete(pods, 2, NOW)] == ["flaky", "young"]


def test_status_counts_ready_available_and_fully_labeled() -> None:
    pods = [pod("a", ready_since=NOW - 100), pod("b", ready_since=NOW - 1), pod("c", labels={"app": "web"})]
    status = replicaset_status(rs(min_ready=10), pods, NOW, None)
    assert status == {"replicas": 3, "fullyLabeledReplicas": 2, "readyReplicas": 2, "availableReplicas": 1}
    failed = replicaset_status(rs(), [], NOW, "quota exceeded")
    assert failed["replicas"] == 0 and "readyReplicas" not in failed
    assert failed["conditions"][0] == {
        "type": "ReplicaFailure",
        "status": "True",
        "lastTransitionTime": rfc3339(NOW),
        "reason": "FailedCreate",
        "message": "quota exceeded",
    }
    assert "conditions" not in replicaset_status({**rs(), "status": failed}, [], NOW, None)
