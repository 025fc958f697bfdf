"""Job admission: upstream's defaults, generated selector and 422 messages (pure, no server)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster.controllers.job.admission import admit_job
from airflow_k8s_ml.testbed.local_cluster.errors import StatusError

UID = "0b0b0b0b-1111-2222-3333-444444444444"


def job(**spec: Any) -> dict[str, Any]:
    template = spec.pop("template", None) or {
        "spec": {"containers": [{"name": "main", "image": "python"}], "restartPolicy": "Never"}
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "pi", "namespace": "ns", "uid": UID},
        "spec": {"template": template, **spec},
    }


def rejected(obj: dict[str, Any], old: dict[str, Any] | None = None) -> StatusError:
    with pytest.raises(StatusError) as info:
        admit_job(obj, old)
    assert info.value.code == 422
    assert info.value.reason == "Invalid"
    return info.value


def test_defaults_and_generated_selector_like_upstream() -> None:
    admitted = admit_job(job(), None)
    spec = admitted["spec"]
    assert spec["completions"] == 1 and spec["parallelism"] == 1
    assert spec["backoffLimit"] == 6
    assert spec["completionMode"] == "NonIndexed"
    assert spec["suspend"] is False and spec["manualSelector"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}}
    expected_labels = {
        "batch.kubernetes.io/controller-uid": UID,
        "batch.kubernetes.io/job-name": "pi",
        "controller-uid": UID,
        "job-name": "pi",
    }
    assert spec["template"]["metadata"]["labels"] == expected_labels
    # A Job without labels shows its template's labels (upstream defaulting on read).
    assert admitted["metadata"]["labels"] == expected_labels


def test_user_labels_are_kept_and_parallelism_alone_leaves_completions_unset() -> None:
    obj = job(parallelism=3)
    obj["metadata"]["labels"] = {"team": "ml"}
    admitted = admit_job(obj, None)
    assert admitted["metadata"]["labels"] == {"team": "ml"}
    assert admitted["spec"]["parallelism"] == 3 and "completions" not in admitted["spec"]


def test_pod_failure_policy_defaults_replacement_policy_failed_and_condition_status() -> None:
    policy = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    admitted = admit_job(job(podFailurePolicy=policy), None)
    assert admitted["spec"]["podReplacementPolicy"] == "Failed"
    assert admitted["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["status"] == "True"


def test_restart_policy_always_or_missing_is_rejected_with_upstream_message() -> None:
    obj = job()
    del obj["spec"]["template"]["spec"]["restartPolicy"]
    err = rejected(obj)
    assert err.message == (
        'Job.batch "pi" is invalid: spec.template.spec.restartPolicy: Unsupported value: '
        '"Always": supported values: "OnFailure", "Never"'
    )
    assert err.details is not None
    assert err.details["causes"] == [
        {
            "reason": "FieldValueNotSupported",
            "field": "spec.template.spec.restartPolicy",
            "message": 'Unsupported value: "Always": supported values: "OnFailure", "Never"',
        }
    ]


def test_negative_values_are_rejected() -> None:
    err = rejected(job(parallelism=-1, backoffLimit=-2))
    assert "spec.parallelism: Invalid value: -1: must be greater than or equal to 0" in err.message
    assert "spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0" in err.message
    assert err.message.startswith('Job.batch "pi" is invalid: [')


def test_manual_selector_not_matching_template_labels() -> None:
    obj = job(manualSelector=True, selector={"matchLabels": {"app": "x"}})
    obj["spec"]["template"]["metadata"] = {"labels": {"app": "y"}}
    err = rejected(obj)
    assert err.message == (
        'Job.batch "pi" is invalid: spec.template.metadata.labels: Invalid value: '
        'map[string]string{"app":"y"}: `selector` does not match template `labels`'
    )


def test_user_selector_without_manual_selector_is_not_auto_generated() -> None:
    err = rejected(job(selector={"matchLabels": {"app": "x"}}))
    assert "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{" in err.message
    assert "`selector` not auto-generated" in err.message


def test_pod_failure_policy_requires_never() -> None:
    rule = {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}
    obj = job(podFailurePolicy={"rules": [rule]})
    obj["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    err = rejected(obj)
    assert (
        'spec.template.spec.restartPolicy: Invalid value: "OnFailure": only "Never" is supported '
        "when podFailurePolicy is specified" in err.message
    )


def test_pod_failure_policy_rule_errors() -> None:
    rules = [
        {
            "action": "Explode",
            "onExitCodes": {"operator": "In", "values": [3, 0, 3], "containerName": "nope"},
        },
        {"action": "Ignore"},
    ]
    err = rejected(job(podFailurePolicy={"rules": rules}))
    text = err.message
    assert (
        'spec.podFailurePolicy.rules[0].action: Unsupported value: "Explode": supported values: '
        '"Count", "FailIndex", "FailJob", "Ignore"' in text
    )
    assert (
        "spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 0: "
        "must not be 0 for the In operator" in text
    )
    assert "spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 3" in text
    assert (
        "spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []int32{3, 0, 3}: must be ordered"
        in text
    )
    assert (
        'spec.podFailurePolicy.rules[0].onExitCodes.containerName: Invalid value: "nope": must be one of the '
        "container or initContainer names in the pod template" in text
    )
    assert (
        "spec.podFailurePolicy.rules[1]: Invalid value: specifying one of OnExitCodes and OnPodConditions is "
        "required" in text
    )


def test_indexed_requires_completions() -> None:
    err = rejected(job(completionMode="Indexed", parallelism=2))
    assert "spec.completions: Required value: when completion mode is Indexed" in err.message


def test_template_is_immutable_on_update() -> None:
    old = admit_job(job(), None)
    old["status"] = {"startTime": "2024-01-01T00:00:00Z"}
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    err = rejected(new, old)
    assert "spec.template: Invalid value: " in err.message and err.message.endswith("field is immutable")


def test_selector_and_completions_are_immutable_but_parallelism_is_not() -> None:
    old = admit_job(job(), None)
    new = copy.deepcopy(old)
    new["spec"]["parallelism"] = 4
    assert admit_job(new, old)["spec"]["parallelism"] == 4
    new["spec"]["completions"] = 5
    new["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": "other"}}
    err = rejected(new, old)
    assert "spec.completions: Invalid value: 5: field is immutable" in err.message
    assert "spec.selector: Invalid value: v1.LabelSelector{" in err.message


def test_suspended_never_started_job_may_change_scheduling_directives_only() -> None:
    old = admit_job(job(suspend=True), None)
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["nodeSelector"] = {"gpu": "a100"}
    new["spec"]["template"]["metadata"]["annotations"] = {"note": "x"}
    assert admit_job(new, old)["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "a100"}
    new["spec"]["template"]["spec"]["containers"][0]["image"] = "other"
    assert "field is immutable" in rejected(new, old).message


def test_update_keeps_defaults_applied() -> None:
    old = admit_job(job(), None)
    new = copy.deepcopy(old)
    del new["spec"]["backoffLimit"]
    assert admit_job(new, old)["spec"]["backoffLimit"] == 6
