"""Metrics for the HPA: a source you control, and the replica proposal per metric (replica_calculator.go).

The local cluster has no metrics-server, custom or external metrics API. :class:`MetricsSource` stands in
for all three: tests and demos set ``(namespace, name, metric) -> value`` (``name`` = the HPA or its scale
target; ``metric`` = ``cpu``/``memory`` or a custom metric name) through the admin action ``metrics``.
A value is the *average per pod* (for ``cpu``/``memory`` Utilization: percent of request), as every ready
pod of the target reported it. With no value set, each metric fails with upstream's message, so the HPA
reports ``ScalingActive=False`` exactly like a cluster without metrics-server.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from airflow_k8s_ml.k8s import quantities

from ...errors import LocalClusterError

Obj = dict[str, Any]

TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance


@dataclass
class MetricsSource:
    values: dict[tuple[str, str, str], float] = field(default_factory=dict)

    def set(self, namespace: str, name: str, metric: str, value: float | None) -> None:
        if value is None:
            self.values.pop((namespace, name, metric), None)
        else:
            self.values[(namespace, name, metric)] = float(value)

    def get(self, namespace: str, names: tuple[str, ...], metric: str) -> float | None:
        for name in names:
            value = self.values.get((namespace, name, metric))
            if value is not None:
                return value
        return None

    def admin(self, body: Obj) -> Obj:
        """``POST /admin/metrics`` with ``{namespace, name, metric, value}`` (``value: null`` removes it) or
        ``{"clear": true}``; answers with every value set."""
        if body.get("clear"):
            self.values.clear()
        elif body.get("name"):
            self.set(
                body.get("namespace") or "default",
                body["name"],
                body.get("metric") or "cpu",
                body.get("value"),
            )
        return {
            "metrics": [
                {"namespace": ns, "name": n, "metric": m, "value": v}
                for (ns, n, m), v in sorted(self.values.items())
            ]
        }


@dataclass(frozen=True)
class PodCounts:
    """Pods of the scale target: ``ready`` report metrics, ``unready`` ones (cpu only) do not yet."""

    ready: int
    unready: int


@dataclass
class Proposal:
    replicas: int
    name: str  # "cpu resource utilization (percentage of request)" etc., for events
    status: Obj


class MetricError(LocalClusterError):
    """A metric could not be computed: ``reason`` is the ScalingActive reason, ``inner`` the detail that the
    condition carries, ``str()`` the wrapped error that the FailedComputeMetricsReplicas event carries."""

    def __init__(self, reason: str, inner: str, outer: str) -> None:
        super().__init__(outer)
        self.reason = reason
        self.inner = inner


def format_quantity(value: float) -> str:
    if value == int(value):
        return str(int(value))
    return f"{round(value * 1000)}m"


def _number(value: Any) -> float:
    return float(quantities.parse(value)) if value is not None else 0.0


def _ratio_replicas(ratio: float, current: int, counts: PodCounts, unready_dampen: bool) -> int:
    """``GetResourceReplicas``/``calcPlainMetricReplicas``: within tolerance keep; unready pods count as 0
    usage when scaling up (and the proposal is dropped if that reverses the direction)."""
    if counts.ready == 0:
        raise ValueError("did not receive metrics for targeted pods (pods might be unready)")
    if not (unready_dampen and counts.unready > 0 and ratio > 1.0):
        if abs(1.0 - ratio) <= TOLERANCE:
            return current
        return math.ceil(ratio * counts.ready)
    total = counts.ready + counts.unready
    dampened = ratio * counts.ready / total
    if abs(1.0 - dampened) <= TOLERANCE or dampened < 1.0:
        return current
    return math.ceil(dampened * total)


def _usage_ratio_replicas(ratio: float, current: int, counts: PodCounts) -> int:
    """``getUsageRatioReplicaCount`` (Object and External Value targets)."""
    if current == 0:
        return math.ceil(ratio)
    if abs(1.0 - ratio) <= TOLERANCE:
        return current
    return math.ceil(ratio * counts.ready)


def _average_value_replicas(usage: float, target_average: float, current: int) -> int:
    replicas = math.ceil(usage / target_average)
    if abs(1.0 - usage / (target_average * replicas)) > TOLERANCE:
        return replicas
    return current


def _missing(kind: str, metric: str, namespace: str, selector: Any) -> MetricError:
    if kind in ("Resource", "ContainerResource"):
        inner = f"unable to get metrics for resource {metric}: no metrics returned from resource metrics API"
        return MetricError(
            "FailedGet" + ("ContainerResource" if kind == "ContainerResource" else "Resource") + "Metric",
            inner,
            inner,
        )
    if kind == "External":
        inner = (
            f"unable to get external metric {namespace}/{metric}/{selector or {}}: "
            "no metrics returned from external metrics API"
        )
        return MetricError("FailedGetExternalMetric", inner, f"failed to get external metric value: {inner}")
    inner = f"unable to get metric {metric}: no metrics returned from custom metrics API"
    label = {"Pods": "pods", "Object": "object"}.get(kind, kind.lower())
    return MetricError(f"FailedGet{kind}Metric", inner, f"failed to get {label} metric value: {inner}")


def propose(metric: Obj, value: float | None, current: int, counts: PodCounts, namespace: str) -> Proposal:
    """``computeReplicasForMetric`` for one metric spec with the value our source has (or None)."""
    kind = metric.get("type") or ""
    if kind in ("Resource", "ContainerResource"):
        return _resource(metric, kind, value, current, counts, namespace)
    if kind == "Pods":
        spec = metric.get("pods") or {}
        name = (spec.get("metric") or {}).get("name", "")
        if value is None:
            raise _missing(kind, name, namespace, None)
        target = _number((spec.get("target") or {}).get("averageValue"))
        replicas = _plain(value / target if target else 0.0, current, counts)
        return Proposal(
            replicas,
            f"pods metric {name}",
            {
                "type": "Pods",
                "pods": {"metric": {"name": name}, "current": {"averageValue": format_quantity(value)}},
            },
        )
    if kind in ("Object", "External"):
        return _object_or_external(metric, kind, value, current, counts, namespace)
    raise MetricError(
        "InvalidMetricSourceType",
        f'unknown metric source type "{kind}"',
        f'unknown metric source type "{kind}"',
    )


def _plain(ratio: float, current: int, counts: PodCounts) -> int:
    try:
        return _ratio_replicas(ratio, current, counts, unready_dampen=False)
    except ValueError as exc:
        raise MetricError("FailedGetPodsMetric", str(exc), f"failed to get pods metric value: {exc}") from exc


def _resource(
    metric: Obj, kind: str, value: float | None, current: int, counts: PodCounts, namespace: str
) -> Proposal:
    key = "resource" if kind == "Resource" else "containerResource"
    spec = metric.get(key) or {}
    name = spec.get("name", "")
    target = spec.get("target") or {}
    utilization = target.get("averageUtilization")
    what = "utilization" if utilization is not None else "usage"
    if value is None:
        error = _missing(kind, name, namespace, None)
        inner = f"failed to get {name} {what}: {error.inner}"
        outer = (
            f"failed to get {name} resource metric value: {inner}"
            if kind == "Resource"
            else f"failed to get {name} container metric value: {inner}"
        )
        raise MetricError(error.reason, inner, outer)
    if utilization:
        ratio = value / utilization
    else:
        average = _number(target.get("averageValue"))
        ratio = value / average if average else 0.0
    try:
        replicas = _ratio_replicas(ratio, current, counts, unready_dampen=name == "cpu")
    except ValueError as exc:
        inner = f"failed to get {name} {what}: {exc}"
        raise MetricError(
            _missing(kind, name, namespace, None).reason,
            inner,
            f"failed to get {name} resource metric value: {inner}",
        ) from exc
    current_value: Obj = (
        {"averageUtilization": round(value)}
        if utilization is not None
        else {"averageValue": format_quantity(value)}
    )
    label = "resource" if kind == "Resource" else "container resource"
    status_body: Obj = {"name": name, "current": current_value}
    if kind == "ContainerResource":
        status_body["container"] = spec.get("container")
    suffix = "utilization (percentage of request)" if utilization is not None else "usage"
    return Proposal(replicas, f"{name} {label} {suffix}", {"type": kind, key: status_body})


def _object_or_external(
    metric: Obj, kind: str, value: float | None, current: int, counts: PodCounts, namespace: str
) -> Proposal:
    key = kind.lower()
    spec = metric.get(key) or {}
    identifier = spec.get("metric") or {}
    name = identifier.get("name", "")
    if value is None:
        raise _missing(kind, name, namespace, identifier.get("selector"))
    target = spec.get("target") or {}
    average = target.get("averageValue")
    if average is not None:
        replicas = _average_value_replicas(value, _number(average) or 1.0, current)
        current_value: Obj = {"averageValue": format_quantity(value / max(replicas, 1))}
    else:
        replicas = _usage_ratio_replicas(value / (_number(target.get("value")) or 1.0), current, counts)
        current_value = {"value": format_quantity(value)}
    status: Obj = {"metric": {"name": name}, "current": current_value}
    if kind == "Object":
        status["describedObject"] = spec.get("describedObject")
        described = spec.get("describedObject") or {}
        label = f"{described.get('kind', '')} metric {name}"
    else:
        label = f"external metric {name}({identifier.get('selector') or {}})"
    return Proposal(replicas, label, {"type": kind, key: status})
