from __future__ import annotations

import json

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.status import WorkloadState, classify, classify_cronjob, classify_pod

JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "ft"},
    "status": {
        "conditions": [{"type": "Complete", "status": "True", "reason": "CompletionsReached", "message": "m"}]
    },
}
PYTORCHJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "pt"},
    "status": {"conditions": [{"type": "Created", "status": "True", "reason": "PyTorchJobCreated"}]},
}
DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "d", "generation": 1},
    "spec": {"replicas": 1},
    "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1},
}
CRONJOB = {
    "apiVersion": "batch/v1",
    "kind": "CronJob",
    "metadata": {"name": "c"},
    "spec": {"suspend": False},
    "status": {"lastScheduleTime": "2024-05-01T02:00:00Z"},
}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Running"}}


@pytest.mark.parametrize(
    ("obj", "phase", "reason"),
    [
        (JOB, "succeeded", "CompletionsReached"),
        (PYTORCHJOB, "pending", "PyTorchJobCreated"),
        (DEPLOYMENT, "succeeded", "RolledOut"),
        (CRONJOB, "pending", "Scheduled"),
        (POD, "running", "Running"),
    ],
)
def test_classify_dispatches_on_kind(obj, phase, reason):
    state = classify(obj)
    assert (state.phase, state.reason) == (phase, reason)


def test_list_items_without_kind():
    item = {k: v for k, v in JOB.items() if k not in ("kind", "apiVersion")}
    assert classify(item, kind="Job").succeeded
    with pytest.raises(ValidationError) as info:
        classify(item)
    assert info.value.field == "kind"


def test_foreign_group_is_refused():
    with pytest.raises(ValidationError) as info:
        classify({**JOB, "apiVersion": "example.com/v1"})
    assert info.value.field == "apiVersion"


def test_unknown_kind():
    with pytest.raises(ValidationError, match="cannot classify kind 'ConfigMap'"):
        classify({"apiVersion": "v1", "kind": "ConfigMap"})


def test_cronjob_states():
    assert (
        classify_cronjob({**CRONJOB, "status": {"active": [{"name": "c-28571234", "kind": "Job"}]}}).phase
        == "running"
    )
    assert classify_cronjob({**CRONJOB, "spec": {"suspend": True}}).reason == "Suspended"
    assert classify_cronjob({"spec": {}}).message == "not scheduled yet"


@pytest.mark.parametrize(
    ("status", "phase", "reason"),
    [
        ({"phase": "Succeeded"}, "succeeded", "Succeeded"),
        ({"phase": "Failed", "reason": "Evicted", "message": "low memory"}, "failed", "Evicted"),
        ({"phase": "Pending"}, "pending", "Pending"),
        ({}, "pending", "Pending"),
    ],
)
def test_classify_pod(status, phase, reason):
    state = classify_pod({"status": status})
    assert (state.phase, state.reason) == (phase, reason)


def test_workload_state_payload_round_trip_through_json():
    state = WorkloadState(
        "failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit", {"failed": 1}
    )
    payload = json.loads(json.dumps(state.to_payload()))
    assert WorkloadState.from_payload(payload) == state
    assert state.terminal and state.failed and not state.succeeded
    assert state.summary() == "failed (BackoffLimitExceeded): Job has reached the specified backoff limit"
    assert WorkloadState.from_payload({"phase": "running"}) == WorkloadState("running")


def test_workload_state_rejects_unknown_phase():
    with pytest.raises(ValueError):
        WorkloadState("exploded")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        WorkloadState("running").phase = "failed"  # type: ignore[misc]
