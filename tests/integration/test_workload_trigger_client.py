"""KubeClient (the operators' side of kube/) through an Airflow connection: CRUD, apply, delete by uid,
wait_gone, pods, log tails, Warning events, and retries of injected 429/500."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from airflow_k8s_ml.kube.errors import ApiError
from airflow_k8s_ml.kube.retry import RetryPolicy
from airflow_k8s_ml.kube.sync_client import KubeClient
from airflow_k8s_ml.status import classify
from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import use_cluster

from .workload_helpers import job, metric


@pytest.fixture()
def client(fresh_cluster: ClusterThread, monkeypatch: pytest.MonkeyPatch) -> Iterator[KubeClient]:
    use_cluster(monkeypatch, fresh_cluster.kubeconfig_path, namespace="default")
    client = KubeClient(retry=RetryPolicy(backoffs=(0.05, 0.1, 0.2)))
    yield client
    client.close()


def test_namespace_comes_from_the_connection(client: KubeClient) -> None:
    assert client.namespace == "default"


def test_crud_apply_and_delete_by_uid(client: KubeClient) -> None:
    body = job("crud", "pass", suspend=True)
    created = client.create(body)
    assert client.get("batch/v1", "Job", "crud")["metadata"]["uid"] == created["metadata"]["uid"]  # type: ignore[index]
    assert client.get("batch/v1", "Job", "nope") is None
    listed = client.list("batch/v1", "Job", label_selector="")
    assert [j["metadata"]["name"] for j in listed] == ["crud"] and listed[0]["kind"] == "Job"
    assert classify(listed[0]).reason == "JobSuspended"
    with pytest.raises(ApiError) as info:
        client.create(body)
    assert info.value.conflict and info.value.reason == "AlreadyExists"

    _, outcome = client.apply(body)
    assert outcome == "unchanged"
    body["metadata"]["labels"] = {"team": "ml"}
    applied, outcome = client.apply(body)
    assert outcome == "configured" and applied["metadata"]["labels"]["team"] == "ml"

    assert client.delete("batch/v1", "Job", "crud", uid="someone-else") is False  # a stale reference
    assert client.delete("batch/v1", "Job", "crud", uid=created["metadata"]["uid"]) is True
    assert client.wait_gone("batch/v1", "Job", "crud", timeout=10)
    assert client.delete("batch/v1", "Job", "crud") is False


def test_apply_creates_when_missing(client: KubeClient) -> None:
    obj, outcome = client.apply(job("fresh", "pass", suspend=True))
    assert outcome == "created" and obj["metadata"]["uid"]


def test_pods_logs_and_warnings_of_a_failed_job(client: KubeClient) -> None:
    client.create(job("oops", "import sys; print('loading'); print('bad shard 7'); sys.exit(2)"))

    deadline = time.monotonic() + 15
    while not classify(client.get("batch/v1", "Job", "oops") or {}).terminal:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    pods = client.pods_of("Job", "oops")
    assert len(pods) == 1
    assert client.log_tail(pods[0]["metadata"]["name"], lines=1) == "bad shard 7\n"
    warnings = client.warning_events(client.get("batch/v1", "Job", "oops") or {})
    assert any(w.startswith("Job/oops BackoffLimitExceeded") for w in warnings)


def test_throttling_and_server_errors_are_retried(client: KubeClient, fresh_cluster: ClusterThread) -> None:
    fresh_cluster.cluster.faults.configure(
        {
            "rules": [
                {"verbs": "POST", "resources": "jobs", "code": 429, "retry_after": 0, "limit": 2},
                {"verbs": "GET", "resources": "jobs", "code": 500, "limit": 2},
            ]
        }
    )
    client.create(job("retried", "pass", suspend=True))
    assert client.get("batch/v1", "Job", "retried") is not None
    fresh_cluster.cluster.faults.clear()
    assert metric(client, "apiserver_request_total", verb="POST", code="429") == 2
    assert metric(client, "apiserver_request_total", verb="GET", resource="jobs", code="500") == 2
