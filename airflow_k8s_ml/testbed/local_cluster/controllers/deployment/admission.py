"""Admission for apps/v1 Deployments and ReplicaSets: upstream defaulting and validation.

``SetDefaults_Deployment`` (replicas 1, RollingUpdate 25%/25%, revisionHistoryLimit 10,
progressDeadlineSeconds 600) and ``SetDefaults_ReplicaSet`` (replicas 1), pod-template defaults, then
``ValidateDeployment`` / ``ValidateReplicaSet`` with the apiserver's field paths and messages, so a client
that matches on ``selector` does not match template `labels`` sees exactly that text.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from airflow_k8s_ml.k8s.selectors import SelectorError, label_selector_from_match

from ... import errors
from ...kubelet.validation import validate_pod
from .template import apply_template_defaults

Obj = dict[str, Any]
Cause = tuple[str, str, str]

_PERCENT = re.compile(r"^[0-9]+%$")
_PERCENT_MSG = (
    "a valid percent string must be a numeric string followed by an ending '%' "
    "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')"
)
_STRATEGIES = ("Recreate", "RollingUpdate")


# -- Go-style value printing (field.Invalid uses %#v for composite values) ----------------------------
def go_string_map(value: Any) -> str:
    if not value:
        return "map[string]string(nil)" if value is None else "map[string]string{}"
    items = ", ".join(f'"{k}":"{v}"' for k, v in sorted(value.items()))
    return "map[string]string{" + items + "}"


def go_label_selector(selector: Obj | None) -> str:
    selector = selector or {}
    expressions = selector.get("matchExpressions")
    exprs = (
        "[]v1.LabelSelectorRequirement(nil)"
        if not expressions
        else (
            "[]v1.LabelSelectorRequirement{"
            + ", ".join(
                f'v1.LabelSelectorRequirement{{Key:"{e.get("key", "")}", Operator:"{e.get("operator", "")}", '
                f"Values:[]string{{{', '.join(chr(34) + str(v) + chr(34) for v in e.get('values') or [])}}}}}"
                for e in expressions
            )
            + "}"
        )
    )
    labels = go_string_map(selector.get("matchLabels"))
    return f"v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{exprs}}}"


def _go_value(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return "null" if value is None else str(value)


def _invalid(path: str, value: Any, detail: str, printed: str | None = None) -> Cause:
    return (
        path,
        "FieldValueInvalid",
        f"Invalid value: {printed if printed is not None else _go_value(value)}: {detail}",
    )


# -- defaults ------------------------------------------------------------------------------------------
def set_deployment_defaults(deployment: Obj) -> None:
    spec = deployment.setdefault("spec", {})
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    strategy = spec.get("strategy") or {}
    spec["strategy"] = strategy
    if not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy["type"] == "RollingUpdate":
        rolling = strategy.get("rollingUpdate") or {}
        strategy["rollingUpdate"] = rolling
        if rolling.get("maxUnavailable") is None:
            rolling["maxUnavailable"] = "25%"
        if rolling.get("maxSurge") is None:
            rolling["maxSurge"] = "25%"
    if spec.get("revisionHistoryLimit") is None:
        spec["revisionHistoryLimit"] = 10
    if spec.get("progressDeadlineSeconds") is None:
        spec["progressDeadlineSeconds"] = 600
    if isinstance(spec.get("template"), dict):
        apply_template_defaults(spec["template"])


def set_replicaset_defaults(replicaset: Obj) -> None:
    spec = replicaset.setdefault("spec", {})
    if spec.get("replicas") is None:
        spec["replicas"] = 1
    if isinstance(spec.get("template"), dict):
        apply_template_defaults(spec["template"])


# -- validation ----------------------------------------------------------------------------------------
def _non_negative(spec: Obj, name: str, causes: list[Cause]) -> None:
    value = spec.get(name)
    if isinstance(value, int) and value < 0:
        causes.append(_invalid(f"spec.{name}", value, "must be greater than or equal to 0"))


def validate_selector_and_template(spec: Obj) -> list[Cause]:
    """What ``ValidateReplicaSetSpec`` and ``ValidateDeploymentSpec`` share: selector, labels, pod spec."""
    causes: list[Cause] = []
    selector = spec.get("selector")
    template = spec.get("template")
    if selector is None:
        causes.append(("spec.selector", "FieldValueRequired", "Required value"))
    elif not (selector.get("matchLabels") or selector.get("matchExpressions")):
        causes.append(
            _invalid(
                "spec.selector",
                selector,
                "empty selector is invalid for deployment",
                go_label_selector(selector),
            )
        )
    if not isinstance(template, dict):
        causes.append(("spec.template", "FieldValueRequired", "Required value"))
        return causes
    labels = (template.get("metadata") or {}).get("labels") or {}
    if selector:
        try:
            parsed = label_selector_from_match(selector)
        except SelectorError as exc:
            causes.append(_invalid("spec.selector", selector, str(exc), go_label_selector(selector)))
        else:
            if not parsed.empty and not parsed.matches(labels):
                causes.append(
                    _invalid(
                        "spec.template.metadata.labels",
                        labels,
                        "`selector` does not match template `labels`",
                        go_string_map(labels),
                    )
                )
    causes.extend(_template_causes(template))
    return causes


def _template_causes(template: Obj) -> list[Cause]:
    """``ValidatePodTemplateSpecForReplicaSet``: a valid pod spec that restarts Always, no deadline."""
    causes = [
        (f"spec.template.{path}", reason, message)
        for path, reason, message in validate_pod({"spec": template.get("spec") or {}})
        if not path.startswith("spec.restartPolicy")
    ]
    spec = template.get("spec") or {}
    policy = spec.get("restartPolicy")
    if policy != "Always":
        causes.append(
            (
                "spec.template.spec.restartPolicy",
                "FieldValueNotSupported",
                f'Unsupported value: "{policy or ""}": supported values: "Always"',
            )
        )
    if spec.get("activeDeadlineSeconds") is not None:
        causes.append(
            (
                "spec.template.spec.activeDeadlineSeconds",
                "FieldValueForbidden",
                "Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported",
            )
        )
    return causes


def _int_or_percent(value: Any, path: str, causes: list[Cause]) -> int | None:
    """``ValidatePositiveIntOrPercent``; returns the number (percent or int) or None when invalid."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        if value < 0:
            causes.append(_invalid(path, value, "must be greater than or equal to 0"))
            return None
        return value
    if not _PERCENT.match(str(value)):
        causes.append(_invalid(path, str(value), _PERCENT_MSG))
        return None
    return int(str(value)[:-1])


