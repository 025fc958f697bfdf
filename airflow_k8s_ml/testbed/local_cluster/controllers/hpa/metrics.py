"""Metrics for the HPA: per-pod samples, and the replica proposal per metric (replica_calculator.go).

By default the figures are real: ``Resource`` cpu/memory from ``metrics.k8s.io`` (the kubelet's cgroup
readings) and ``Pods`` metrics from ``custom.metrics.k8s.io`` (the service proxy's request counts), both
read per pod from the metrics-server controller (``controllers/metrics``). :class:`MetricsSource` is the
admin action ``metrics`` kept for tests of the HPA's own rules (and for ``Object``/``External`` metrics and
a cluster without cgroups): ``(namespace, name, metric) -> value`` (``name`` = the HPA or its scale
target), the *average per pod* (for Utilization targets: percent of request) as every ready pod reported
it; a value set there wins over the real figures. With neither, each metric fails with upstream's message,
so the HPA reports ``ScalingActive=False`` exactly like a cluster without metrics-server.

One algorithm for both sources: :func:`propose_from_samples` is upstream's ``GetResourceReplicas`` /
``calcPlainMetricReplicas`` (tolerance 0.1; missing pods count as at target when scaling down and as 0
when scaling up; unready pods count as 0 when scaling up on cpu).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from airflow_k8s_ml.k8s import quantities

from ...errors import LocalClusterError
from ..deployment.replicaset_pods import is_ready

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


@dataclass(frozen=True)
class PodSamples:
    """One metric's per-pod figures, grouped as upstream's ``groupPods``: ``values`` of the pods that count
    (ready, with a figure), ``requests`` per pod for Utilization targets (same unit as the values), the
    ``unready`` pods (pending, or not Ready for cpu) and the ``missing`` ones (running, no figure yet).
    ``raw``: the values are real usages, so the status also reports their average."""

    values: dict[str, float]
    requests: dict[str, float] = field(default_factory=dict)
    unready: frozenset[str] = frozenset()
    missing: frozenset[str] = frozenset()
    raw: bool = True
    error: str = ""  # why no replica count can be computed from these figures (a missing request)


def group_pods(pods: list[Obj], values: dict[str, float], resource: str, utilization: bool) -> PodSamples:
    """``groupPods`` (+ ``calculatePodRequests`` for Utilization targets): deleted and failed pods are
    ignored, pending ones unready, running ones without a figure missing; for cpu a pod that is not Ready
    is unready too (upstream also looks at when it became Ready; we do not)."""
    ready: dict[str, float] = {}
    unready: set[str] = set()
    missing: set[str] = set()
    for pod in pods:
        name = pod["metadata"]["name"]
        phase = (pod.get("status") or {}).get("phase")
        if pod["metadata"].get("deletionTimestamp") or phase in ("Failed", "Succeeded"):
            continue
        if phase == "Pending":
            unready.add(name)
        elif name not in values:
            missing.add(name)
        elif resource == "cpu" and not is_ready(pod):
            unready.add(name)
        else:
            ready[name] = values[name]
    requests: dict[str, float] = {}
    error = ""
    if utilization:
        try:
            requests = pod_requests(pods, resource)
        except ValueError as exc:
            error = str(exc)
    return PodSamples(ready, requests, frozenset(unready), frozenset(missing), error=error)


def pod_requests(pods: list[Obj], resource: str) -> dict[str, float]:
    """Each pod's request of ``resource`` (cores, bytes), summed over its containers; a container without
    one fails as upstream: ``missing request for cpu in container main of Pod web-1``."""
    requests: dict[str, float] = {}
    for pod in pods:
        total = 0.0
        for container in (pod.get("spec") or {}).get("containers") or []:
            value = ((container.get("resources") or {}).get("requests") or {}).get(resource)
            if value is None:
                raise ValueError(
                    f"missing request for {resource} in container {container.get('name')} "
                    f"of Pod {pod['metadata']['name']}"
                )
            total += float(quantities.parse(value))
        requests[pod["metadata"]["name"]] = total
    return requests


def average_samples(value: float, counts: PodCounts, utilization: bool) -> PodSamples:
    """An admin-set average as each ready pod's figure (requests of 100, so utilization is the value)."""
    ready = [f"ready-{i}" for i in range(counts.ready)]
    unready = [f"unready-{i}" for i in range(counts.unready)]
    requests = {name: 100.0 for name in ready + unready} if utilization else {}
    return PodSamples({name: value for name in ready}, requests, frozenset(unready), raw=False)


def _usage_ratio(
    values: dict[str, float], requests: dict[str, float], target: float, utilization: bool
) -> float:
    """``GetResourceUtilizationRatio`` (usage over requests, in percent, over the target percent) or
    ``GetMetricUsageRatio`` (the average over the target average)."""
    if utilization:
        total = sum(requests.get(name, 0.0) for name in values)
        if total == 0:
            raise ValueError("no metrics returned matched known pods")
        return (sum(values.values()) * 100 / total) / target
    return (sum(values.values()) / len(values)) / target if target else 0.0


