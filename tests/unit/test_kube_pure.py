"""kube's pure core: REST paths, pod labels, replica names, Status -> ApiError, retry as data, warnings."""

from __future__ import annotations

import pytest

from airflow_k8s_ml.kube.errors import ApiError, api_error
from airflow_k8s_ml.kube.events import format_warnings, select_warnings
from airflow_k8s_ml.kube.resources import pod_label_key, pod_selector, replica_name, resource_for
from airflow_k8s_ml.kube.retry import RetryPolicy


def test_paths() -> None:
    job = resource_for(None, "Job")
    assert job.collection_path("ml") == "/apis/batch/v1/namespaces/ml/jobs"
    assert job.object_path("ml", "ft", "status") == "/apis/batch/v1/namespaces/ml/jobs/ft/status"
    assert resource_for("v1", "Pod").object_path("ml", "p", "log") == "/api/v1/namespaces/ml/pods/p/log"
    assert (
        resource_for(None, "PyTorchJob").collection_path("ml")
        == "/apis/kubeflow.org/v1/namespaces/ml/pytorchjobs"
    )
    assert resource_for("kubeflow.org/v1", "TFJob", plural="tfjobs").plural == "tfjobs"


def test_pod_labels() -> None:
    assert pod_selector("Job", "ft") == "batch.kubernetes.io/job-name=ft"
    legacy = {"spec": {"template": {"metadata": {"labels": {"job-name": "ft"}}}}}
    assert pod_label_key("Job", legacy) == "job-name"
    assert pod_selector("PyTorchJob", "pt") == "training.kubeflow.org/job-name=pt"
    assert pod_label_key("Deployment") is None
    master = {
        "metadata": {
            "name": "pt-master-0",
            "labels": {
                "training.kubeflow.org/replica-type": "Master",
                "training.kubeflow.org/replica-index": "0",
            },
        }
    }
    assert replica_name(master) == "master-0"
    assert replica_name({"metadata": {"name": "ft-x7k2p"}}) == "ft-x7k2p"


def test_status_to_error() -> None:
    body = b'{"kind":"Status","code":409,"reason":"AlreadyExists",'
    body += b'"message":"jobs.batch \\"ft\\" already exists"}'
    error = api_error(409, body)
    assert error.conflict and error.reason == "AlreadyExists" and 'jobs.batch "ft"' in error.message
    throttled = api_error(429, b"", {"Retry-After": "2"})
    assert throttled.retry_after == 2.0
    expired = api_error(200, {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"})
    assert expired.gone
    assert api_error(502, b"<html>bad gateway</html>").message == "<html>bad gateway</html>"


def test_retry_policy() -> None:
    policy = RetryPolicy(backoffs=(0.1, 0.2))
    assert policy.delay(ApiError(500, "InternalError", "x"), 0) == 0.1
    assert policy.delay(ApiError(429, "TooManyRequests", "x", retry_after=7), 1) == 7
    assert policy.delay(ApiError(500, "InternalError", "x"), 2) is None  # sequence exhausted
    assert policy.delay(ApiError(0, "ConnectionError", "reset"), 1) == 0.2
    for status in (400, 401, 403, 404, 409, 422):
        assert policy.delay(ApiError(status, "X", "x"), 0) is None


@pytest.mark.parametrize("count", [1, 3])
def test_warnings(count: int) -> None:
    events = [
        {
            "type": "Warning",
            "reason": "FailedScheduling",
            "message": "0/1 nodes are available",
            "count": count,
            "involvedObject": {"kind": "Pod", "name": "p", "uid": "u-pod"},
            "lastTimestamp": "2024-05-01T10:00:02Z",
        },
        {
            "type": "Warning",
            "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
            "involvedObject": {"kind": "Job", "name": "ft", "uid": "u-job"},
            "lastTimestamp": "2024-05-01T10:00:01Z",
        },
        {"type": "Normal", "reason": "Created", "involvedObject": {"uid": "u-pod"}},
        {"type": "Warning", "reason": "Other", "involvedObject": {"uid": "someone-else"}},
    ]
    lines = format_warnings(select_warnings(events, {"u-pod", "u-job"}))
    suffix = " (x3)" if count == 3 else ""
    assert lines == [
        "Job/ft BackoffLimitExceeded: Job has reached the specified backoff limit",
        f"Pod/p FailedScheduling: 0/1 nodes are available{suffix}",
    ]
