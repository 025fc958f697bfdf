"""Admission for HorizontalPodAutoscalers (on the autoscaling/v2 storage form).

``SetDefaults_HorizontalPodAutoscaler`` (minReplicas 1, an 80% CPU metric when none is given, behavior
rules filled in only when a behavior is given) and the core of ``ValidateHorizontalPodAutoscaler``.
"""

from __future__ import annotations

import copy
from typing import Any

from ... import errors

Obj = dict[str, Any]
Cause = tuple[str, str, str]

_METRIC_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")


def default_scale_up() -> Obj:
    return {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ],
    }


def default_scale_down() -> Obj:
    # stabilizationWindowSeconds stays unset: the controller applies its --horizontal-pod-autoscaler-
    # downscale-stabilization flag (5 minutes) at sync time, as upstream.
    return {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}


def _rules(given: Obj | None, defaults: Obj) -> Obj:
    if given is None:
        return defaults
    result = dict(defaults)
    for key in ("selectPolicy", "stabilizationWindowSeconds", "policies", "tolerance"):
        if given.get(key) is not None:
            result[key] = given[key]
    return result


def set_defaults(hpa: Obj) -> None:
    spec = hpa.setdefault("spec", {})
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
            }
        ]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = _rules(behavior.get("scaleUp"), default_scale_up())
        behavior["scaleDown"] = _rules(behavior.get("scaleDown"), default_scale_down())


def validate(hpa: Obj) -> list[Cause]:
    spec = hpa.get("spec") or {}
    causes: list[Cause] = []
    minimum, maximum = spec.get("minReplicas"), spec.get("maxReplicas")
    if isinstance(minimum, int) and minimum < 1:
        causes.append(
            (
                "spec.minReplicas",
                "FieldValueInvalid",
                f"Invalid value: {minimum}: must be greater than or equal to 1",
            )
        )
    if not isinstance(maximum, int) or maximum < 1:
        causes.append(
            (
                "spec.maxReplicas",
                "FieldValueInvalid",
                f"Invalid value: {maximum or 0}: must be greater than 0",
            )
        )
    elif isinstance(minimum, int) and maximum < minimum:
        causes.append(
            (
                "spec.maxReplicas",
                "FieldValueInvalid",
                f"Invalid value: {maximum}: must be greater than or equal to `minReplicas`",
            )
        )
    ref = spec.get("scaleTargetRef") or {}
    for name in ("kind", "name"):
        if not ref.get(name):
            causes.append((f"spec.scaleTargetRef.{name}", "FieldValueRequired", "Required value"))
    for i, metric in enumerate(spec.get("metrics") or []):
        kind = metric.get("type")
        if kind not in _METRIC_TYPES:
            causes.append(
                (
                    f"spec.metrics[{i}].type",
                    "FieldValueNotSupported",
                    f'Unsupported value: "{kind}": '
                    "supported values: " + ", ".join(f'"{t}"' for t in _METRIC_TYPES),
                )
            )
    return causes


def admit_hpa(obj: Obj, old: Obj | None) -> Obj:
    hpa = copy.deepcopy(obj)
    set_defaults(hpa)
    causes = validate(hpa)
    if causes:
        name = (hpa.get("metadata") or {}).get("name", "")
        raise errors.invalid(
            "HorizontalPodAutoscaler", "autoscaling", "horizontalpodautoscalers", name, causes
        )
    if old is None:
        hpa["status"] = {
            "desiredReplicas": 0
        }  # PrepareForCreate's empty status: desiredReplicas has no omitempty
    return hpa
