"""HorizontalPodAutoscalers: one object served at autoscaling/v2 and v1, the status a cluster without a
metrics source shows, and scaling a Deployment between min and max with the test-controlled metrics."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client

from airflow_k8s_ml.testbed.local_cluster.cluster import ClusterThread
from tests.cluster_fixtures import admin, wait_for

from .deploy_helpers import events, sleeper_deployment

NO_CPU_METRICS = (
    "failed to get cpu utilization: unable to get metrics for resource cpu: "
    "no metrics returned from resource metrics API"
)


@pytest.fixture()
def apps(api_client: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api_client)


@pytest.fixture()
def v2(api_client: client.ApiClient) -> client.AutoscalingV2Api:
    return client.AutoscalingV2Api(api_client)


@pytest.fixture()
def v1(api_client: client.ApiClient) -> client.AutoscalingV1Api:
    return client.AutoscalingV1Api(api_client)


def _hpa(name: str, target: str, metrics: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target},
            "minReplicas": 1,
            "maxReplicas": 3,
            "metrics": metrics,
            **spec,
        },
    }


def _cpu(utilization: int) -> dict[str, Any]:
    return {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}},
    }


def _condition(hpa: Any, type_: str) -> Any:
    return next(c for c in hpa.status.conditions or [] if c.type == type_)


def test_v1_and_v2_views_of_one_object(
    v1: client.AutoscalingV1Api, v2: client.AutoscalingV2Api, namespace: str
) -> None:
    pods_metric = {
        "type": "Pods",
        "pods": {"metric": {"name": "queue_depth"}, "target": {"type": "AverageValue", "averageValue": "10"}},
    }
    v2.create_namespaced_horizontal_pod_autoscaler(namespace, _hpa("both", "web", [_cpu(50), pods_metric]))

    as_v1 = v1.read_namespaced_horizontal_pod_autoscaler("both", namespace)
    assert as_v1.spec.target_cpu_utilization_percentage == 50 and as_v1.spec.max_replicas == 3
    other = json.loads(as_v1.metadata.annotations["autoscaling.alpha.kubernetes.io/metrics"])
    assert other == [{"type": "Pods", "pods": {"metricName": "queue_depth", "targetAverageValue": "10"}}]

    v1.patch_namespaced_horizontal_pod_autoscaler(
        "both", namespace, {"spec": {"targetCPUUtilizationPercentage": 70}}
    )
    metrics = v2.read_namespaced_horizontal_pod_autoscaler("both", namespace).spec.metrics
    assert [
        (m.type, m.resource.target.average_utilization if m.resource else m.pods.metric.name) for m in metrics
    ] == [("Pods", "queue_depth"), ("Resource", 70)]

    v1.create_namespaced_horizontal_pod_autoscaler(
        namespace,
        {
            "apiVersion": "autoscaling/v1",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "legacy"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "maxReplicas": 4,
            },
        },
    )
    legacy = v2.read_namespaced_horizontal_pod_autoscaler("legacy", namespace)
    assert legacy.spec.min_replicas == 1
    assert legacy.spec.metrics[0].resource.target.average_utilization == 80  # v1's implicit default
    listed = v1.list_namespaced_horizontal_pod_autoscaler(namespace).items
    assert {h.api_version for h in listed} == {"autoscaling/v1"}


def test_status_without_metrics(
    apps: client.AppsV1Api,
    v2: client.AutoscalingV2Api,
    core: client.CoreV1Api,
    v1: client.AutoscalingV1Api,
    namespace: str,
) -> None:
    apps.create_namespaced_deployment(namespace, sleeper_deployment("web"))
    v2.create_namespaced_horizontal_pod_autoscaler(namespace, _hpa("web", "web", [_cpu(50)]))

    hpa = wait_for(
        lambda: v2.read_namespaced_horizontal_pod_autoscaler("web", namespace),
        lambda h: any(c.type == "ScalingActive" for c in h.status.conditions or []),
    )
    able, active = _condition(hpa, "AbleToScale"), _condition(hpa, "ScalingActive")
    assert (able.status, able.reason, able.message) == (
        "True",
        "SucceededGetScale",
        "the HPA controller was able to get the target's current scale",
    )
    assert (active.status, active.reason, active.message) == (
        "False",
        "FailedGetResourceMetric",
        f"the HPA was unable to compute the replica count: {NO_CPU_METRICS}",
    )
    assert (hpa.status.current_replicas, hpa.status.desired_replicas) == (1, 0)
    assert ("Warning", "FailedGetResourceMetric", NO_CPU_METRICS) in events(core, namespace, "web")
    conditions = json.loads(
        v1.read_namespaced_horizontal_pod_autoscaler("web", namespace).metadata.annotations[
            "autoscaling.alpha.kubernetes.io/conditions"
        ]
    )
    assert [c["type"] for c in conditions] == ["AbleToScale", "ScalingActive"]

    v2.patch_namespaced_horizontal_pod_autoscaler(
        "web", namespace, {"spec": {"scaleTargetRef": {"name": "gone"}}}
    )
    missing = wait_for(
        lambda: v2.read_namespaced_horizontal_pod_autoscaler("web", namespace),
        lambda h: _condition(h, "AbleToScale").status == "False",
    )
    assert _condition(missing, "AbleToScale").message == (
        'the HPA controller was unable to get the target\'s current scale: deployments.apps "gone" not found'
    )


def test_scales_between_min_and_max_with_controlled_metrics(
    apps: client.AppsV1Api,
    v2: client.AutoscalingV2Api,
    core: client.CoreV1Api,
    cluster: ClusterThread,
    namespace: str,
) -> None:
    apps.create_namespaced_deployment(namespace, sleeper_deployment("web"))
    wait_for(
        lambda: apps.read_namespaced_deployment("web", namespace), lambda d: d.status.ready_replicas == 1
    )
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 0}}
    v2.create_namespaced_horizontal_pod_autoscaler(
        namespace, _hpa("web", "web", [_cpu(50)], behavior=behavior)
    )

    admin(cluster, "metrics", {"namespace": namespace, "name": "web", "metric": "cpu", "value": 200})
    up = wait_for(
        lambda: v2.read_namespaced_horizontal_pod_autoscaler("web", namespace),
        lambda h: h.status.desired_replicas == 3,
        what="scale up to max",
    )
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 3
    limited = _condition(up, "ScalingLimited")
    assert (limited.status, limited.reason) == ("True", "TooManyReplicas")
    assert _condition(up, "ScalingActive").reason == "ValidMetricFound"
    assert _condition(up, "AbleToScale").reason == "SucceededRescale"
    assert up.status.current_metrics[0].resource.current.average_utilization == 200
    assert (
        "Normal",
        "SuccessfulRescale",
        "New size: 3; reason: cpu resource utilization (percentage of request) above target",
    ) in events(core, namespace, "web")
    assert up.spec.behavior.scale_up.policies[0].type == "Pods"  # behavior defaults filled in

    wait_for(
        lambda: apps.read_namespaced_deployment("web", namespace), lambda d: d.status.ready_replicas == 3
    )
    admin(cluster, "metrics", {"namespace": namespace, "name": "web", "metric": "cpu", "value": 10})
    wait_for(
        lambda: v2.read_namespaced_horizontal_pod_autoscaler("web", namespace),
        lambda h: h.status.desired_replicas == 1,
        what="scale down to min",
    )
    assert apps.read_namespaced_deployment("web", namespace).spec.replicas == 1
    assert ("Normal", "SuccessfulRescale", "New size: 1; reason: All metrics below target") in events(
        core, namespace, "web"
    )
