"""What makes the arguments of a model server valid, as plain functions over plain values.

Why apart from :mod:`~airflow_k8s_ml.manifests.serving`: ``InferenceDeploymentOperator`` checks its static
arguments every time a DAG file is parsed, in a fresh dag-processor fork, and the typed specs (frozen
dataclasses, the pod builder) cost milliseconds to import there (``bench/parse_cost.py``). These rules need
no dataclass. :class:`~airflow_k8s_ml.manifests.serving.InferenceSpec`, ``Autoscaling`` and
``IngressPolicy`` apply exactly these functions in ``__post_init__``, so a parse-time check and a built spec
can never disagree.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.manifests.formats import (
    validate_annotations,
    validate_labels,
    validate_name,
    validate_namespace,
)
from airflow_k8s_ml.manifests.quantities import format_quantity, parse_quantity
from airflow_k8s_ml.manifests.validation import (
    PLACEHOLDER,
    check_choice,
    check_int,
    check_non_empty_str,
    check_optional_int,
    check_port,
    check_str_sequence,
    fail,
)

__all__ = [
    "AUTOSCALING_DEFAULTS",
    "CANARY_DEFAULTS",
    "DEFAULT_STARTUP_TIMEOUT",
    "INFERENCE_DEFAULTS",
    "INGRESS_DEFAULTS",
    "check_autoscaling_fields",
    "check_canary_fields",
    "check_inference_fields",
    "check_ingress_fields",
    "check_server_name",
    "initial_replicas",
]

#: How long a pod may take to load its model before the kubelet restarts it (the startupProbe's budget);
#: Kubernetes' own default progress deadline, so a slow load is never killed before the rollout would fail.
DEFAULT_STARTUP_TIMEOUT = 600
#: An integer percentage from 0 to 100 (matched on use: compiling it on import costs every DAG parse).
_PERCENT = r"^(100|[1-9]?[0-9])%$"

#: The fields of :class:`~airflow_k8s_ml.manifests.serving.Autoscaling` but the required ``max_replicas``.
#: ``tests/unit/test_manifests_serving.py`` checks that the two stay the same.
AUTOSCALING_DEFAULTS: Mapping[str, Any] = {
    "min_replicas": 1,
    "autoscale_metric": None,
    "target_cpu_utilization": None,
    "target_requests_per_second": None,
    "metric_name": None,
    "metric_type": "Pods",
    "metric_target": None,
    "metric_selector": {},
    "scale_down_stabilization_seconds": None,
}
#: The per-pod request rate a Prometheus adapter (and the local cluster's custom metrics API) serves.
REQUESTS_PER_SECOND_METRIC = "http_requests_per_second"
#: ``autoscale_metric``: which of the given targets the HPA scales on (None: every target given).
AUTOSCALE_METRICS = ("cpu", "rps", "both")
#: The fields of :class:`~airflow_k8s_ml.manifests.serving.IngressPolicy`, with their defaults.
INGRESS_DEFAULTS: Mapping[str, Any] = {"from_namespaces": (), "from_pod_labels": {}, "from_cidrs": ()}
#: The fields of :class:`~airflow_k8s_ml.manifests.serving.InferenceSpec` but ``pod``, ``model_uri``
#: (required), ``autoscaling`` and ``network_policy`` (checked by their own functions), with defaults.
INFERENCE_DEFAULTS: Mapping[str, Any] = {
    "replicas": None,
    "port": 8080,
    "service_port": 80,
    "readiness_path": "/healthz",
    "liveness_path": None,
    "startup_timeout_seconds": DEFAULT_STARTUP_TIMEOUT,
    "probe_period_seconds": 10,
    "max_surge": 1,
    "max_unavailable": 0,
    "min_ready_seconds": 0,
    "progress_deadline_seconds": 600,
    "revision_history_limit": 10,
    "pdb_min_available": None,
    "labels": {},
    "annotations": {},
}


def check_server_name(name: Any) -> str:
    """The name every object of a model server shares: the Service's, so the stricter DNS-1035 rule."""
    return validate_name("Service", name, "name")


