"""The answers of the metrics APIs, built from figures (pure).

Shapes as upstream serves them: metrics-server's ``PodMetrics``/``NodeMetrics`` (k8s.io/metrics
``metrics/v1beta1``: ``timestamp``, ``window`` as a Go duration, CPU in nanocores ``"123456n"``, memory in
``Ki``) and the custom metrics API's ``MetricValueList`` (``custom_metrics/v1beta2``: ``describedObject``,
``metric {name, selector}``, ``timestamp``, ``windowSeconds``, ``value`` as a Quantity such as ``"2500m"``).
``describedObject.apiVersion`` of a pod is ``"/v1"``, as a Prometheus adapter writes it for the core group.
"""

from __future__ import annotations

from typing import Any

from ...meta import rfc3339

Obj = dict[str, Any]
METRICS_API = "metrics.k8s.io/v1beta1"
CUSTOM_METRICS_API = "custom.metrics.k8s.io/v1beta2"


def nanocores(cores: float) -> str:
    return f"{round(cores * 1e9)}n"


def kibibytes(size: int) -> str:
    return f"{size // 1024}Ki"


def quantity(value: float) -> str:
    """A Quantity in milli-units unless whole: 2.5 -> ``"2500m"``, 3.0 -> ``"3"``."""
    milli = round(value * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def go_duration(seconds: float) -> str:
    """``time.Duration.String`` to the millisecond: 15.0 -> ``"15s"``, 1.0405 -> ``"1.04s"``."""
    text = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return f"{text}s"


def _meta(obj: Obj, at: float) -> Obj:
    meta = obj.get("metadata") or {}
    out: Obj = {"name": meta.get("name", "")}
    if meta.get("namespace"):
        out["namespace"] = meta["namespace"]
    out["creationTimestamp"] = rfc3339(at)
    if meta.get("labels"):
        out["labels"] = dict(meta["labels"])
    return out


def _usage(cores: float, memory: int) -> Obj:
    return {"cpu": nanocores(cores), "memory": kibibytes(memory)}


def pod_metrics(pod: Obj, at: float, window: float, containers: list[tuple[str, float, int]]) -> Obj:
    return {
        "kind": "PodMetrics",
        "apiVersion": METRICS_API,
        "metadata": _meta(pod, at),
        "timestamp": rfc3339(at),
        "window": go_duration(window),
        "containers": [{"name": name, "usage": _usage(cores, memory)} for name, cores, memory in containers],
    }


def node_metrics(node: Obj, at: float, window: float, cores: float, memory: int) -> Obj:
    return {
        "kind": "NodeMetrics",
        "apiVersion": METRICS_API,
        "metadata": _meta(node, at),
        "timestamp": rfc3339(at),
        "window": go_duration(window),
        "usage": _usage(cores, memory),
    }


def metric_value(
    pod: Obj, metric: str, value: str, at: float, window: int | None, selector: Obj | None = None
) -> Obj:
    identifier: Obj = {"name": metric}
    if selector is not None:
        identifier["selector"] = selector
    item: Obj = {
        "describedObject": {
            "kind": "Pod",
            "namespace": pod["metadata"].get("namespace", ""),
            "name": pod["metadata"]["name"],
            "apiVersion": "/v1",
        },
        "metric": identifier,
        "timestamp": rfc3339(at),
    }
    if window is not None:
        item["windowSeconds"] = window
    item["value"] = value
    return item


def item_list(kind: str, api_version: str, items: list[Obj]) -> Obj:
    return {"kind": kind, "apiVersion": api_version, "metadata": {}, "items": items}
