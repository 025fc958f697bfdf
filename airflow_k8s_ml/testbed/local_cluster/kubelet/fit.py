"""Does a pod fit the node? Pure functions over pods and capacity, shared by the scheduler (to bind) and
the kubelet (to admit pods bound directly through ``spec.nodeName``).

Requests follow the scheduler's rule: per resource, the larger of the sum over app containers and the
largest init container, plus pod overhead; a container's limit stands in for a missing request.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from airflow_k8s_ml.k8s import quantities

from ..settings import NodeCapacity

Obj = dict[str, Any]
Resources = dict[str, Decimal]

GPU = "nvidia.com/gpu"
EPHEMERAL_STORAGE = "100Gi"  # not configurable: only here so pods requesting it can be scheduled
TERMINAL_PHASES = ("Succeeded", "Failed")


def node_capacity(capacity: NodeCapacity) -> Resources:
    resources = {
        "cpu": quantities.parse(capacity.cpu),
        "memory": quantities.parse(capacity.memory),
        "pods": Decimal(capacity.pods),
        "ephemeral-storage": quantities.parse(EPHEMERAL_STORAGE),
    }
    if capacity.gpus:
        resources[GPU] = Decimal(capacity.gpus)
    return resources


def container_requests(container: Obj) -> Resources:
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return {name: value for name, raw in merged.items() if (value := quantities.try_parse(raw)) is not None}


def pod_requests(pod: Obj) -> Resources:
    spec = pod.get("spec") or {}
    total: Resources = {}
    for container in spec.get("containers") or []:
        for name, value in container_requests(container).items():
            total[name] = total.get(name, Decimal(0)) + value
    for container in spec.get("initContainers") or []:
        for name, value in container_requests(container).items():
            total[name] = max(total.get(name, Decimal(0)), value)
    for name, raw in (spec.get("overhead") or {}).items():
        extra = quantities.try_parse(raw)
        if extra is not None:
            total[name] = total.get(name, Decimal(0)) + extra
    return total


def holds_resources(pod: Obj, node: str) -> bool:
    """Bound to ``node`` and not terminal: its requests count against the node."""
    return (pod.get("spec") or {}).get("nodeName") == node and (pod.get("status") or {}).get(
        "phase"
    ) not in TERMINAL_PHASES


_REQUESTS: dict[tuple[str, object], Resources] = {}


def _cached_requests(pod: Obj) -> Resources:
    """pod_requests, remembered per pod uid and spec generation: every pod start sums the requests of
    every bound pod, and parsing quantities again each time grew with the square of the pod count."""
    meta = pod["metadata"]
    key = (str(meta.get("uid", "")), meta.get("generation"))
    if not key[0]:
        return pod_requests(pod)
    if key not in _REQUESTS:
        if len(_REQUESTS) > 4096:
            _REQUESTS.clear()
        _REQUESTS[key] = pod_requests(pod)
    return _REQUESTS[key]


def used_resources(pods: Iterable[Obj], node: str, exclude_uid: str = "") -> Resources:
    used: Resources = {"pods": Decimal(0)}
    for pod in pods:
        if pod["metadata"].get("uid") == exclude_uid or not holds_resources(pod, node):
            continue
        used["pods"] += 1
        for name, value in _cached_requests(pod).items():
            used[name] = used.get(name, Decimal(0)) + value
    return used


def insufficient(request: Resources, used: Resources, capacity: Resources) -> list[str]:
    """The NodeResourcesFit failure reasons (``Insufficient cpu``, ``Too many pods``), sorted."""
    reasons = []
    if used.get("pods", Decimal(0)) + 1 > capacity.get("pods", Decimal(0)):
        reasons.append("Too many pods")
    for name, value in request.items():
        if value <= 0 or name == "pods":
            continue
        if used.get(name, Decimal(0)) + value > capacity.get(name, Decimal(0)):
            reasons.append(f"Insufficient {name}")
    return sorted(reasons)


def selector_mismatch(pod: Obj, node_labels: dict[str, str]) -> bool:
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    return any(node_labels.get(k) != v for k, v in selector.items())


def unschedulable_message(reasons: list[str], prefilter: str | None = None) -> str:
    """The scheduler's FitError message for a one-node cluster (``0/1 nodes are available: ...``).

    A PreFilter failure (a missing claim) is reported bare, node filter failures with the node count.
    """
    if prefilter:
        return f"0/1 nodes are available: {prefilter}."
    return "0/1 nodes are available: " + ", ".join(f"1 {r}" for r in sorted(reasons)) + "."


def rejection(request: Resources, used: Resources, capacity: Resources) -> tuple[str, str] | None:
    """Kubelet admission of a pod bound without the scheduler: (reason, message) when it does not fit."""
    for name, value in sorted(request.items()):
        if value <= 0 or name == "pods":
            continue
        have = capacity.get(name, Decimal(0))
        in_use = used.get(name, Decimal(0))
        if in_use + value > have:

            def show(v: Decimal, n: str = name) -> str:
                return str(int(v * 1000)) if n == "cpu" else quantities.format_plain(v)

            return (
                f"OutOf{name}",
                f"Pod was rejected: Node didn't have enough resource: {name}, requested: "
                f"{show(value)}, used: {show(in_use)}, capacity: {show(have)}",
            )
    return None