def _with_defaults(
    values: Mapping[str, Any], defaults: Mapping[str, Any], required: tuple[str, ...], where: str
) -> dict[str, Any]:
    """All fields, defaults filled in; an unknown or missing key is named under ``where``."""
    known = {*defaults, *required}
    unknown = sorted(set(values) - known)
    if unknown:
        raise fail(f"{where}.{unknown[0]}", f"unknown key; expected one of {', '.join(sorted(known))}")
    for name in required:
        if name not in values:
            raise fail(f"{where}.{name}", "is required")
    return {**defaults, **values}


def _int_or_percent(value: Any, field_name: str) -> int | str:
    if isinstance(value, str):
        if not re.match(_PERCENT, value):
            raise fail(field_name, f"must be an integer or a percentage like '25%', got {value!r}")
        return value
    return check_int(value, field_name, minimum=0)


def _is_zero(value: int | str) -> bool:
    return value in (0, "0%")


def check_autoscaling_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """An HPA's fields (``max_replicas`` and any of :data:`AUTOSCALING_DEFAULTS`), all returned normalised."""
    scaling = _with_defaults(values, AUTOSCALING_DEFAULTS, ("max_replicas",), "autoscaling")
    check_int(scaling["min_replicas"], "autoscaling.min_replicas", minimum=1)
    check_int(scaling["max_replicas"], "autoscaling.max_replicas", minimum=1)
    if scaling["max_replicas"] < scaling["min_replicas"]:
        raise fail("autoscaling.max_replicas", f"must be >= min_replicas ({scaling['min_replicas']})")
    check_optional_int(scaling["target_cpu_utilization"], "autoscaling.target_cpu_utilization", minimum=1)
    _check_request_rate(scaling)
    check_choice(scaling["metric_type"], ("Pods", "External"), "autoscaling.metric_type")
    name, target = scaling["metric_name"], scaling["metric_target"]
    if (
        name is None
        and scaling["target_cpu_utilization"] is None
        and scaling["target_requests_per_second"] is None
    ):
        raise fail(
            "autoscaling",
            "needs target_cpu_utilization, target_requests_per_second or metric_name (or several)",
        )
    if name == REQUESTS_PER_SECOND_METRIC and scaling["target_requests_per_second"] is not None:
        raise fail("autoscaling.metric_name", f"{name} is already the target_requests_per_second metric")
    if name is not None:
        check_non_empty_str(name, "autoscaling.metric_name")
        if target is None:
            raise fail("autoscaling.metric_target", "is required with metric_name (average value per pod)")
    if target is not None:
        if name is None:
            raise fail("autoscaling.metric_target", "given without metric_name")
        if parse_quantity(format_quantity(target, "autoscaling.metric_target")) <= 0:
            raise fail("autoscaling.metric_target", "must be greater than 0")
    scaling["metric_selector"] = validate_labels(scaling["metric_selector"], "autoscaling.metric_selector")
    check_optional_int(
        scaling["scale_down_stabilization_seconds"],
        "autoscaling.scale_down_stabilization_seconds",
        minimum=0,
        maximum=3600,
    )
    return scaling


def _check_request_rate(scaling: dict[str, Any]) -> None:
    """``autoscale_metric`` picks among the targets given, so each it names must be given: "cpu" needs
    ``target_cpu_utilization``, "rps" ``target_requests_per_second`` (a positive rate per pod), "both" both.
    The unpicked target is dropped, so one Param can switch a DAG between them."""
    rate = scaling["target_requests_per_second"]
    if rate is not None:
        field_name = "autoscaling.target_requests_per_second"
        scaling["target_requests_per_second"] = format_quantity(rate, field_name)
        if parse_quantity(scaling["target_requests_per_second"]) <= 0:
            raise fail(field_name, "must be greater than 0 (requests per second per pod)")
    metric = scaling["autoscale_metric"]
    if metric is None or metric == PLACEHOLDER:  # templated (a DAG Param): judged once rendered
        return
    check_choice(metric, AUTOSCALE_METRICS, "autoscaling.autoscale_metric")
    if metric in ("cpu", "both") and scaling["target_cpu_utilization"] is None:
        raise fail("autoscaling.target_cpu_utilization", f"is required with autoscale_metric={metric!r}")
    if metric in ("rps", "both") and rate is None:
        raise fail("autoscaling.target_requests_per_second", f"is required with autoscale_metric={metric!r}")
    if metric == "cpu":
        scaling["target_requests_per_second"] = None
    elif metric == "rps":
        scaling["target_cpu_utilization"] = None


