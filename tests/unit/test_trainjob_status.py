"""TrainJob status as Kubeflow Trainer computes it, and pod DNS names resolved by the kubelet."""

from __future__ import annotations

from typing import Any

from airflow_k8s_ml.testbed.local_cluster.controllers.trainjob import status as st
from airflow_k8s_ml.testbed.local_cluster.kubelet.pod_dns import named_host, rewrite
from airflow_k8s_ml.testbed.local_cluster.meta import parse_time, rfc3339

Obj = dict[str, Any]
NOW = 1_700_000_000.0


def trainjob(**spec: Any) -> Obj:
    return {"metadata": {"name": "tj", "creationTimestamp": rfc3339(NOW)}, "spec": spec}


def test_suspended_then_resumed() -> None:
    status: Obj = {}
    st.set_suspended(status, trainjob(suspend=False), NOW)
    assert status["conditions"] == []  # never suspended: no condition at all
    st.set_suspended(status, trainjob(suspend=True), NOW)
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("Suspended", "True", "Suspended", "TrainJob is suspended")
    ]
    st.set_suspended(status, trainjob(suspend=False), NOW + 5)
    resumed = status["conditions"][0]
    assert (resumed["status"], resumed["reason"], resumed["message"]) == (
        "False",
        "Resumed",
        "TrainJob is resumed",
    )
    assert parse_time(resumed["lastTransitionTime"]) == NOW + 5


def test_jobset_terminal_conditions_and_counts_are_copied() -> None:
    jobset = {
        "status": {
            "conditions": [
                {"type": "StartupPolicyCompleted", "status": "True", "reason": "r", "message": "m"},
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "FailedJobs",
                    "message": "jobset failed due to one or more job failures (first failed job: tj-node-0)",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                },
            ],
            "replicatedJobsStatus": [
                {"name": "node", "ready": 0, "succeeded": 0, "failed": 1, "active": 0, "suspended": 0}
            ],
        }
    }
    status: Obj = {}
    st.from_jobset(status, jobset)
    assert status["conditions"] == [
        {
            "type": "Failed",
            "status": "True",
            "reason": "FailedJobs",
            "message": "jobset failed due to one or more job failures (first failed job: tj-node-0)",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
    assert status["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 0, "failed": 1, "active": 0, "suspended": 0}
    ]
    assert st.is_finished({"status": status})


def test_deadline_counts_from_creation_or_resume() -> None:
    assert st.deadline(trainjob(), {}) is None
    assert st.deadline(trainjob(activeDeadlineSeconds=30), {}) == NOW + 30
    assert st.deadline(trainjob(activeDeadlineSeconds=30, suspend=True), {}) is None
    resumed = {
        "conditions": [{"type": "Suspended", "status": "False", "lastTransitionTime": rfc3339(NOW + 100)}]
    }
    assert st.deadline(trainjob(activeDeadlineSeconds=30), resumed) == NOW + 130
    status: Obj = {}
    st.exceed_deadline(status, NOW)
    failed = status["conditions"][0]
    assert (failed["type"], failed["reason"], failed["message"]) == (
        "Failed",
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )
    assert st.deadline(trainjob(activeDeadlineSeconds=30), status) is None


def test_pod_dns_names_under_the_pods_subdomain() -> None:
    assert named_host("tj-node-0-0.tj", "ns", "tj") == "tj-node-0-0"
    assert named_host("tj-node-0-0.tj.ns.svc.cluster.local", "ns", "tj") == "tj-node-0-0"
    assert named_host("tj-node-0-0.other", "ns", "tj") is None
    assert named_host("example.com", "ns", "tj") is None
    ips = {"tj-node-0-0": "127.9.0.4"}
    env = {"PET_MASTER_ADDR": "tj-node-0-0.tj", "OTHER": "tj", "LATER": "tj-node-0-1.tj"}
    out = rewrite(env, "ns", "tj", lambda host, _sub: ips.get(host))
    assert out == {"PET_MASTER_ADDR": "127.9.0.4", "OTHER": "tj", "LATER": "tj-node-0-1.tj"}
    assert rewrite(env, "ns", None, lambda host, _sub: "x") == env


def test_managed_by_another_controller_is_left_alone() -> None:
    from airflow_k8s_ml.testbed.local_cluster.controllers.jobset.api import (
        managed_here as jobset_managed_here,
    )
    from airflow_k8s_ml.testbed.local_cluster.controllers.trainjob.api import (
        managed_here,
        registry_key,
        supported,
    )

    assert managed_here({"spec": {}})
    assert managed_here({"spec": {"managedBy": "trainer.kubeflow.org/trainjob-controller"}})
    assert not managed_here({"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}})
    assert jobset_managed_here({"spec": {"managedBy": "jobset.sigs.k8s.io/jobset-controller"}})
    assert not jobset_managed_here({"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}})
    ref = {
        "spec": {
            "runtimeRef": {"name": "x", "kind": "ClusterTrainingRuntime", "apiGroup": "trainer.kubeflow.org"}
        }
    }
    assert supported(ref) and registry_key(ref) == "ClusterTrainingRuntime.trainer.kubeflow.org"


def test_runtime_snapshot_round_trip_and_checks() -> None:
    import pytest

    from airflow_k8s_ml.testbed.local_cluster.controllers.trainjob.runtimes import torch_distributed
    from airflow_k8s_ml.testbed.local_cluster.controllers.trainjob.snapshot import (
        runtime_from_snapshot,
        snapshot_configmap,
    )

    tj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ns", "uid": "u1"},
        "spec": {
            "runtimeRef": {
                "name": "torch-distributed",
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
            }
        },
    }
    cm = snapshot_configmap(tj, torch_distributed())
    assert cm["metadata"]["name"] == "tj-runtime-snapshot"
    assert cm["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert runtime_from_snapshot(tj, cm) == torch_distributed()
    other = {**tj, "spec": {"runtimeRef": {**tj["spec"]["runtimeRef"], "name": "other"}}}
    with pytest.raises(ValueError, match="the snapshot refers to the wrong runtime"):
        runtime_from_snapshot(other, cm)
    stranger = {**tj, "metadata": {**tj["metadata"], "uid": "u2"}}
    with pytest.raises(ValueError, match="owned by another object"):
        runtime_from_snapshot(stranger, cm)


def test_next_status_keeps_a_deadline_failure_and_reports_expiry() -> None:
    ref = {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"}
    tj = trainjob(activeDeadlineSeconds=10, runtimeRef=ref)
    status, exceeded = st.next_status(tj, None, NOW + 5)
    assert not exceeded and status.get("conditions") == []
    tj["status"], exceeded = st.next_status(tj, None, NOW + 11)
    assert exceeded
    jobset = {
        "status": {
            "conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "m"}]
        }
    }
    status, exceeded = st.next_status(tj, jobset, NOW + 12)
    assert not exceeded
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "DeadlineExceeded"
    unsupported = {
        **trainjob(),
        "spec": {"runtimeRef": {"name": "x", "kind": "Foo", "apiGroup": "example.com"}},
    }
    status, _ = st.next_status(unsupported, None, NOW)
    assert [(c["reason"], c["message"]) for c in status["conditions"]] == [
        ("TrainingRuntimeNotSupported", "unsupported runtime: Foo.example.com")
    ]
