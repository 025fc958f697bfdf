from __future__ import annotations

import pytest

from airflow_k8s_ml.status.pytorchjob import classify_pytorchjob, failure_reason


def c(type_, status="True", message=None):
    return {
        "type": type_,
        "status": status,
        "reason": f"PyTorchJob{type_}",
        "message": message or f"PyTorchJob pt is {type_.lower()}.",
        "lastUpdateTime": "2024-05-01T10:00:00Z",
        "lastTransitionTime": "2024-05-01T10:00:00Z",
    }


def pt(conditions=None, suspend=None, replica_statuses=None):
    obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "pt", "namespace": "ml"},
        "spec": {"runPolicy": {"cleanPodPolicy": "None"}, "pytorchReplicaSpecs": {}},
    }
    if suspend is not None:
        obj["spec"]["runPolicy"]["suspend"] = suspend
    if conditions is not None:
        obj["status"] = {
            "conditions": conditions,
            "replicaStatuses": replica_statuses or {"Master": {"active": 1, "selector": "x"}},
            "startTime": "2024-05-01T10:00:00Z",
        }
    return obj


BACKOFF_MSG = "Job pt has failed because it has reached the specified backoff limit"
DEADLINE_MSG = "Job pt has failed because it was active longer than specified deadline"
NEVER_MSG = "PyTorchJob pt is failed because 1 Worker replica(s) failed."


@pytest.mark.parametrize(
    ("conditions", "suspend", "phase", "reason"),
    [
        (None, None, "pending", "Pending"),
        ([c("Created")], None, "pending", "PyTorchJobCreated"),
        ([c("Created"), c("Running")], None, "running", "PyTorchJobRunning"),
        ([c("Created"), c("Running", "False"), c("Restarting")], None, "running", "PyTorchJobRestarting"),
        ([c("Created"), c("Restarting", "False"), c("Running")], None, "running", "PyTorchJobRunning"),
        (
            [
                c("Created"),
                c("Running", "False"),
                c("Succeeded", message="PyTorchJob pt is successfully completed."),
            ],
            None,
            "succeeded",
            "PyTorchJobSucceeded",
        ),
        (
            [c("Created"), c("Running", "False"), c("Failed", message=BACKOFF_MSG)],
            None,
            "failed",
            "BackoffLimitExceeded",
        ),
        (
            [c("Created"), c("Running", "False"), c("Failed", message=DEADLINE_MSG)],
            None,
            "failed",
            "DeadlineExceeded",
        ),
        (
            [c("Created"), c("Running", "False"), c("Failed", message=NEVER_MSG)],
            None,
            "failed",
            "PyTorchJobFailed",
        ),
        # Failed is sticky: a Running appended after it does not resurrect the job.
        ([c("Created"), c("Failed", message=NEVER_MSG), c("Running")], None, "failed", "PyTorchJobFailed"),
        ([c("Created"), c("Suspended")], True, "pending", "PyTorchJobSuspended"),
        ([c("Created")], True, "pending", "PyTorchJobSuspended"),
        ([c("Created"), c("Suspended", "False"), c("Running")], False, "running", "PyTorchJobRunning"),
    ],
)
def test_classify_pytorchjob(conditions, suspend, phase, reason):
    state = classify_pytorchjob(pt(conditions, suspend))
    assert (state.phase, state.reason) == (phase, reason)


def test_failure_keeps_message_and_original_reason():
    state = classify_pytorchjob(pt([c("Created"), c("Failed", message=DEADLINE_MSG)]))
    assert state.message == DEADLINE_MSG
    assert state.details["condition_reason"] == "PyTorchJobFailed"


def test_replica_statuses_in_details():
    state = classify_pytorchjob(
        pt(
            [c("Created"), c("Running")],
            replica_statuses={"Master": {"active": 1, "selector": "s"}, "Worker": {"active": 2, "failed": 1}},
        )
    )
    assert state.details["replicaStatuses"] == {"Master": {"active": 1}, "Worker": {"active": 2, "failed": 1}}


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (BACKOFF_MSG, "BackoffLimitExceeded"),
        (DEADLINE_MSG, "DeadlineExceeded"),
        ("other", "PyTorchJobFailed"),
    ],
)
def test_failure_reason(message, expected):
    assert failure_reason("PyTorchJobFailed", message) == expected