#: Every key ``canary=`` takes but ``percent`` (the switch, required), with its default.
CANARY_DEFAULTS: Mapping[str, Any] = {"analysis_seconds": 120.0, "max_error_rate": 0.01, "min_requests": 50}


def _canary_number(value: Any, field: str, *, integer: bool = False) -> float:
    """A number, or its text (a templated value renders to a string: ``"{{ params.canary_percent }}"``)."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise fail(field, f"must be a number, got {value!r}") from None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or value != value
        or abs(value) == float("inf")
    ):
        raise fail(field, f"must be a number, got {value!r}")
    if integer and value != int(value):
        raise fail(field, f"must be a whole number, got {value!r}")
    return float(value)


def check_canary_fields(value: Any, field: str = "canary") -> dict[str, Any] | None:
    """``canary=`` checked and normalised (``percent``, ``analysis_seconds``, ``max_error_rate``,
    ``min_requests``); None when off (``None`` or ``percent`` 0, so a DAG Param can switch it)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise fail(field, f"must be a mapping with 'percent', got {type(value).__name__}")
    unknown = sorted(set(value) - {"percent", *CANARY_DEFAULTS})
    if unknown:
        raise fail(
            f"{field}.{unknown[0]}", f"unknown key (allowed: {', '.join(['percent', *CANARY_DEFAULTS])})"
        )
    given = {**CANARY_DEFAULTS, **value}
    if "percent" not in given:
        raise fail(f"{field}.percent", "is required (1..99, the canary's share of the pods)")
    percent = _canary_number(given["percent"], f"{field}.percent", integer=True)
    if not 0 <= percent <= 99:
        raise fail(f"{field}.percent", f"must be in 1..99 (0: no canary), got {given['percent']!r}")
    seconds = _canary_number(given["analysis_seconds"], f"{field}.analysis_seconds")
    if seconds <= 0:
        raise fail(f"{field}.analysis_seconds", f"must be > 0, got {seconds:g}")
    rate = _canary_number(given["max_error_rate"], f"{field}.max_error_rate")
    if not 0 <= rate < 1:
        raise fail(f"{field}.max_error_rate", f"must be in [0, 1), got {rate:g}")
    minimum = _canary_number(given["min_requests"], f"{field}.min_requests", integer=True)
    if minimum < 1:
        raise fail(f"{field}.min_requests", f"must be >= 1, got {given['min_requests']!r}")
    if percent == 0:
        return None
    return {
        "percent": int(percent),
        "analysis_seconds": seconds,
        "max_error_rate": rate,
        "min_requests": int(minimum),
    }


def check_ingress_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """A NetworkPolicy's allowed sources (any of :data:`INGRESS_DEFAULTS`); all returned, normalised."""
    import ipaddress  # only when a policy is given

    policy = _with_defaults(values, INGRESS_DEFAULTS, (), "network_policy")
    namespaces = check_str_sequence(policy["from_namespaces"], "network_policy.from_namespaces")
    for index, ns in enumerate(namespaces):
        validate_namespace(ns, f"network_policy.from_namespaces[{index}]")
    pod_labels = validate_labels(policy["from_pod_labels"], "network_policy.from_pod_labels")
    cidrs = check_str_sequence(policy["from_cidrs"], "network_policy.from_cidrs")
    for index, cidr in enumerate(cidrs):
        try:
            ipaddress.ip_network(cidr, strict=True)
        except ValueError as exc:
            raise fail(f"network_policy.from_cidrs[{index}]", f"invalid CIDR {cidr!r}: {exc}") from exc
    if not (namespaces or pod_labels or cidrs):
        raise fail("network_policy", "needs at least one of from_namespaces, from_pod_labels, from_cidrs")
    return {"from_namespaces": namespaces, "from_pod_labels": pod_labels, "from_cidrs": cidrs}


