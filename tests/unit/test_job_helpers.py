"""Pure Job-controller helpers: pod classification, failure policy, back-off, indexes, conditions."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster.controllers.job import conditions as jc
from airflow_k8s_ml.testbed.local_cluster.controllers.job import indexes as ji
from airflow_k8s_ml.testbed.local_cluster.controllers.job.failures import (
    BackoffRecord,
    backoff_duration,
    match_pod_failure_policy,
    next_backoff_record,
    remaining_backoff,
)
from airflow_k8s_ml.testbed.local_cluster.controllers.job.pods import (
    finished_time,
    generate_name_prefix,
    is_active,
    is_failed,
    is_terminating,
    new_pod,
    restart_count,
)
from airflow_k8s_ml.testbed.local_cluster.meta import parse_time

NEVER_JOB: dict[str, Any] = {"spec": {"podReplacementPolicy": "TerminatingOrFailed"}}
FAILED_ONLY_JOB: dict[str, Any] = {"spec": {"podReplacementPolicy": "Failed"}}


def pod(
    phase: str = "Running",
    *,
    deleting: bool = False,
    exit_code: int | None = None,
    finished_at: str = "2024-05-01T10:00:05Z",
    conditions: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "p",
        "namespace": "ns",
        "uid": "u",
        "creationTimestamp": "2024-05-01T10:00:00Z",
    }
    if deleting:
        meta["deletionTimestamp"] = "2024-05-01T10:00:40Z"
        meta["deletionGracePeriodSeconds"] = 30
    status: dict[str, Any] = {"phase": phase, "conditions": conditions or []}
    if exit_code is not None:
        status["containerStatuses"] = [
            {
                "name": "main",
                "restartCount": 0,
                "state": {"terminated": {"exitCode": exit_code, "finishedAt": finished_at}},
            }
        ]
    return {"metadata": meta, "status": status}


# -- classification ------------------------------------------------------------------------------------
def test_active_terminating_and_failed() -> None:
    assert is_active(pod("Running")) and not is_active(pod("Running", deleting=True))
    assert is_terminating(pod("Running", deleting=True)) and not is_terminating(pod("Failed", deleting=True))
    # A deleted, not succeeded pod counts as failed at once ... unless only Failed pods are replaced.
    assert is_failed(pod("Running", deleting=True), NEVER_JOB)
    assert not is_failed(pod("Running", deleting=True), FAILED_ONLY_JOB)
    assert not is_failed(pod("Succeeded", deleting=True), NEVER_JOB)
    assert is_failed(pod("Failed"), FAILED_ONLY_JOB)


def test_restart_count_sums_pending_and_running_pods_only() -> None:
    running = {
        "status": {
            "phase": "Running",
            "containerStatuses": [{"restartCount": 2}, {"restartCount": 1}],
            "initContainerStatuses": [{"restartCount": 1}],
        }
    }
    failed = {"status": {"phase": "Failed", "containerStatuses": [{"restartCount": 5}]}}
    assert restart_count([running, failed]) == 4


def test_finished_time_prefers_container_finish_then_deletion() -> None:
    assert finished_time(pod("Failed", exit_code=1)) == parse_time("2024-05-01T10:00:05Z")
    assert finished_time(pod("Running", deleting=True)) == parse_time("2024-05-01T10:00:10Z")
    assert finished_time(pod("Pending")) == parse_time("2024-05-01T10:00:00Z")


# -- pod construction ----------------------------------------------------------------------------------
JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "train", "namespace": "ns", "uid": "job-uid"},
    "spec": {
        "template": {
            "metadata": {"labels": {"job-name": "train"}},
            "spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "1"}]}]},
        }
    },
}


def test_new_pod_carries_owner_finalizer_and_labels() -> None:
    built = new_pod(JOB, None)
    meta = built["metadata"]
    assert meta["generateName"] == "train-"
    assert meta["finalizers"] == ["batch.kubernetes.io/job-tracking"]
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "train",
            "uid": "job-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert meta["labels"] == {"job-name": "train"}
    assert "annotations" not in meta


def test_indexed_pod_gets_index_annotation_label_env_and_hostname() -> None:
    built = new_pod(JOB, 4)
    meta = built["metadata"]
    assert meta["generateName"] == "train-4-"
    assert meta["annotations"]["batch.kubernetes.io/job-completion-index"] == "4"
    assert meta["labels"]["batch.kubernetes.io/job-completion-index"] == "4"
    assert built["spec"]["hostname"] == "train-4"
    env = built["spec"]["containers"][0]["env"]
    assert env[-1] == {
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {
            "fieldRef": {
                "apiVersion": "v1",
                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']",
            }
        },
    }
    assert JOB["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]


def test_generate_name_prefix_fits_63_characters() -> None:
    prefix = generate_name_prefix("x" * 70, 12)
    assert prefix.endswith("-12-") and len(prefix) + 5 <= 63


# -- pod failure policy --------------------------------------------------------------------------------
POLICY = {
    "rules": [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
        {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": [1]}},
    ]
}


def test_fail_job_rule_gives_upstream_message() -> None:
    message, counts, action = match_pod_failure_policy(POLICY, pod("Failed", exit_code=42))
    assert message == "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1"
    assert counts and action == "FailJob"


def test_ignore_rule_on_disruption_condition_does_not_count() -> None:
    evicted = pod("Failed", exit_code=137, conditions=[{"type": "DisruptionTarget", "status": "True"}])
    assert match_pod_failure_policy(POLICY, evicted) == (None, False, "Ignore")


def test_count_rule_and_no_match() -> None:
    assert match_pod_failure_policy(POLICY, pod("Failed", exit_code=3)) == (None, True, "Count")
    assert match_pod_failure_policy(POLICY, pod("Failed", exit_code=1)) == (None, True, None)
    assert match_pod_failure_policy(None, pod("Failed", exit_code=1)) == (None, True, None)


# -- back-off ------------------------------------------------------------------------------------------
def test_backoff_doubles_and_caps() -> None:
    assert [backoff_duration(n, 10, 360) for n in range(0, 8)] == [0, 10, 20, 40, 80, 160, 320, 360]


def test_backoff_record_counts_failures_after_last_success() -> None:
    first = next_backoff_record(
        BackoffRecord(), [], [pod("Failed", exit_code=1, finished_at="2024-05-01T10:00:05Z")]
    )
    assert first == BackoffRecord(1, parse_time("2024-05-01T10:00:05Z"))
    second = next_backoff_record(first, [], [pod("Failed", exit_code=1, finished_at="2024-05-01T10:00:20Z")])
    assert second.failures_after_last_success == 2
    success = pod("Succeeded", exit_code=0, finished_at="2024-05-01T10:00:30Z")
    assert next_backoff_record(second, [success], []) == BackoffRecord()
    later_failure = pod("Failed", exit_code=1, finished_at="2024-05-01T10:00:40Z")
    assert next_backoff_record(second, [success], [later_failure]).failures_after_last_success == 1


def test_remaining_backoff() -> None:
    record = BackoffRecord(2, 1000.0)
    assert remaining_backoff(record, 1005.0, 10, 360) == pytest.approx(15.0)
    assert remaining_backoff(record, 1021.0, 10, 360) == 0.0
    assert remaining_backoff(BackoffRecord(), 1005.0, 10, 360) == 0.0


# -- indexes -------------------------------------------------------------------------------------------
def test_indexes_round_trip_in_upstream_format() -> None:
    intervals = ji.to_intervals([0, 1, 2, 4, 6, 7])
    assert ji.format_indexes(intervals) == "0-2,4,6,7"
    assert ji.parse_indexes("0-2,4,6,7", 10) == intervals
    assert ji.parse_indexes("0-20", 3) == [(0, 2)]
    assert ji.total(intervals) == 6


def test_first_pending_indexes_skip_succeeded_and_active() -> None:
    active = {
        "metadata": {"annotations": {"batch.kubernetes.io/job-completion-index": "1"}},
        "status": {"phase": "Running"},
    }
    assert ji.first_pending_indexes([active], [(0, 0)], 2, 5) == [2, 3]


# -- conditions ----------------------------------------------------------------------------------------
def test_ensure_status_rules() -> None:
    conditions: list[dict[str, Any]] = []
    assert not jc.ensure_status(conditions, "Suspended", "False", "JobResumed", "Job resumed", 0)
    assert jc.ensure_status(conditions, "Suspended", "True", "JobSuspended", "Job suspended", 0)
    assert not jc.ensure_status(conditions, "Suspended", "True", "JobSuspended", "Job suspended", 5)
    assert jc.ensure_status(conditions, "Suspended", "False", "JobResumed", "Job resumed", 60)
    assert conditions == [
        {
            "type": "Suspended",
            "status": "False",
            "reason": "JobResumed",
            "message": "Job resumed",
            "lastProbeTime": "1970-01-01T00:01:00Z",
            "lastTransitionTime": "1970-01-01T00:01:00Z",
        }
    ]