def replicas_from_samples(samples: PodSamples, target: float, current: int, utilization: bool) -> int:
    """Upstream's replica calculation for per-pod metrics, given the ready pods' figures."""
    if samples.error:
        raise ValueError(samples.error)
    metrics = dict(samples.values)
    if not metrics:
        raise ValueError("did not receive metrics for targeted pods (pods might be unready)")
    ratio = _usage_ratio(metrics, samples.requests, target, utilization)
    scale_up_with_unready = bool(samples.unready) and ratio > 1.0
    if not scale_up_with_unready and not samples.missing:
        if abs(1.0 - ratio) <= TOLERANCE:
            return current
        return math.ceil(ratio * len(metrics))
    for name in samples.missing:
        if ratio < 1.0:  # scaling down: a pod without figures is assumed at the target
            fill = samples.requests.get(name, 0.0) * max(100.0, target) / 100 if utilization else target
        else:  # scaling up: at 0
            fill = 0.0
        metrics[name] = fill
    if scale_up_with_unready:
        for name in samples.unready:
            metrics[name] = 0.0
    new_ratio = _usage_ratio(metrics, samples.requests, target, utilization)
    if (
        abs(1.0 - new_ratio) <= TOLERANCE
        or (ratio < 1.0 and new_ratio > 1.0)
        or (ratio > 1.0 and new_ratio < 1.0)
    ):
        return current
    replicas = math.ceil(new_ratio * len(metrics))
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return current
    return replicas


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
    """``computeReplicasForMetric`` for one metric spec with an admin-set value (or None)."""
    kind = metric.get("type") or ""
    if kind in ("Object", "External"):
        return _object_or_external(metric, kind, value, current, counts, namespace)
    utilization = _target(metric).get("averageUtilization") is not None
    samples = None if value is None else average_samples(value, counts, utilization)
    return propose_from_samples(metric, samples, current, namespace)


def propose_from_samples(metric: Obj, samples: PodSamples | None, current: int, namespace: str) -> Proposal:
    """``computeReplicasForMetric`` for a per-pod metric (``Resource``, ``ContainerResource``, ``Pods``)
    from its pods' figures (None: the metrics API returned nothing)."""
    kind = metric.get("type") or ""
    if kind in ("Resource", "ContainerResource"):
        return _resource(metric, kind, samples, current, namespace)
    if kind == "Pods":
        name = metric_name(metric)
        if samples is None:
            raise _missing(kind, name, namespace, None)
        target = _number(_target(metric).get("averageValue"))
        try:
            replicas = replicas_from_samples(samples, target, current, utilization=False)
        except ValueError as exc:
            raise MetricError(
                "FailedGetPodsMetric", str(exc), f"failed to get pods metric value: {exc}"
            ) from exc
        average = sum(samples.values.values()) / len(samples.values)
        return Proposal(
            replicas,
            f"pods metric {name}",
            {
                "type": "Pods",
                "pods": {"metric": {"name": name}, "current": {"averageValue": format_quantity(average)}},
            },
        )
    raise MetricError(
        "InvalidMetricSourceType",
        f'unknown metric source type "{kind}"',
        f'unknown metric source type "{kind}"',
    )


def metric_name(metric: Obj) -> str:
    """The resource (cpu, memory) or the custom metric's name a metric spec reads."""
    kind = metric.get("type") or ""
    if kind == "Resource":
        return str((metric.get("resource") or {}).get("name", ""))
    if kind == "ContainerResource":
        return str((metric.get("containerResource") or {}).get("name", ""))
    body = metric.get({"Pods": "pods", "Object": "object", "External": "external"}.get(kind, "")) or {}
    return str((body.get("metric") or {}).get("name", ""))


def _target(metric: Obj) -> Obj:
    kind = metric.get("type") or ""
    key = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods"}.get(kind, "")
    return ((metric.get(key) or {}).get("target") or {}) if key else {}


def _resource(metric: Obj, kind: str, samples: PodSamples | None, current: int, namespace: str) -> Proposal:
    key = "resource" if kind == "Resource" else "containerResource"
    spec = metric.get(key) or {}
    name = spec.get("name", "")
    target = spec.get("target") or {}
    utilization = target.get("averageUtilization")
    what = "utilization" if utilization is not None else "usage"
    if samples is None:
        error = _missing(kind, name, namespace, None)
        inner = f"failed to get {name} {what}: {error.inner}"
        outer = (
            f"failed to get {name} resource metric value: {inner}"
            if kind == "Resource"
            else f"failed to get {name} container metric value: {inner}"
        )
        raise MetricError(error.reason, inner, outer)
    goal = float(utilization) if utilization is not None else _number(target.get("averageValue"))
    try:
        replicas = replicas_from_samples(samples, goal, current, utilization=utilization is not None)
    except ValueError as exc:
        inner = f"failed to get {name} {what}: {exc}"
        raise MetricError(
            _missing(kind, name, namespace, None).reason,
            inner,
            f"failed to get {name} resource metric value: {inner}",
        ) from exc
    average = sum(samples.values.values()) / len(samples.values)
    current_value: Obj = {}
    if utilization is not None:
        requested = sum(samples.requests.get(pod, 0.0) for pod in samples.values)
        current_value["averageUtilization"] = int(sum(samples.values.values()) * 100 / requested)
        if samples.raw:
            current_value["averageValue"] = format_quantity(average)
    else:
        current_value["averageValue"] = format_quantity(average)
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