def initial_replicas(replicas: int | None, autoscaling: Mapping[str, Any] | None) -> int:
    """The Deployment's first replica count: the HPA's ``min_replicas`` when it owns the count."""
    if autoscaling is not None:
        return int(autoscaling["min_replicas"])
    return 1 if replicas is None else replicas


def _check_pdb(value: Any, floor: int) -> None:
    if value is None:
        return
    checked = _int_or_percent(value, "pdb_min_available")
    if isinstance(checked, int) and checked >= floor:
        raise fail(
            "pdb_min_available",
            f"{checked} >= replicas ({floor}) would block every voluntary eviction (node drains hang); "
            "use fewer or more replicas",
        )
    if checked == "100%":
        raise fail("pdb_min_available", "100% would block every voluntary eviction (node drains hang)")


def _check_rollout(spec: Mapping[str, Any]) -> None:
    surge = _int_or_percent(spec["max_surge"], "max_surge")
    unavailable = _int_or_percent(spec["max_unavailable"], "max_unavailable")
    if _is_zero(surge) and _is_zero(unavailable):
        raise fail("max_unavailable", "may not be 0 when max_surge is 0 (the rollout could never progress)")
    check_int(spec["min_ready_seconds"], "min_ready_seconds", minimum=0)
    check_int(spec["progress_deadline_seconds"], "progress_deadline_seconds", minimum=1)
    if spec["progress_deadline_seconds"] <= spec["min_ready_seconds"]:
        raise fail("progress_deadline_seconds", "must be greater than min_ready_seconds")
    check_int(spec["revision_history_limit"], "revision_history_limit", minimum=0)


def check_inference_fields(
    values: Mapping[str, Any], *, requests: Mapping[str, Any], autoscaling: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A model server's fields (``model_uri`` and any of :data:`INFERENCE_DEFAULTS`); all returned,
    normalised. ``requests`` are the pod's (a CPU-utilisation HPA needs a cpu request); ``autoscaling`` the
    checked HPA fields, or None."""
    spec = _with_defaults(values, INFERENCE_DEFAULTS, ("model_uri",), "spec")
    check_non_empty_str(spec["model_uri"], "model_uri")
    check_optional_int(spec["replicas"], "replicas", minimum=0)
    if autoscaling is not None:
        if spec["replicas"] is not None:
            raise fail("replicas", "conflicts with autoscaling: the HPA owns the replica count")
        if autoscaling["target_cpu_utilization"] is not None and "cpu" not in requests:
            raise fail("requests", "a cpu request is required for a CPU-utilisation HPA target")
    check_port(spec["port"], "port")
    check_port(spec["service_port"], "service_port")
    for name in ("readiness_path", "liveness_path"):
        path = spec[name]
        if path is not None and (not isinstance(path, str) or not path.startswith("/")):
            raise fail(name, f"must be an absolute URL path like '/healthz', got {path!r}")
    check_optional_int(spec["startup_timeout_seconds"], "startup_timeout_seconds", minimum=1)
    check_int(spec["probe_period_seconds"], "probe_period_seconds", minimum=1)
    _check_rollout(spec)
    _check_pdb(spec["pdb_min_available"], initial_replicas(spec["replicas"], autoscaling))
    spec["labels"] = validate_labels(spec["labels"], "labels")
    spec["annotations"] = validate_annotations(spec["annotations"], "annotations")
    return spec
