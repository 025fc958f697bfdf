"""Validation of batch/v1 Jobs with the field paths and messages of pkg/apis/batch/validation.

Clients (kubectl, the Python clients, Airflow) show these 422 messages verbatim and tests match on them,
so each rule returns upstream's ``(field, reason, message)`` triple. Values are rendered the way Go's
``field.Error`` renders them (``%v`` for numbers, ``%q`` for strings, ``%#v`` for maps and slices).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_k8s_ml.k8s.selectors import SelectorError, label_selector_from_match

Cause = tuple[str, str, str]  # (field, reason, message) as errors.invalid expects

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"

MAX_INDEXED = 100_000  # maxParallelismForIndexedJob / maxCompletionsForIndexedJob
MAX_POD_FAILURE_POLICY_RULES = 20
MAX_EXIT_CODE_VALUES = 255
POD_FAILURE_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
EXIT_CODE_OPERATORS = ("In", "NotIn")


# -- rendering like k8s.io/apimachinery/pkg/util/validation/field ----------------------------------------
def go_value(value: Any) -> str:
    """``field.Error.ErrorBody`` rendering of a bad value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return go_string_map(value)
    return repr(value)


def go_int32_slice(values: Sequence[int]) -> str:
    """``%#v`` of a ``[]int32``."""
    return "[]int32{" + ", ".join(str(v) for v in values) + "}"


def go_quoted_list(values: Sequence[str]) -> str:
    """``%q`` of a ``[]string``: ``["a" "b"]``."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def go_string_map(value: Mapping[str, Any] | None) -> str:
    """``%#v`` of a ``map[string]string`` (keys sorted, as fmt prints maps)."""
    if value is None:
        return "map[string]string(nil)"
    items = ", ".join(f"{json.dumps(k)}:{json.dumps(str(v))}" for k, v in sorted(value.items()))
    return "map[string]string{" + items + "}"


def go_label_selector(selector: Mapping[str, Any] | None) -> str:
    """``%#v`` of a ``v1.LabelSelector`` (what upstream prints for selector errors)."""
    selector = selector or {}
    expressions = selector.get("matchExpressions")
    rendered = (
        "[]v1.LabelSelectorRequirement(nil)"
        if not expressions
        else (
            "[]v1.LabelSelectorRequirement{"
            + ", ".join(
                f"v1.LabelSelectorRequirement{{Key:{json.dumps(e.get('key', ''))}, "
                f"Operator:{json.dumps(e.get('operator', ''))}, Values:[]string{{"
                + ", ".join(json.dumps(v) for v in e.get("values") or [])
                + "}}"
                for e in expressions
            )
            + "}"
        )
    )
    match_labels = go_string_map(selector.get("matchLabels"))
    return f"v1.LabelSelector{{MatchLabels:{match_labels}, MatchExpressions:{rendered}}}"


def invalid(path: str, value: str, detail: str) -> Cause:
    return (path, "FieldValueInvalid", f"Invalid value: {value}: {detail}")


def invalid_omitted(path: str, detail: str) -> Cause:
    return (path, "FieldValueInvalid", f"Invalid value: {detail}")


def required(path: str, detail: str = "") -> Cause:
    return (path, "FieldValueRequired", "Required value" + (f": {detail}" if detail else ""))


def not_supported(path: str, value: Any, supported: Sequence[str]) -> Cause:
    choices = ", ".join(json.dumps(s) for s in supported)
    return (
        path,
        "FieldValueNotSupported",
        f"Unsupported value: {go_value(value)}: supported values: {choices}",
    )


def duplicate(path: str, value: Any) -> Cause:
    return (path, "FieldValueDuplicate", f"Duplicate value: {go_value(value)}")


def too_many(path: str, actual: int, limit: int) -> Cause:
    return (path, "FieldValueTooMany", f"Too many: {actual}: must have at most {limit} items")


def immutable(path: str, value: str) -> Cause:
    return invalid(path, value, "field is immutable")


def nonnegative(path: str, value: Any) -> list[Cause]:
    if isinstance(value, int) and value < 0:
        return [invalid(path, str(value), "must be greater than or equal to 0")]
    return []