def _validate_strategy(spec: Obj, causes: list[Cause]) -> None:
    strategy = spec.get("strategy") or {}
    kind = strategy.get("type")
    if kind not in _STRATEGIES:
        causes.append(
            (
                "spec.strategy.type",
                "FieldValueNotSupported",
                f'Unsupported value: "{kind}": supported values: "Recreate", "RollingUpdate"',
            )
        )
        return
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate":
        if rolling is not None:
            causes.append(
                (
                    "spec.strategy.rollingUpdate",
                    "FieldValueForbidden",
                    "Forbidden: may not be specified when strategy `type` is 'Recreate'",
                )
            )
        return
    rolling = rolling or {}
    path = "spec.strategy.rollingUpdate"
    unavailable = _int_or_percent(rolling.get("maxUnavailable"), f"{path}.maxUnavailable", causes)
    surge = _int_or_percent(rolling.get("maxSurge"), f"{path}.maxSurge", causes)
    if unavailable == 0 and surge == 0:
        causes.append(
            _invalid(
                f"{path}.maxUnavailable", rolling.get("maxUnavailable"), "may not be 0 when `maxSurge` is 0"
            )
        )
    if isinstance(rolling.get("maxUnavailable"), str) and unavailable is not None and unavailable > 100:
        causes.append(
            _invalid(f"{path}.maxUnavailable", rolling["maxUnavailable"], "must not be greater than 100%")
        )


def validate_deployment(deployment: Obj) -> list[Cause]:
    spec = deployment.get("spec") or {}
    causes: list[Cause] = []
    for name in ("replicas", "minReadySeconds", "revisionHistoryLimit", "progressDeadlineSeconds"):
        _non_negative(spec, name, causes)
    causes.extend(validate_selector_and_template(spec))
    _validate_strategy(spec, causes)
    deadline, min_ready = spec.get("progressDeadlineSeconds"), spec.get("minReadySeconds") or 0
    if isinstance(deadline, int) and deadline >= 0 and deadline <= min_ready:
        causes.append(
            _invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds")
        )
    return causes


def validate_replicaset(replicaset: Obj) -> list[Cause]:
    spec = replicaset.get("spec") or {}
    causes: list[Cause] = []
    for name in ("replicas", "minReadySeconds"):
        _non_negative(spec, name, causes)
    causes.extend(validate_selector_and_template(spec))
    return causes


def validate_selector_update(new: Obj, old: Obj) -> list[Cause]:
    """apps/v1 selectors are immutable (``ValidateImmutableField``)."""
    selector = (new.get("spec") or {}).get("selector")
    if selector != (old.get("spec") or {}).get("selector"):
        return [_invalid("spec.selector", selector, "field is immutable", go_label_selector(selector))]
    return []


# -- admission hooks -----------------------------------------------------------------------------------
def admit_deployment(obj: Obj, old: Obj | None) -> Obj:
    deployment = copy.deepcopy(obj)
    set_deployment_defaults(deployment)
    causes = validate_deployment(deployment)
    if old is not None:
        causes += validate_selector_update(deployment, old)
    if causes:
        name = (deployment.get("metadata") or {}).get("name", "")
        raise errors.invalid("Deployment", "apps", "deployments", name, causes)
    return deployment


def admit_replicaset(obj: Obj, old: Obj | None) -> Obj:
    replicaset = copy.deepcopy(obj)
    set_replicaset_defaults(replicaset)
    causes = validate_replicaset(replicaset)
    if old is not None:
        causes += validate_selector_update(replicaset, old)
    if causes:
        name = (replicaset.get("metadata") or {}).get("name", "")
        raise errors.invalid("ReplicaSet", "apps", "replicasets", name, causes)
    return replicaset
