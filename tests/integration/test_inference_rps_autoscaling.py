"""``InferenceDeploymentOperator`` autoscaling on request rate: the HPA it applies scales on the ``Pods``
metric ``http_requests_per_second`` (per-pod ``AverageValue`` target) beside or instead of CPU, and bad
values are refused naming the argument before any write. Every object written is checked against
upstream's schema by ``tests/upstream_schemas_plugin.py``; that the local HPA scales on this metric is
``test_metrics_apis.py``'s test."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from tests.integration.serving_helpers import context, run_task
from tests.integration.test_bad_inputs import nothing_in, refused_in_execute
from tests.integration.test_inference_operator_objects import make

RPS = {"type": "Pods", "pods": {"metric": {"name": "http_requests_per_second"}}}


def _metrics(api_client: Any, namespace: str) -> list[dict[str, Any]]:
    hpa = client.AutoscalingV2Api(api_client).read_namespaced_horizontal_pod_autoscaler("echo", namespace)
    return [api_client.sanitize_for_serialization(m) for m in hpa.spec.metrics]


@pytest.mark.usefixtures("kube_conn")
def test_rps_target_renders_a_pods_metric_hpa_and_switches_with_autoscale_metric(
    api_client: Any, namespace: str
) -> None:
    scaling = {
        "min_replicas": 2,
        "max_replicas": 4,
        "autoscale_metric": "rps",
        "target_cpu_utilization": 80,
        "target_requests_per_second": "2500m",
        "scale_down_stabilization_seconds": 30,
    }
    first = run_task(make(namespace, autoscaling=scaling), context("deploy"))
    assert first["changes"]["HorizontalPodAutoscaler"] == "created"
    rps = {**RPS, "pods": {**RPS["pods"], "target": {"type": "AverageValue", "averageValue": "2500m"}}}
    assert _metrics(api_client, namespace) == [rps]
    hpa = client.AutoscalingV2Api(api_client).read_namespaced_horizontal_pod_autoscaler("echo", namespace)
    assert hpa.spec.behavior.scale_down.stabilization_window_seconds == 30

    both = run_task(make(namespace, autoscaling={**scaling, "autoscale_metric": "both"}), context("deploy"))
    assert both["changes"]["HorizontalPodAutoscaler"] == "configured"
    cpu = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }
    assert _metrics(api_client, namespace) == [cpu, rps]


@pytest.mark.usefixtures("kube_conn")
@pytest.mark.parametrize(
    ("scaling", "field", "message"),
    [
        (
            {"autoscale_metric": "gpu", "target_cpu_utilization": 50},
            "autoscaling.autoscale_metric",
            "must be one of",
        ),
        (
            {"autoscale_metric": "rps", "target_cpu_utilization": 50},
            "autoscaling.target_requests_per_second",
            "is required with autoscale_metric='rps'",
        ),
        (
            {"target_requests_per_second": 0},
            "autoscaling.target_requests_per_second",
            "must be greater than 0",
        ),
        (
            {"target_requests_per_second": "fast"},
            "autoscaling.target_requests_per_second",
            "invalid quantity",
        ),
        (
            {"autoscale_metric": "cpu", "target_requests_per_second": 5},
            "autoscaling.target_cpu_utilization",
            "is required",
        ),
    ],
)
def test_bad_rps_autoscaling_is_refused_before_any_write(
    api_client: Any, namespace: str, scaling: dict[str, Any], field: str, message: str
) -> None:
    op = make(namespace)
    op.autoscaling = {"min_replicas": 2, "max_replicas": 4, **scaling}
    error = refused_in_execute(op, context("deploy"))
    assert error.field == field and message in error.message
    assert nothing_in(api_client, namespace)