# -- ValidateJob ---------------------------------------------------------------------------------------
def validate_job(job: Mapping[str, Any]) -> list[Cause]:
    """Every rule upstream's ``ValidateJob`` applies on create (and, with the update rules, on update)."""
    spec = job.get("spec") or {}
    return validate_generated_selector(job) + validate_job_spec(spec)


def validate_generated_selector(job: Mapping[str, Any]) -> list[Cause]:
    """With a generated selector, the template must carry this Job's uid/name labels and the selector
    must select exactly them (protects against a copied ``controller-uid`` from another Job)."""
    spec = job.get("spec") or {}
    if spec.get("manualSelector") or spec.get("selector") is None:
        return []
    meta = job.get("metadata") or {}
    uid, name = meta.get("uid", ""), meta.get("name", "")
    labels = (spec.get("template") or {}).get("metadata", {}).get("labels") or {}
    causes: list[Cause] = [] if uid else [required("metadata.uid")]
    expected = {
        LEGACY_CONTROLLER_UID_LABEL: uid,
        LEGACY_JOB_NAME_LABEL: name,
        CONTROLLER_UID_LABEL: uid,
        JOB_NAME_LABEL: name,
    }
    for key, value in expected.items():
        path = f"spec.template.metadata.labels[{key}]"
        if key not in labels:
            causes.append(required(path, value))
        elif labels[key] != value:
            causes.append(invalid(path, go_string_map(labels), f"must be '{value}'"))
    try:
        matches = label_selector_from_match(spec["selector"]).matches(expected)
    except SelectorError:
        return causes  # reported by validate_job_spec
    if not matches:
        causes.append(
            invalid("spec.selector", go_label_selector(spec["selector"]), "`selector` not auto-generated")
        )
    return causes


