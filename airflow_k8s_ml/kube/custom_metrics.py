"""Read pods metrics from the custom metrics API (``custom.metrics.k8s.io/v1beta2``), plans.

On a real cluster the API is served by a Prometheus adapter (or KEDA, or any custom metrics server); on the
local cluster by its service proxy's counts. The answer is a ``MetricValueList``; reading it into numbers is
:func:`airflow_k8s_ml.status.canary.metric_values` (pure). This module only builds the request and says,
when the API is not served, what the cluster lacks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from airflow_k8s_ml.errors import ApiError
from airflow_k8s_ml.k8s.selectors import format_label_selector
from airflow_k8s_ml.kube.operations import Plan
from airflow_k8s_ml.kube.requests import Request
from airflow_k8s_ml.status.canary import ERRORS_METRIC, REQUESTS_METRIC, metric_values

__all__ = ["CUSTOM_METRICS_API", "counters", "pods_metric"]

CUSTOM_METRICS_API = "/apis/custom.metrics.k8s.io/v1beta2"


def pods_metric(namespace: str, metric: str, selector: Mapping[str, str]) -> Plan[dict[str, float]]:
    """Pod name -> value of ``metric`` for the pods ``selector`` matches (none: an empty mapping).

    A 404 means the API or the metric is not served: the error then says what a cluster needs for it.
    """
    path = f"{CUSTOM_METRICS_API}/namespaces/{quote(namespace, safe='')}/pods/*/{quote(metric, safe='')}"
    query = (("labelSelector", format_label_selector(selector)),)
    try:
        body: Any = yield Request("GET", path, query)
    except ApiError as exc:
        if exc.not_found or exc.status == 503:
            raise ApiError(
                exc.status,
                exc.reason,
                f"the custom metrics API does not serve the pods metric {metric!r} in {namespace} "
                f"({exc.message}); a canary is judged on it: install a custom metrics server (e.g. the "
                "Prometheus adapter) exposing http_requests_total and http_request_errors_total per pod",
            ) from exc
        raise
    return metric_values(body if isinstance(body, Mapping) else {})


def counters(namespace: str, selector: Mapping[str, str]) -> Plan[dict[str, dict[str, float]]]:
    """Both counters the canary is judged on: ``{"requests": {pod: v}, "errors": {pod: v}}``. Two reads, so
    errors first: the requests read a moment later include every error read (an error is a request too)."""
    errors = yield from pods_metric(namespace, ERRORS_METRIC, selector)
    requests = yield from pods_metric(namespace, REQUESTS_METRIC, selector)
    return {"requests": requests, "errors": errors}
