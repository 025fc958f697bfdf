"""HorizontalPodAutoscaler conversion between autoscaling/v2 (storage) and autoscaling/v1.

As pkg/apis/autoscaling/v1/conversion.go: v1 has only ``targetCPUUtilizationPercentage`` and
``currentCPUUtilizationPercentage``; everything else a v2 object holds travels in annotations of the v1
view (``autoscaling.alpha.kubernetes.io/metrics``, ``current-metrics``, ``conditions``, ``behavior``, in the
v1 (v2beta1-shaped) metric format) so a v1 read-modify-write loses nothing. Those annotations never reach
storage. A v1 object without any metric gets the implicit 80% CPU target.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ...resources import ResourceType

Obj = dict[str, Any]

METRICS = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR = "autoscaling.alpha.kubernetes.io/behavior"
ROUND_TRIP = (METRICS, CURRENT_METRICS, CONDITIONS, BEHAVIOR)
DEFAULT_CPU_UTILIZATION = 80


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _drop_none(value: Obj) -> Obj:
    return {k: v for k, v in value.items() if v is not None}


# -- metric specs --------------------------------------------------------------------------------------
def _is_cpu_utilization(metric: Obj) -> bool:
    resource = metric.get("resource") or {}
    return (
        metric.get("type") == "Resource"
        and resource.get("name") == "cpu"
        and (resource.get("target") or {}).get("averageUtilization") is not None
    )


def metric_spec_to_v1(metric: Obj) -> Obj:
    kind = metric.get("type")
    out: Obj = {"type": kind}
    if kind == "Resource" and metric.get("resource"):
        r = metric["resource"]
        t = r.get("target") or {}
        out["resource"] = _drop_none(
            {
                "name": r.get("name"),
                "targetAverageUtilization": t.get("averageUtilization"),
                "targetAverageValue": t.get("averageValue"),
            }
        )
    elif kind == "ContainerResource" and metric.get("containerResource"):
        r = metric["containerResource"]
        t = r.get("target") or {}
        out["containerResource"] = _drop_none(
            {
                "name": r.get("name"),
                "container": r.get("container"),
                "targetAverageUtilization": t.get("averageUtilization"),
                "targetAverageValue": t.get("averageValue"),
            }
        )
    elif kind == "Pods" and metric.get("pods"):
        p = metric["pods"]
        out["pods"] = _drop_none(
            {
                "metricName": (p.get("metric") or {}).get("name"),
                "targetAverageValue": (p.get("target") or {}).get("averageValue"),
                "selector": (p.get("metric") or {}).get("selector"),
            }
        )
    elif kind == "Object" and metric.get("object"):
        o = metric["object"]
        t = o.get("target") or {}
        out["object"] = _drop_none(
            {
                "target": o.get("describedObject"),
                "metricName": (o.get("metric") or {}).get("name"),
                "targetValue": t.get("value"),
                "selector": (o.get("metric") or {}).get("selector"),
                "averageValue": t.get("averageValue"),
            }
        )
    elif kind == "External" and metric.get("external"):
        e = metric["external"]
        t = e.get("target") or {}
        out["external"] = _drop_none(
            {
                "metricName": (e.get("metric") or {}).get("name"),
                "metricSelector": (e.get("metric") or {}).get("selector"),
                "targetValue": t.get("value"),
                "targetAverageValue": t.get("averageValue"),
            }
        )
    return out


def _target(kind: str, **values: Any) -> Obj:
    return _drop_none({"type": kind, **values})


def metric_spec_to_v2(metric: Obj) -> Obj:
    kind = metric.get("type")
    out: Obj = {"type": kind}
    if kind == "Resource" and metric.get("resource"):
        r = metric["resource"]
        util = r.get("targetAverageUtilization")
        out["resource"] = {
            "name": r.get("name"),
            "target": _target(
                "AverageValue" if util is None else "Utilization",
                averageUtilization=util,
                averageValue=r.get("targetAverageValue"),
            ),
        }
    elif kind == "ContainerResource" and metric.get("containerResource"):
        r = metric["containerResource"]
        util = r.get("targetAverageUtilization")
        out["containerResource"] = {
            "name": r.get("name"),
            "container": r.get("container"),
            "target": _target(
                "AverageValue" if util is None else "Utilization",
                averageUtilization=util,
                averageValue=r.get("targetAverageValue"),
            ),
        }
    elif kind == "Pods" and metric.get("pods"):
        p = metric["pods"]
        out["pods"] = {
            "metric": _drop_none({"name": p.get("metricName"), "selector": p.get("selector")}),
            "target": _target("AverageValue", averageValue=p.get("targetAverageValue")),
        }
    elif kind == "Object" and metric.get("object"):
        o = metric["object"]
        average = o.get("averageValue")
        out["object"] = {
            "describedObject": o.get("target"),
            "metric": _drop_none({"name": o.get("metricName"), "selector": o.get("selector")}),
            "target": _target(
                "Value" if average is None else "AverageValue",
                value=o.get("targetValue"),
                averageValue=average,
            ),
        }
    elif kind == "External" and metric.get("external"):
        e = metric["external"]
        value = e.get("targetValue")
        out["external"] = {
            "metric": _drop_none({"name": e.get("metricName"), "selector": e.get("metricSelector")}),
            "target": _target(
                "AverageValue" if value is None else "Value",
                value=value,
                averageValue=e.get("targetAverageValue"),
            ),
        }
    return out


# -- metric statuses -----------------------------------------------------------------------------------
def metric_status_to_v1(status: Obj) -> Obj:
    kind = status.get("type")
    out: Obj = {"type": kind}
    if kind in ("Resource", "ContainerResource") and status.get(_key(kind)):
        r = status[_key(kind)]
        c = r.get("current") or {}
        out[_key(kind)] = _drop_none(
            {
                "name": r.get("name"),
                "container": r.get("container"),
                "currentAverageUtilization": c.get("averageUtilization"),
                "currentAverageValue": c.get("averageValue", "0"),
            }
        )
    elif kind == "Pods" and status.get("pods"):
        p = status["pods"]
        out["pods"] = _drop_none(
            {
                "metricName": (p.get("metric") or {}).get("name"),
                "currentAverageValue": (p.get("current") or {}).get("averageValue"),
                "selector": (p.get("metric") or {}).get("selector"),
            }
        )
    elif kind == "Object" and status.get("object"):
        o = status["object"]
        c = o.get("current") or {}
        out["object"] = _drop_none(
            {
                "target": o.get("describedObject"),
                "metricName": (o.get("metric") or {}).get("name"),
                "currentValue": c.get("value", "0"),
                "averageValue": c.get("averageValue"),
                "selector": (o.get("metric") or {}).get("selector"),
            }
        )
    elif kind == "External" and status.get("external"):
        e = status["external"]
        c = e.get("current") or {}
        out["external"] = _drop_none(
            {
                "metricName": (e.get("metric") or {}).get("name"),
                "metricSelector": (e.get("metric") or {}).get("selector"),
                "currentValue": c.get("value", "0"),
                "currentAverageValue": c.get("averageValue"),
            }
        )
    return out


def _key(kind: str) -> str:
    return {"Resource": "resource", "ContainerResource": "containerResource"}[kind]


def metric_status_to_v2(status: Obj) -> Obj:
    kind = status.get("type")
    out: Obj = {"type": kind}
    if kind in ("Resource", "ContainerResource") and status.get(_key(kind)):
        r = status[_key(kind)]
        out[_key(kind)] = _drop_none(
            {
                "name": r.get("name"),
                "container": r.get("container"),
                "current": _drop_none(
                    {
                        "averageUtilization": r.get("currentAverageUtilization"),
                        "averageValue": r.get("currentAverageValue"),
                    }
                ),
            }
        )
    elif kind == "Pods" and status.get("pods"):
        p = status["pods"]
        out["pods"] = {
            "metric": _drop_none({"name": p.get("metricName"), "selector": p.get("selector")}),
            "current": _drop_none({"averageValue": p.get("currentAverageValue")}),
        }
    elif kind == "Object" and status.get("object"):
        o = status["object"]
        out["object"] = {
            "describedObject": o.get("target"),
            "metric": _drop_none({"name": o.get("metricName"), "selector": o.get("selector")}),
            "current": _drop_none({"value": o.get("currentValue"), "averageValue": o.get("averageValue")}),
        }
    elif kind == "External" and status.get("external"):
        e = status["external"]
        out["external"] = {
            "metric": _drop_none({"name": e.get("metricName"), "selector": e.get("metricSelector")}),
            "current": _drop_none(
                {"value": e.get("currentValue"), "averageValue": e.get("currentAverageValue")}
            ),
        }
    return out


# -- whole objects -------------------------------------------------------------------------------------
def to_v1(hpa: Obj) -> Obj:
    spec, status = hpa.get("spec") or {}, hpa.get("status") or {}
    meta = copy.deepcopy(hpa.get("metadata") or {})
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in ROUND_TRIP}
    other = [metric_spec_to_v1(m) for m in spec.get("metrics") or [] if not _is_cpu_utilization(m)]
    if other:
        annotations[METRICS] = _dumps(other)
    if status.get("currentMetrics"):
        annotations[CURRENT_METRICS] = _dumps([metric_status_to_v1(m) for m in status["currentMetrics"]])
    if status.get("conditions"):
        annotations[CONDITIONS] = _dumps(status["conditions"])
    if spec.get("behavior") is not None:
        annotations[BEHAVIOR] = _dumps(spec["behavior"])
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    v1_spec: Obj = {
        k: copy.deepcopy(spec[k]) for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec
    }
    cpu = next(
        (
            m
            for m in spec.get("metrics") or []
            if m.get("type") == "Resource" and (m.get("resource") or {}).get("name") == "cpu"
        ),
        None,
    )
    if cpu is not None and (cpu["resource"].get("target") or {}).get("averageUtilization") is not None:
        v1_spec["targetCPUUtilizationPercentage"] = cpu["resource"]["target"]["averageUtilization"]
    out: Obj = {
        "kind": "HorizontalPodAutoscaler",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": v1_spec,
    }
    out["status"] = _status_to_v1(status)
    return out


def _status_to_v1(status: Obj) -> Obj:
    out: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime") if k in status}
    out["currentReplicas"] = status.get("currentReplicas", 0)  # required in v1 (no omitempty)
    out["desiredReplicas"] = status.get("desiredReplicas", 0)
    for metric in status.get("currentMetrics") or []:
        resource = metric.get("resource") or {}
        if metric.get("type") == "Resource" and resource.get("name") == "cpu":
            utilization = (resource.get("current") or {}).get("averageUtilization")
            if utilization is not None:
                out["currentCPUUtilizationPercentage"] = utilization
    return out


def _loads(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None


def to_v2(hpa: Obj) -> Obj:
    meta = copy.deepcopy(hpa.get("metadata") or {})
    annotations = dict(meta.get("annotations") or {})
    spec, status = hpa.get("spec") or {}, hpa.get("status") or {}
    v2_spec: Obj = {
        k: copy.deepcopy(spec[k]) for k in ("scaleTargetRef", "minReplicas", "maxReplicas") if k in spec
    }
    metrics = [metric_spec_to_v2(m) for m in _loads(annotations.get(METRICS)) or []]
    if spec.get("targetCPUUtilizationPercentage") is not None:
        metrics.append(_cpu_metric(spec["targetCPUUtilizationPercentage"]))
    v2_spec["metrics"] = metrics or [_cpu_metric(DEFAULT_CPU_UTILIZATION)]
    behavior = _loads(annotations.get(BEHAVIOR))
    if behavior is not None:
        v2_spec["behavior"] = behavior
    v2_status: Obj = {
        k: status[k]
        for k in ("observedGeneration", "lastScaleTime", "currentReplicas", "desiredReplicas")
        if k in status
    }
    current = _loads(annotations.get(CURRENT_METRICS))
    if current is not None:
        v2_status["currentMetrics"] = [metric_status_to_v2(m) for m in current]
    elif status.get("currentCPUUtilizationPercentage") is not None:
        v2_status["currentMetrics"] = [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "current": {"averageUtilization": status["currentCPUUtilizationPercentage"]},
                },
            }
        ]
    conditions = _loads(annotations.get(CONDITIONS))
    if conditions is not None:
        v2_status["conditions"] = conditions
    for key in ROUND_TRIP:
        annotations.pop(key, None)
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    out: Obj = {
        "kind": "HorizontalPodAutoscaler",
        "apiVersion": "autoscaling/v2",
        "metadata": meta,
        "spec": v2_spec,
    }
    if v2_status:
        out["status"] = v2_status
    return out


def _cpu_metric(utilization: int) -> Obj:
    return {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": utilization}},
    }


def convert(hpa: Obj, target: ResourceType) -> Obj:
    """The cluster's converter hook: ``hpa`` in either version, returned at ``target.version``."""
    source = hpa.get("apiVersion") or "autoscaling/v2"
    if source == target.api_version:
        return hpa
    return to_v1(hpa) if target.version == "v1" else to_v2(hpa)