def validate_job_spec(spec: Mapping[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for field in (
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
    ):
        causes += nonnegative(f"spec.{field}", spec.get(field))
    causes += _validate_completion_mode(spec)
    if spec.get("podFailurePolicy") is not None:
        causes += validate_pod_failure_policy(spec)
    causes += _validate_pod_replacement_policy(spec)
    causes += _validate_template(spec)
    causes += _validate_selector(spec)
    return causes


def _validate_completion_mode(spec: Mapping[str, Any]) -> list[Cause]:
    mode = spec.get("completionMode")
    if mode is None:
        return []
    if mode not in ("NonIndexed", "Indexed"):
        return [not_supported("spec.completionMode", mode, ["NonIndexed", "Indexed"])]
    if mode != "Indexed":
        return []
    causes: list[Cause] = []
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    if completions is None:
        causes.append(required("spec.completions", "when completion mode is Indexed"))
    if isinstance(parallelism, int) and parallelism > MAX_INDEXED:
        causes.append(
            invalid(
                "spec.parallelism",
                str(parallelism),
                f"must be less than or equal to {MAX_INDEXED} when completion mode is Indexed",
            )
        )
    if isinstance(completions, int) and completions > MAX_INDEXED:
        causes.append(
            invalid(
                "spec.completions",
                str(completions),
                f"must be less than or equal to {MAX_INDEXED} when completion mode is Indexed",
            )
        )
    return causes


def _validate_pod_replacement_policy(spec: Mapping[str, Any]) -> list[Cause]:
    policy = spec.get("podReplacementPolicy")
    if policy is None:
        return []
    if spec.get("podFailurePolicy") is not None:
        return [] if policy == "Failed" else [not_supported("spec.podReplacementPolicy", policy, ["Failed"])]
    if policy not in ("Failed", "TerminatingOrFailed"):
        return [not_supported("spec.podReplacementPolicy", policy, ["Failed", "TerminatingOrFailed"])]
    return []


def _validate_template(spec: Mapping[str, Any]) -> list[Cause]:
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    causes: list[Cause] = []
    if not pod_spec.get("containers"):
        causes.append(required("spec.template.spec.containers"))
    # Pod defaulting gives a template without restartPolicy "Always", which a Job rejects.
    policy = pod_spec.get("restartPolicy") or "Always"
    if policy not in ("OnFailure", "Never"):
        causes.append(not_supported("spec.template.spec.restartPolicy", policy, ["OnFailure", "Never"]))
    elif spec.get("podFailurePolicy") is not None and policy != "Never":
        causes.append(
            invalid(
                "spec.template.spec.restartPolicy",
                go_value(policy),
                'only "Never" is supported when podFailurePolicy is specified',
            )
        )
    return causes


def _validate_selector(spec: Mapping[str, Any]) -> list[Cause]:
    selector = spec.get("selector")
    if selector is None:
        return [required("spec.selector")]
    try:
        parsed = label_selector_from_match(selector)
    except SelectorError as exc:
        return [invalid("spec.selector", go_label_selector(selector), str(exc))]
    labels = (spec.get("template") or {}).get("metadata", {}).get("labels") or {}
    if not parsed.matches(labels):
        return [
            invalid(
                "spec.template.metadata.labels",
                go_string_map(labels or None),
                "`selector` does not match template `labels`",
            )
        ]
    return []


# -- podFailurePolicy ----------------------------------------------------------------------------------
def validate_pod_failure_policy(spec: Mapping[str, Any]) -> list[Cause]:
    rules = (spec.get("podFailurePolicy") or {}).get("rules") or []
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    names = {
        c.get("name") for c in (pod_spec.get("containers") or []) + (pod_spec.get("initContainers") or [])
    }
    causes: list[Cause] = []
    if len(rules) > MAX_POD_FAILURE_POLICY_RULES:
        causes.append(too_many("spec.podFailurePolicy.rules", len(rules), MAX_POD_FAILURE_POLICY_RULES))
    for i, rule in enumerate(rules):
        causes += _validate_rule(spec, rule, f"spec.podFailurePolicy.rules[{i}]", names)
    return causes


def _validate_rule(
    spec: Mapping[str, Any], rule: Mapping[str, Any], path: str, names: set[Any]
) -> list[Cause]:
    causes: list[Cause] = []
    action = rule.get("action") or ""
    if not action:
        causes.append(required(f"{path}.action", f"valid values: {go_quoted_list(POD_FAILURE_ACTIONS)}"))
    elif action == "FailIndex":
        if spec.get("backoffLimitPerIndex") is None:
            causes.append(
                invalid(f"{path}.action", go_value(action), "requires the backoffLimitPerIndex to be set")
            )
    elif action not in POD_FAILURE_ACTIONS:
        causes.append(not_supported(f"{path}.action", action, POD_FAILURE_ACTIONS))
    on_exit, on_conditions = rule.get("onExitCodes"), rule.get("onPodConditions") or []
    if on_exit is not None:
        causes += _validate_on_exit_codes(on_exit, f"{path}.onExitCodes", names)
    for j, pattern in enumerate(on_conditions):
        status = pattern.get("status") or "True"
        if status not in ("True", "False", "Unknown"):
            causes.append(
                not_supported(f"{path}.onPodConditions[{j}].status", status, ["False", "True", "Unknown"])
            )
        if not pattern.get("type"):
            causes.append(required(f"{path}.onPodConditions[{j}].type"))
    if on_exit is not None and on_conditions:
        causes.append(
            invalid_omitted(path, "specifying both OnExitCodes and OnPodConditions is not supported")
        )
    if on_exit is None and not on_conditions:
        causes.append(invalid_omitted(path, "specifying one of OnExitCodes and OnPodConditions is required"))
    return causes


def _validate_on_exit_codes(req: Mapping[str, Any], path: str, names: set[Any]) -> list[Cause]:
    causes: list[Cause] = []
    operator = req.get("operator") or ""
    if not operator:
        causes.append(required(f"{path}.operator", f"valid values: {go_quoted_list(EXIT_CODE_OPERATORS)}"))
    elif operator not in EXIT_CODE_OPERATORS:
        causes.append(not_supported(f"{path}.operator", operator, EXIT_CODE_OPERATORS))
    container = req.get("containerName")
    if container is not None and container not in names:
        causes.append(
            invalid(
                f"{path}.containerName",
                go_value(container),
                "must be one of the container or initContainer names in the pod template",
            )
        )
    values = list(req.get("values") or [])
    if not values:
        causes.append(invalid(f"{path}.values", "[]int32(nil)", "at least one value is required"))
    elif len(values) > MAX_EXIT_CODE_VALUES:
        causes.append(too_many(f"{path}.values", len(values), MAX_EXIT_CODE_VALUES))
    seen: set[int] = set()
    for j, value in enumerate(values):
        if operator == "In" and value == 0:
            causes.append(invalid(f"{path}.values[{j}]", "0", "must not be 0 for the In operator"))
        if value in seen:
            causes.append(duplicate(f"{path}.values[{j}]", value))
        seen.add(value)
    if values != sorted(values):
        causes.append(invalid(f"{path}.values", go_int32_slice(values), "must be ordered"))
    return causes


# -- ValidateJobUpdate ---------------------------------------------------------------------------------
_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")


def validate_job_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[Cause]:
    """Fields fixed after creation. The pod template may change only in its scheduling directives
    (labels, annotations, nodeSelector, tolerations, schedulingGates, node affinity), and only while the
    Job is suspended and has never started (upstream's mutable scheduling directives)."""
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    causes: list[Cause] = []
    if spec.get("completions") != old_spec.get("completions") and not _elastic_indexed(spec, old_spec):
        causes.append(immutable("spec.completions", go_value(spec.get("completions"))))
    if spec.get("selector") != old_spec.get("selector"):
        causes.append(immutable("spec.selector", go_label_selector(spec.get("selector"))))
    if _template_for_check(spec, old) != _template_for_check(old_spec, old, reference=spec):
        causes.append(immutable("spec.template", "core.PodTemplateSpec{...}"))
    for field in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"):
        if spec.get(field) != old_spec.get(field):
            causes.append(immutable(f"spec.{field}", _render_field(spec.get(field))))
    return causes


def _render_field(value: Any) -> str:
    if value is None or isinstance(value, (str, int, bool)):
        return go_value(value)
    return "{...}"


def _elastic_indexed(spec: Mapping[str, Any], old_spec: Mapping[str, Any]) -> bool:
    """Indexed Jobs may scale completions together with parallelism (ElasticIndexedJob, GA in 1.31)."""
    return (
        spec.get("completionMode") == "Indexed"
        and old_spec.get("completionMode") == "Indexed"
        and spec.get("completions") == spec.get("parallelism")
        and spec.get("completions") is not None
    )


def _template_for_check(
    spec: Mapping[str, Any], old_job: Mapping[str, Any], reference: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The template to compare; for the old side of a suspended, never-started Job the mutable scheduling
    directives are copied from the new template so that changing them is not a difference."""
    template = json.loads(json.dumps(spec.get("template") or {}))
    old_spec = old_job.get("spec") or {}
    mutable = bool(old_spec.get("suspend")) and not (old_job.get("status") or {}).get("startTime")
    if reference is None or not mutable:
        return template
    new_template = reference.get("template") or {}
    meta = template.setdefault("metadata", {})
    new_meta = new_template.get("metadata") or {}
    for key in ("labels", "annotations"):
        _copy_key(new_meta, meta, key)
    pod_spec = template.setdefault("spec", {})
    new_pod_spec = new_template.get("spec") or {}
    for key in _SCHEDULING_DIRECTIVES:
        _copy_key(new_pod_spec, pod_spec, key)
    _merge_node_affinity(pod_spec, new_pod_spec.get("affinity"))
    return template


def _merge_node_affinity(pod_spec: dict[str, Any], new_affinity: Mapping[str, Any] | None) -> None:
    """Only ``affinity.nodeAffinity`` is a scheduling directive; pod (anti-)affinity stays immutable."""
    old_affinity = dict(pod_spec.get("affinity") or {})
    if new_affinity is None:
        old_affinity.pop("nodeAffinity", None)
    else:
        _copy_key(new_affinity, old_affinity, "nodeAffinity")
    if old_affinity or new_affinity is not None:
        pod_spec["affinity"] = old_affinity
    else:
        pod_spec.pop("affinity", None)


def _copy_key(src: Mapping[str, Any], dst: dict[str, Any], key: str) -> None:
    if key in src:
        dst[key] = src[key]
    else:
        dst.pop(key, None)
