"""HPA: v1 <-> v2 conversion, admission, replica proposals and normalization (upstream rules)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster import errors
from airflow_k8s_ml.testbed.local_cluster.controllers.hpa.admission import admit_hpa
from airflow_k8s_ml.testbed.local_cluster.controllers.hpa.convert import to_v1, to_v2
from airflow_k8s_ml.testbed.local_cluster.controllers.hpa.metrics import MetricError, PodCounts, propose
from airflow_k8s_ml.testbed.local_cluster.controllers.hpa.scaling import (
    History,
    normalize_legacy,
    normalize_with_behavior,
    record_scale_event,
)

NOW = 1_700_000_000.0
CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
}
QUEUE = {
    "type": "Pods",
    "pods": {"metric": {"name": "queue"}, "target": {"type": "AverageValue", "averageValue": "10"}},
}


def hpa_v2(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1,
            "maxReplicas": 5,
            **spec,
        },
    }


def test_v2_to_v1_and_back_loses_nothing() -> None:
    original = hpa_v2(metrics=[CPU, QUEUE], behavior={"scaleDown": {"stabilizationWindowSeconds": 0}})
    original["status"] = {
        "currentReplicas": 2,
        "desiredReplicas": 3,
        "currentMetrics": [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "current": {"averageUtilization": 70, "averageValue": "1"}},
            }
        ],
        "conditions": [
            {"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale", "message": "m"}
        ],
    }
    v1 = to_v1(original)
    assert v1["spec"] == {
        "scaleTargetRef": original["spec"]["scaleTargetRef"],
        "minReplicas": 1,
        "maxReplicas": 5,
        "targetCPUUtilizationPercentage": 50,
    }
    assert v1["status"]["currentCPUUtilizationPercentage"] == 70
    assert json.loads(v1["metadata"]["annotations"]["autoscaling.alpha.kubernetes.io/metrics"]) == [
        {"type": "Pods", "pods": {"metricName": "queue", "targetAverageValue": "10"}}
    ]
    back = to_v2(v1)
    assert back["spec"]["metrics"] == [QUEUE, CPU]  # annotation metrics first, as upstream
    assert back["spec"]["behavior"] == original["spec"]["behavior"]
    assert back["status"] == original["status"]
    assert "annotations" not in back["metadata"]


def test_v1_without_target_gets_the_implicit_cpu_default() -> None:
    v2 = to_v2(
        {
            "apiVersion": "autoscaling/v1",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3},
        }
    )
    assert v2["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
        }
    ]


def test_admission_defaults_and_validation() -> None:
    admitted = admit_hpa(hpa_v2(behavior={}), None)
    assert admitted["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 80
    assert admitted["spec"]["behavior"]["scaleUp"]["policies"] == [
        {"type": "Pods", "value": 4, "periodSeconds": 15},
        {"type": "Percent", "value": 100, "periodSeconds": 15},
    ]
    assert "stabilizationWindowSeconds" not in admitted["spec"]["behavior"]["scaleDown"]
    assert admitted["status"] == {"desiredReplicas": 0}
    bad = copy.deepcopy(hpa_v2())
    bad["spec"].update(minReplicas=4, maxReplicas=2)
    with pytest.raises(errors.StatusError) as caught:
        admit_hpa(bad, None)
    assert caught.value.message == (
        'HorizontalPodAutoscaler.autoscaling "web" is invalid: spec.maxReplicas: '
        "Invalid value: 2: must be greater than or equal to `minReplicas`"
    )


def test_cpu_proposals_follow_the_replica_calculator() -> None:
    counts = PodCounts(ready=2, unready=0)
    assert propose(CPU, 100, 2, counts, "ns").replicas == 4
    assert propose(CPU, 54, 2, counts, "ns").replicas == 2  # within the 10% tolerance
    assert propose(CPU, 10, 2, counts, "ns").replicas == 1
    dampened = propose(CPU, 100, 3, PodCounts(ready=2, unready=1), "ns")  # unready pods count as idle
    assert dampened.replicas == 4
    assert dampened.name == "cpu resource utilization (percentage of request)"
    assert dampened.status == {
        "type": "Resource",
        "resource": {"name": "cpu", "current": {"averageUtilization": 100}},
    }
    assert propose(QUEUE, 30, 1, PodCounts(1, 0), "ns").replicas == 3


def test_missing_metrics_fail_with_upstream_messages() -> None:
    with pytest.raises(MetricError) as cpu:
        propose(CPU, None, 1, PodCounts(1, 0), "ns")
    assert cpu.value.reason == "FailedGetResourceMetric"
    assert cpu.value.inner == (
        "failed to get cpu utilization: unable to get metrics for resource cpu: "
        "no metrics returned from resource metrics API"
    )
    assert str(cpu.value).startswith("failed to get cpu resource metric value: failed to get cpu utilization")
    with pytest.raises(MetricError) as pods:
        propose(QUEUE, None, 1, PodCounts(1, 0), "ns")
    assert (pods.value.reason, pods.value.inner) == (
        "FailedGetPodsMetric",
        "unable to get metric queue: no metrics returned from custom metrics API",
    )


def _reasons(conditions: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in conditions}


def test_legacy_normalization_limits_and_stabilizes() -> None:
    conditions: list[dict[str, Any]] = []
    history = History(recommendations=[(1, NOW)])
    assert normalize_legacy(conditions, history, 1, 10, 1, 10, NOW) == 4
    assert _reasons(conditions)["ScalingLimited"] == ("True", "ScaleUpLimit")
    # the 5 minute window keeps the high recommendation (10), which the rate limit cuts to 2 x 4
    assert normalize_legacy(conditions, history, 4, 1, 1, 10, NOW + 1) == 8
    assert _reasons(conditions)["AbleToScale"] == ("True", "ScaleDownStabilized")
    assert normalize_legacy(conditions, History(), 3, 9, 1, 5, NOW) == 5
    assert _reasons(conditions)["ScalingLimited"] == ("True", "TooManyReplicas")


def test_behavior_policies_rate_limit_scale_up() -> None:
    behavior = admit_hpa(hpa_v2(behavior={"scaleDown": {"stabilizationWindowSeconds": 0}}), None)["spec"][
        "behavior"
    ]
    conditions: list[dict[str, Any]] = []
    history = History()
    assert normalize_with_behavior(conditions, history, behavior, 2, 20, 1, 50, NOW) == 6  # max(2+4, 2*2)
    assert _reasons(conditions)["ScalingLimited"] == ("True", "ScaleUpLimit")
    record_scale_event(history, behavior, 2, 6, NOW)
    assert (
        normalize_with_behavior(conditions, history, behavior, 6, 20, 1, 50, NOW + 1) == 6
    )  # period not over
    assert normalize_with_behavior(conditions, history, behavior, 6, 1, 1, 50, NOW + 2) == 1
    assert _reasons(conditions)["ScalingLimited"] == ("False", "DesiredWithinRange")
