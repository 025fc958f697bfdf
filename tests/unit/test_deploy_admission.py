"""Deployment/ReplicaSet admission: upstream defaults and the exact 422 messages."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster import errors
from airflow_k8s_ml.testbed.local_cluster.controllers.deployment.admission import (
    admit_deployment,
    admit_replicaset,
)

BASE: dict[str, Any] = {
    "metadata": {"name": "web"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]},
        },
    },
}


def with_spec(**spec: Any) -> dict[str, Any]:
    body = copy.deepcopy(BASE)
    body["spec"].update(spec)
    return body


def messages(body: dict[str, Any], old: dict[str, Any] | None = None) -> str:
    with pytest.raises(errors.StatusError) as caught:
        admit_deployment(body, old)
    assert caught.value.code == 422
    return caught.value.message


def test_defaults() -> None:
    spec = admit_deployment(copy.deepcopy(BASE), None)["spec"]
    assert (
        spec["replicas"] == 1
        and spec["revisionHistoryLimit"] == 10
        and spec["progressDeadlineSeconds"] == 600
    )
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert "minReadySeconds" not in spec  # zero is omitted, as Go's omitempty does
    assert spec["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert admit_deployment(with_spec(strategy={"type": "Recreate"}), None)["spec"]["strategy"] == {
        "type": "Recreate"
    }
    assert admit_replicaset(copy.deepcopy(BASE), None)["spec"]["replicas"] == 1


def test_selector_must_match_template_labels() -> None:
    body = with_spec(selector={"matchLabels": {"app": "other"}})
    assert messages(body) == (
        'Deployment.apps "web" is invalid: spec.template.metadata.labels: Invalid value: '
        'map[string]string{"app":"web"}: `selector` does not match template `labels`'
    )
    with pytest.raises(errors.StatusError) as caught:
        admit_replicaset(body, None)
    assert caught.value.message.startswith('ReplicaSet.apps "web" is invalid: spec.template.metadata.labels')


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"selector": None}, "spec.selector: Required value"),
        ({"replicas": -1}, "spec.replicas: Invalid value: -1: must be greater than or equal to 0"),
        (
            {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}},
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0",
        ),
        (
            {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "150%"}}},
            'spec.strategy.rollingUpdate.maxUnavailable: Invalid value: "150%": '
            "must not be greater than 100%",
        ),
        (
            {"strategy": {"type": "Recreate", "rollingUpdate": {}}},
            "spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'",
        ),
        (
            {"minReadySeconds": 10, "progressDeadlineSeconds": 5},
            "spec.progressDeadlineSeconds: Invalid value: 5: must be greater than minReadySeconds",
        ),
    ],
)
def test_spec_validation(spec: dict[str, Any], expected: str) -> None:
    assert messages(with_spec(**spec)) == f'Deployment.apps "web" is invalid: {expected}'


def test_template_must_restart_always() -> None:
    body = with_spec()
    body["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    assert messages(body) == (
        'Deployment.apps "web" is invalid: spec.template.spec.restartPolicy: '
        'Unsupported value: "Never": supported values: "Always"'
    )


def test_selector_is_immutable() -> None:
    old = admit_deployment(copy.deepcopy(BASE), None)
    changed = copy.deepcopy(old)
    changed["spec"]["selector"] = {"matchLabels": {"app": "web", "tier": "x"}}
    changed["spec"]["template"]["metadata"]["labels"]["tier"] = "x"
    assert messages(changed, old) == (
        'Deployment.apps "web" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:'
        'map[string]string{"app":"web", "tier":"x"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: '
        "field is immutable"
    )
