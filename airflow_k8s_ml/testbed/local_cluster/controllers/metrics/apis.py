"""metrics-server and a Prometheus adapter in one controller: it serves ``metrics.k8s.io/v1beta1`` from the
kubelet's cgroup readings and ``custom.metrics.k8s.io/v1beta2`` from the service proxy's request counts,
and the HPA controller reads the same figures through :meth:`MetricsAPIs.pod_values` (one place that says
what a pod's metric is, whoever asks).

Served paths (GET only, as upstream):
- ``/apis/metrics.k8s.io/v1beta1[/namespaces/{ns}]/pods[/{name}]`` and ``.../nodes[/{name}]``
  (``labelSelector`` honoured);
- ``/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/{name or *}/{metric}?labelSelector=...`` for
  ``http_requests_per_second`` (a rate over ``request_rate_window`` seconds), ``http_requests_total`` and
  ``http_request_errors_total`` (counters since the proxy first reached the pod; errors are 5xx answers and
  connection errors).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from airflow_k8s_ml.k8s import quantities
from airflow_k8s_ml.k8s.selectors import LabelSelector, parse_label_selector

from ... import errors, routing
from ...kubelet.usage import UsageMeter
from ...resources import CUSTOM_METRICS_GROUP, CUSTOM_POD_METRICS, METRICS_GROUP, ResourceType, lookup
from ...responses import json_response
from ...store import Obj
from ..base import Controller
from ..deployment.replicaset_pods import is_active
from . import shapes
from .requests import RequestCounts

if TYPE_CHECKING:
    from ...services import ClusterServices

RATE = "http_requests_per_second"


def _rt(group: str, version: str, plural: str) -> ResourceType:
    rt = lookup(group, version, plural)
    assert rt is not None
    return rt


POD_METRICS = _rt(METRICS_GROUP, "v1beta1", "pods")
NODE_METRICS = _rt(METRICS_GROUP, "v1beta1", "nodes")
CUSTOM_PODS = _rt(CUSTOM_METRICS_GROUP, "v1beta2", "pods")
PODS = _rt("", "v1", "pods")
NODES = _rt("", "v1", "nodes")


def _selector(request: web.Request) -> LabelSelector | None:
    text = request.query.get("labelSelector") or ""
    return parse_label_selector(text) if text else None


def _matches(obj: Obj, selector: LabelSelector | None) -> bool:
    return selector is None or selector.matches((obj.get("metadata") or {}).get("labels") or {})


def _running(pod: Obj) -> bool:
    return is_active(pod) and (pod.get("status") or {}).get("phase") == "Running"


class MetricsAPIs(Controller):
    name = "metrics-server"

    def __init__(self, cluster: ClusterServices) -> None:
        super().__init__(cluster)
        self.requests = RequestCounts(self.settings.request_rate_window)

    def attach(self) -> None:
        self.cluster.register_reader(POD_METRICS, self.serve_pod_metrics)
        self.cluster.register_reader(NODE_METRICS, self.serve_node_metrics)
        self.cluster.register_reader(CUSTOM_PODS, self.serve_custom_metrics)

    def all_keys(self) -> list[tuple[str, str]]:
        """Each resync forgets the counters of pods that are gone (nothing else to reconcile)."""
        live = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.store.iter(PODS)}
        self.requests.forget(live)
        return []

    # -- what a pod's figures are (the HPA reads these too) ---------------------------------------
    def _meter(self) -> UsageMeter | None:
        meter = getattr(self.cluster.running_controller("kubelet"), "usage", None)
        return meter if isinstance(meter, UsageMeter) else None

    def pod_usage(self, pod: Obj) -> Obj | None:
        """The pod's ``PodMetrics``, or None while it has no figures (not running, no cgroup, or fewer than
        two samples yet)."""
        meter = self._meter()
        usage = meter.pod(pod["metadata"]["uid"]) if meter is not None and _running(pod) else None
        if usage is None:
            return None
        containers = [(c.name, c.cores, c.memory) for c in usage.containers]
        return shapes.pod_metrics(pod, usage.at, usage.window, containers)

    def custom_value(self, pod: Obj, metric: str) -> Obj:
        """The pod's ``MetricValue`` of one of :data:`CUSTOM_POD_METRICS` (0 for a pod never reached)."""
        now = self.settings.clock.now()
        meta = pod["metadata"]
        counts = self.requests.of((meta["namespace"], meta["name"]), meta["uid"])
        window = self.settings.request_rate_window
        if metric == RATE:
            rate = counts.rate(now, window) if counts is not None else 0.0
            return shapes.metric_value(pod, metric, shapes.quantity(rate), now, round(window))
        total = 0 if counts is None else counts.total if metric == "http_requests_total" else counts.errors
        return shapes.metric_value(pod, metric, str(total), now, None)

    def pod_values(self, namespace: str, selector: LabelSelector, metric: str) -> dict[str, float]:
        """Per running pod matching ``selector``: cpu (cores) or memory (bytes) from metrics.k8s.io, or a
        custom metric's value; pods without figures are left out (the HPA counts them as missing)."""
        values: dict[str, float] = {}
        for pod in self.store.iter(PODS, namespace):
            if not _running(pod) or not _matches(pod, selector):
                continue
            if metric in ("cpu", "memory"):
                usage = self._meter()
                figures = usage.pod(pod["metadata"]["uid"]) if usage is not None else None
                if figures is not None:
                    values[pod["metadata"]["name"]] = sum(
                        c.cores if metric == "cpu" else float(c.memory) for c in figures.containers
                    )
            elif metric in CUSTOM_POD_METRICS:
                values[pod["metadata"]["name"]] = float(
                    quantities.parse(self.custom_value(pod, metric)["value"])
                )
        return values

    # -- metrics.k8s.io ----------------------------------------------------------------------------
    async def serve_pod_metrics(self, request: web.Request, target: routing.Target) -> web.StreamResponse:
        _get_only(request, target)
        if target.name is not None:
            pod = self.store.find(PODS, target.namespace or "", target.name)
            found = self.pod_usage(pod) if pod is not None else None
            if found is None:
                raise errors.not_found(METRICS_GROUP, "pods", f"{target.namespace}/{target.name}")
            return json_response(found)
        selector = _selector(request)
        items = [
            m
            for pod in self.store.iter(PODS, target.namespace)
            if _matches(pod, selector) and (m := self.pod_usage(pod)) is not None
        ]
        return json_response(shapes.item_list("PodMetricsList", shapes.METRICS_API, items))

    async def serve_node_metrics(self, request: web.Request, target: routing.Target) -> web.StreamResponse:
        _get_only(request, target)
        meter = self._meter()
        usage = meter.node() if meter is not None else None
        selector = _selector(request)
        items = []
        for node in self.store.iter(NODES):
            if usage is None or not _matches(node, selector):
                continue
            if target.name is not None and node["metadata"]["name"] != target.name:
                continue
            figures = usage.containers[0]
            items.append(shapes.node_metrics(node, usage.at, usage.window, figures.cores, figures.memory))
        if target.name is not None:
            if not items:
                raise errors.not_found(METRICS_GROUP, "nodes", target.name)
            return json_response(items[0])
        return json_response(shapes.item_list("NodeMetricsList", shapes.METRICS_API, items))

    # -- custom.metrics.k8s.io ---------------------------------------------------------------------
    async def serve_custom_metrics(self, request: web.Request, target: routing.Target) -> web.StreamResponse:
        _get_only(request, target)
        metric = target.subresource or ""
        if target.name is None or metric not in CUSTOM_POD_METRICS or target.subpath:
            raise errors.StatusError(
                404, "NotFound", f"the server could not find the metric {metric or target.name} for pods"
            )
        namespace = target.namespace or "default"
        if target.name == "*":
            selector = _selector(request)
            pods = [p for p in self.store.iter(PODS, namespace) if _running(p) and _matches(p, selector)]
        else:
            pod = self.store.find(PODS, namespace, target.name)
            if pod is None or not _running(pod):
                raise errors.StatusError(
                    404, "NotFound", f"the server could not find the metric {metric} for pods {target.name}"
                )
            pods = [pod]
        items = [self.custom_value(p, metric) for p in pods]
        return json_response(shapes.item_list("MetricValueList", shapes.CUSTOM_METRICS_API, items))


def _get_only(request: web.Request, target: routing.Target) -> None:
    if request.method != "GET":
        raise errors.method_not_allowed()
    if target.namespace is None and target.rt is not None and target.rt.namespaced and target.name:
        raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
