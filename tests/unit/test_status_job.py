from __future__ import annotations

import pytest

from airflow_k8s_ml.status.job import classify_job

T0 = "2024-05-01T10:00:00Z"
T1 = "2024-05-01T10:05:00Z"


def cond(type_, reason, message, status="True"):
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": T1,
        "lastTransitionTime": T1,
    }


def job(status=None, suspend=None):
    obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "ft", "namespace": "ml", "uid": "u1"},
        "spec": {"backoffLimit": 0, "template": {}},
    }
    if suspend is not None:
        obj["spec"]["suspend"] = suspend
    if status is not None:
        obj["status"] = status
    return obj


SUCCEEDED = {
    "conditions": [
        cond("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods"),
        cond("Complete", "CompletionsReached", "Reached expected number of succeeded pods"),
    ],
    "startTime": T0,
    "completionTime": T1,
    "succeeded": 1,
    "ready": 0,
    "terminating": 0,
    "uncountedTerminatedPods": {},
}
SUCCEEDED_PRE_131 = {
    "conditions": [{"type": "Complete", "status": "True", "lastProbeTime": T1}],
    "succeeded": 1,
}
BACKOFF = {
    "conditions": [
        cond("FailureTarget", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
        cond("Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
    ],
    "startTime": T0,
    "failed": 1,
    "ready": 0,
    "terminating": 0,
}
DEADLINE = {
    "conditions": [
        cond("FailureTarget", "DeadlineExceeded", "Job was active longer than specified deadline"),
        cond("Failed", "DeadlineExceeded", "Job was active longer than specified deadline"),
    ],
    "startTime": T0,
    "failed": 1,
}
POD_FAILURE_POLICY = {
    "conditions": [
        cond(
            "FailureTarget",
            "PodFailurePolicy",
            "Container main for pod ml/ft-abcde failed with exit code 42 matching FailJob rule at index 0",
        ),
    ],
    "startTime": T0,
    "failed": 1,
    "terminating": 1,
}
SUSPENDED = {"conditions": [cond("Suspended", "JobSuspended", "Job suspended")]}
RESUMED_RUNNING = {
    "conditions": [cond("Suspended", "JobResumed", "Job resumed", status="False")],
    "startTime": T0,
    "active": 1,
    "ready": 1,
}
RUNNING = {"startTime": T0, "active": 1, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}}
RETRYING = {"startTime": T0, "active": 0, "failed": 1}


@pytest.mark.parametrize(
    ("status", "suspend", "phase", "reason", "message"),
    [
        (SUCCEEDED, None, "succeeded", "CompletionsReached", "Reached expected number of succeeded pods"),
        (SUCCEEDED_PRE_131, None, "succeeded", "Complete", "Job completed"),
        (BACKOFF, None, "failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
        (DEADLINE, None, "failed", "DeadlineExceeded", "Job was active longer than specified deadline"),
        (POD_FAILURE_POLICY, None, "failed", "PodFailurePolicy", "exit code 42 matching FailJob rule"),
        (SUSPENDED, True, "pending", "JobSuspended", "Job suspended"),
        (None, True, "pending", "JobSuspended", "Job suspended"),  # Kueue-queued, controller not synced yet
        (RESUMED_RUNNING, False, "running", "Running", "1 active (1 ready)"),
        (RUNNING, None, "running", "Running", "1 active (0 ready), 0 succeeded, 0 failed"),
        (RETRYING, None, "running", "Retrying", "1 failed"),
        (None, None, "pending", "Created", "waiting for the job controller"),
        ({}, None, "pending", "Created", ""),
    ],
)
def test_classify_job(status, suspend, phase, reason, message):
    state = classify_job(job(status, suspend))
    assert state.phase == phase
    assert state.reason == reason
    assert message in state.message


def test_details_carry_counts_and_times():
    state = classify_job(job(SUCCEEDED))
    assert state.details["succeeded"] == 1
    assert state.details["startTime"] == T0 and state.details["completionTime"] == T1
    assert state.terminal and state.succeeded


def test_false_terminal_conditions_are_ignored():
    status = {
        "conditions": [cond("Failed", "BackoffLimitExceeded", "x", status="False")],
        "startTime": T0,
        "active": 1,
    }
    assert classify_job(job(status)).phase == "running"
