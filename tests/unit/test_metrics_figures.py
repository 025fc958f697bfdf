"""The pure parts of the local cluster's metrics: request counting over a sliding window, the answers'
shapes (metrics-server's units, the custom metrics API's Quantity), and the HPA's replica calculation from
per-pod figures as upstream's replica_calculator.go (missing and unready pods)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_k8s_ml.testbed.local_cluster.controllers.hpa.metrics import (
    MetricError,
    PodSamples,
    group_pods,
    propose_from_samples,
    replicas_from_samples,
)
from airflow_k8s_ml.testbed.local_cluster.controllers.metrics import shapes
from airflow_k8s_ml.testbed.local_cluster.controllers.metrics.requests import RequestCounts

T0 = 1_800_000_000.0
RPS = {
    "type": "Pods",
    "pods": {
        "metric": {"name": "http_requests_per_second"},
        "target": {"type": "AverageValue", "averageValue": "2"},
    },
}
CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}},
}


def test_rate_over_the_window_and_counters_since_first_reached() -> None:
    counts = RequestCounts(window=10.0)
    for i in range(20):  # 4 requests a second for 5 s, every fifth an error
        counts.record(("ns", "a"), "uid-a", T0 + i * 0.25, error=i % 5 == 0)
    pod = counts.of(("ns", "a"), "uid-a")
    assert pod is not None and (pod.total, pod.errors) == (20, 4)
    assert pod.rate(T0 + 5, 10.0) == pytest.approx(4.0)  # reached 5 s ago: over 5 s, not the whole window
    assert pod.rate(T0 + 10, 10.0) == pytest.approx(2.0)  # 20 requests over the 10 s window
    assert pod.rate(T0 + 30, 10.0) == 0.0  # the window moved past them; the counters stay
    assert (pod.total, pod.errors) == (20, 4)
    assert len(pod.buckets) == 0, "old buckets are dropped"
    counts.record(("ns", "a"), "uid-b", T0 + 31, error=False)  # the name now belongs to another pod
    assert counts.of(("ns", "a"), "uid-a") is None
    assert counts.of(("ns", "a"), "uid-b").total == 1  # type: ignore[union-attr]
    counts.forget({("ns", "b")})
    assert counts.of(("ns", "a"), "uid-b") is None


def test_answer_shapes_in_upstream_units() -> None:
    assert shapes.nanocores(0.25) == "250000000n"
    assert shapes.kibibytes(12_704_000) == "12406Ki"
    assert [shapes.quantity(v) for v in (2.5, 3.0, 0.0, 0.0004)] == ["2500m", "3", "0", "0"]
    assert [shapes.go_duration(s) for s in (15.0, 1.0405, 0.5)] == ["15s", "1.04s", "0.5s"]
    pod = {"metadata": {"name": "web-1", "namespace": "ml", "labels": {"app": "web"}}}
    value = shapes.metric_value(pod, "http_requests_per_second", "2500m", T0, 30)
    assert value == {
        "describedObject": {"kind": "Pod", "namespace": "ml", "name": "web-1", "apiVersion": "/v1"},
        "metric": {"name": "http_requests_per_second"},
        "timestamp": "2027-01-15T08:00:00Z",
        "windowSeconds": 30,
        "value": "2500m",
    }
    assert "windowSeconds" not in shapes.metric_value(pod, "http_requests_total", "7", T0, None)
    metrics = shapes.pod_metrics(pod, T0, 15.0, [("server", 0.123456, 2048 * 1024)])
    assert metrics["containers"] == [{"name": "server", "usage": {"cpu": "123456000n", "memory": "2048Ki"}}]
    assert (metrics["kind"], metrics["apiVersion"], metrics["window"]) == (
        "PodMetrics",
        "metrics.k8s.io/v1beta1",
        "15s",
    )


def test_replicas_from_pod_figures_as_upstream() -> None:
    # within tolerance (0.1): keep
    assert replicas_from_samples(PodSamples({"a": 2.1, "b": 2.0}), 2.0, 2, utilization=False) == 2
    # average 5 against 2 per pod on 2 pods: ceil(2.5 * 2)
    assert replicas_from_samples(PodSamples({"a": 6.0, "b": 4.0}), 2.0, 2, utilization=False) == 5
    # scaling up: a pod without a figure counts as 0 -> (10 + 0) / 3 / 2 -> ceil(1.67 * 3)
    up = PodSamples({"a": 6.0, "b": 4.0}, missing=frozenset({"c"}))
    assert replicas_from_samples(up, 2.0, 3, utilization=False) == 5
    # scaling down: a pod without a figure counts as at the target -> (0 + 0 + 2) / 3 / 2 -> ceil(0.33 * 3)
    down = PodSamples({"a": 0.0, "b": 0.0}, missing=frozenset({"c"}))
    assert replicas_from_samples(down, 2.0, 3, utilization=False) == 1
    # a missing pod that would turn a scale-down into a scale-up keeps the count
    assert (
        replicas_from_samples(PodSamples({"a": 1.9}, missing=frozenset({"c"})), 2.0, 2, utilization=False)
        == 2
    )
    # cpu utilization: 0.3 of 0.2 cores requested -> 150 % against 50 %; an unready pod counts as idle
    cpu = PodSamples({"a": 0.3}, {"a": 0.2, "b": 0.2}, unready=frozenset({"b"}))
    assert replicas_from_samples(cpu, 50.0, 2, utilization=True) == 3  # (0.3+0)/0.4 = 75 % -> ceil(1.5*2)
    with pytest.raises(ValueError, match="did not receive metrics for targeted pods"):
        replicas_from_samples(PodSamples({}, missing=frozenset({"a"})), 2.0, 1, utilization=False)


def _pod(name: str, phase: str, ready: bool, cpu: str | None = "100m", **meta: Any) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu}} if cpu else {}
    return {
        "metadata": {"name": name, **meta},
        "spec": {"containers": [{"name": "main", "resources": resources}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_pods_grouped_and_requests_read_as_upstream() -> None:
    pods = [
        _pod("ready", "Running", True),
        _pod("pending", "Pending", False),
        _pod("warming", "Running", False),
        _pod("silent", "Running", True),
        _pod("leaving", "Running", True, deletionTimestamp="2026-01-01T00:00:00Z"),
    ]
    values = {"ready": 0.1, "warming": 0.05, "leaving": 1.0}
    cpu = group_pods(pods, values, "cpu", utilization=True)
    assert cpu.values == {"ready": 0.1}
    assert (cpu.unready, cpu.missing) == (frozenset({"pending", "warming"}), frozenset({"silent"}))
    assert cpu.requests["ready"] == pytest.approx(0.1)
    rps = group_pods(pods, values, "", utilization=False)  # only cpu treats a not-Ready pod as unready
    assert rps.values == {"ready": 0.1, "warming": 0.05}
    no_request = group_pods([_pod("bare", "Running", True, cpu=None)], {"bare": 0.1}, "cpu", utilization=True)
    with pytest.raises(MetricError) as failed:
        propose_from_samples(CPU, no_request, 1, "ns")
    assert (
        failed.value.inner
        == "failed to get cpu utilization: missing request for cpu in container main of Pod bare"
    )


def test_pods_metric_proposal_reports_the_average() -> None:
    proposal = propose_from_samples(RPS, PodSamples({"a": 5.0, "b": 3.0}), 2, "ns")
    assert proposal.replicas == 4
    assert proposal.name == "pods metric http_requests_per_second"
    assert proposal.status == {
        "type": "Pods",
        "pods": {"metric": {"name": "http_requests_per_second"}, "current": {"averageValue": "4"}},
    }
    with pytest.raises(MetricError) as none:
        propose_from_samples(RPS, None, 2, "ns")
    assert (
        none.value.inner
        == "unable to get metric http_requests_per_second: no metrics returned from custom metrics API"
    )
