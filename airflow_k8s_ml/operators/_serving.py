"""Pure helpers shared by the serving operators: run identity from the Airflow context, argument coercion.

Why the run labels here omit the attempt: Deployments, Services and CronJobs are long-lived objects that every
run re-applies. Labelling them with the try number would make a plain task retry look like a change
("configured") when nothing about the serving state differs. A run-now Job *is* a per-attempt workload and
gets :meth:`RunKey.labels` (with the attempt) from its operator instead.

Why two paths from the arguments: :func:`check_inference_args` / :func:`check_cronjob_args` judge the
arguments with the rule functions alone (``manifests/*_rules.py``), building nothing, because the operators
run them in ``__init__`` on every DAG parse; :func:`inference_spec` / :func:`batch_spec` build the typed
specs in ``execute``. Both read the arguments through the same helpers, and the specs apply the same rules in
``__post_init__``, so the two cannot disagree. The spec modules are imported on use only.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.manifests.pod_fields import operator_arguments, option_fields
from airflow_k8s_ml.manifests.pod_rules import check_injected_env, check_pod_fields
from airflow_k8s_ml.manifests.serving_rules import (
    AUTOSCALING_DEFAULTS,
    INGRESS_DEFAULTS,
    check_autoscaling_fields,
    check_inference_fields,
    check_ingress_fields,
    check_server_name,
)
from airflow_k8s_ml.manifests.validation import fail, renamed_fields
from airflow_k8s_ml.operators._args import argument_names

if TYPE_CHECKING:
    from airflow_k8s_ml.manifests.batch import BatchInferenceSpec
    from airflow_k8s_ml.manifests.naming import RunKey
    from airflow_k8s_ml.manifests.pod import PodTemplate
    from airflow_k8s_ml.manifests.serving import InferenceSpec

__all__ = [
    "CRONJOB_ARGUMENTS",
    "DEPLOYMENT_OPTIONS",
    "POD_ARGUMENTS",
    "batch_spec",
    "check_cronjob_args",
    "check_inference_args",
    "inference_spec",
    "json_merge",
    "object_labels",
    "pod_template",
    "render_inference",
    "resolve_model_uri",
    "run_key",
]


def run_key(context: Mapping[str, Any]) -> RunKey:
    """The task instance of this execution (``context["ti"]``); ``attempt`` is Airflow's try number."""
    from airflow_k8s_ml.manifests.naming import RunKey

    ti = context.get("ti") or context.get("task_instance")
    if ti is None:
        raise fail("context", "needs 'ti' (the running task instance) to label objects with the DAG run")
    map_index = getattr(ti, "map_index", -1)
    return RunKey(
        dag_id=ti.dag_id,
        task_id=ti.task_id,
        run_id=ti.run_id,
        map_index=-1 if map_index is None else int(map_index),
        attempt=max(1, int(getattr(ti, "try_number", 1) or 1)),
    )


def object_labels(key: RunKey) -> tuple[dict[str, str], dict[str, str]]:
    """(labels, annotations) for a long-lived object: the task instance, without the attempt."""
    from airflow_k8s_ml.manifests.naming import ATTEMPT_LABEL

    annotations = key.annotations()
    annotations.pop(ATTEMPT_LABEL, None)
    return key.task_instance_labels(), annotations


def resolve_model_uri(value: Any, field_name: str = "model_uri") -> str:
    """A URI string, or the checkpoint gate's XCom ``{"uri", "step", ...}`` (its ``uri``)."""
    if isinstance(value, Mapping):
        value = value.get("uri")
    if not isinstance(value, str) or not value.strip():
        raise fail(field_name, f"must be a URI or the checkpoint gate's XCom with a 'uri', got {value!r}")
    return value


def json_merge(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch (``None`` deletes a key, lists are replaced): the raw-manifest escape hatch.

    Used for ``deployment_overrides``: anything the typed arguments do not cover (a sidecar, topology spread
    constraints) is merged into the rendered Deployment before it is applied.
    """
    out = copy.deepcopy(dict(target))
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = json_merge(out[key], value)
        elif isinstance(value, Mapping):
            out[key] = json_merge({}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# --- typed specs from operator arguments -----------------------------------------------------------------

POD_IP_ENV = "POD_IP"
#: The pod arguments the serving operators take at the top level (named as on the training operators; the
#: fields marked ``serving`` in :data:`~airflow_k8s_ml.manifests.pod_fields.POD_FIELDS`); the other
#: PodTemplate fields go in ``pod_options``.
POD_ARGUMENTS: Mapping[str, str] = operator_arguments(serving=True)
#: InferenceSpec fields reachable through ``deployment_options`` (rollout tuning, rarely changed).
DEPLOYMENT_OPTIONS = (
    "max_surge",
    "max_unavailable",
    "min_ready_seconds",
    "revision_history_limit",
    "probe_period_seconds",
    "progress_deadline_seconds",
    "startup_timeout_seconds",
)


#: InferenceSpec field -> where the user wrote it.
_OPTION_ARGUMENTS = {name: f"deployment_options.{name}" for name in DEPLOYMENT_OPTIONS}


def _options(value: Any, allowed: tuple[str, ...], field_name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(field_name, f"must be a mapping, got {type(value).__name__}")
    for key in value:
        if key not in allowed:
            raise fail(f"{field_name}.{key}", f"unknown option; expected one of {', '.join(sorted(allowed))}")
    return dict(value)


def _pod_arguments(values: Mapping[str, Any], *, pod_ip_env: bool) -> dict[str, Any]:
    """PodTemplate arguments from the top-level pod arguments plus ``pod_options`` (any other field).

    ``pod_ip_env`` adds ``POD_IP`` from the downward API (``status.podIP``) unless the user sets it: a
    server must bind the pod's address to be reachable by probes and the Service, and Kubernetes only
    provides it that way (``workloads.serve`` binds ``POD_IP``).
    """
    options = _options(values.get("pod_options"), option_fields(POD_ARGUMENTS), "pod_options")
    given = {field: values[arg] for arg, field in POD_ARGUMENTS.items() if values.get(arg) is not None}
    if pod_ip_env:
        field_env = dict(options.get("field_env") or {})
        user_vars = {*(given.get("env") or {}), *(given.get("secret_env") or {}), *field_env}
        user_vars |= set(options.get("config_map_env") or {})
        if POD_IP_ENV not in user_vars:
            options["field_env"] = {POD_IP_ENV: "status.podIP", **field_env}
    return {**given, **options}


def pod_template(values: Mapping[str, Any], *, pod_ip_env: bool = False) -> PodTemplate:
    """The pod from the top-level pod arguments plus ``pod_options`` (see :func:`_pod_arguments`)."""
    from airflow_k8s_ml.manifests.pod import PodTemplate

    with argument_names():
        return PodTemplate(**_pod_arguments(values, pod_ip_env=pod_ip_env))


def _check_pod(
    values: Mapping[str, Any], *, pod_ip_env: bool, injected_env: Mapping[str, str]
) -> dict[str, Any]:
    """The pod's arguments by the pod rules (building nothing); a variable we inject may not be set."""
    with argument_names():
        pod = check_pod_fields(_pod_arguments(values, pod_ip_env=pod_ip_env))
        check_injected_env(pod, injected_env)
    return pod


def _checked(
    value: Any,
    check: Callable[[Mapping[str, Any]], dict[str, Any]],
    kind: tuple[str, tuple[str, ...]],
    field_name: str,
) -> dict[str, Any] | None:
    """``None``, or the checked fields of a typed value (``kind``: class name and fields) or of a mapping
    of its fields (DAG-file friendly, serialisable)."""
    if value is None:
        return None
    name, fields = kind
    if type(value).__name__ == name:
        value = {field: getattr(value, field) for field in fields}
    if not isinstance(value, Mapping):
        raise fail(field_name, f"must be a {name} or a mapping, got {type(value).__name__}")
    return check(value)


_AUTOSCALING = ("Autoscaling", ("max_replicas", *AUTOSCALING_DEFAULTS))
_INGRESS_POLICY = ("IngressPolicy", tuple(INGRESS_DEFAULTS))


def _autoscaling(values: Mapping[str, Any]) -> dict[str, Any] | None:
    return _checked(values.get("autoscaling"), check_autoscaling_fields, _AUTOSCALING, "autoscaling")


def _network_policy(values: Mapping[str, Any]) -> dict[str, Any] | None:
    return _checked(values.get("network_policy"), check_ingress_fields, _INGRESS_POLICY, "network_policy")


def _server_fields(values: Mapping[str, Any], model_uri: str) -> dict[str, Any]:
    """The InferenceSpec fields besides pod, autoscaling and network policy, as the operator gives them."""
    options = _options(values.get("deployment_options"), DEPLOYMENT_OPTIONS, "deployment_options")
    return {
        "model_uri": model_uri,
        "replicas": values.get("replicas"),
        "port": values.get("port", 8080),
        "service_port": values.get("service_port", 80),
        "readiness_path": values.get("readiness_path", "/readyz"),
        "liveness_path": values.get("liveness_path"),
        "pdb_min_available": values.get("pdb_min_available"),
        "labels": values.get("labels") or {},
        "annotations": values.get("annotations") or {},
        **options,
    }


def _server_env(model_uri: str, values: Mapping[str, Any]) -> dict[str, str]:
    """What the model server's container gets from the operator (and the user may not set)."""
    return {"MODEL_URI": model_uri, "PORT": str(values.get("port", 8080))}


def check_inference_args(values: Mapping[str, Any]) -> None:
    """Every argument of ``InferenceDeploymentOperator`` by the rule functions, building nothing: what
    ``__init__`` runs on every DAG parse (templated values arrive as placeholders)."""
    check_server_name(values["name"])
    model_uri = resolve_model_uri(values.get("model_uri"))
    pod = _check_pod(values, pod_ip_env=True, injected_env=_server_env(model_uri, values))
    autoscaling = _autoscaling(values)
    _network_policy(values)
    with renamed_fields(_OPTION_ARGUMENTS):  # the user wrote deployment_options={"max_surge": ...}
        check_inference_fields(
            _server_fields(values, model_uri), requests=pod["requests"], autoscaling=autoscaling
        )


def inference_spec(values: Mapping[str, Any]) -> InferenceSpec:
    """The InferenceSpec from the operator's (rendered) arguments; ``ValidationError`` names the field."""
    from airflow_k8s_ml.manifests.serving import Autoscaling, InferenceSpec, IngressPolicy

    pod = pod_template(values, pod_ip_env=True)
    model_uri = resolve_model_uri(values.get("model_uri"))
    fields = _server_fields(values, model_uri)
    autoscaling, policy = _autoscaling(values), _network_policy(values)
    with renamed_fields(_OPTION_ARGUMENTS):
        return InferenceSpec(
            pod=pod,
            autoscaling=None if autoscaling is None else Autoscaling(**autoscaling),
            network_policy=None if policy is None else IngressPolicy(**policy),
            **fields,
        )


def render_inference(
    spec: InferenceSpec, name: str, namespace: str, key: RunKey, overrides: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Every serving object in apply order, labelled with the run; ``overrides`` merged into the
    Deployment (identity and selector may not change: the Service and PDB depend on them)."""
    from airflow_k8s_ml.manifests.serving import build_inference_objects

    labels, annotations = object_labels(key)
    objects = build_inference_objects(spec, name, namespace, labels, annotations)
    if not overrides:
        return objects
    if not isinstance(overrides, Mapping):
        raise fail("deployment_overrides", f"must be a mapping, got {type(overrides).__name__}")
    out = []
    for obj in objects:
        if obj["kind"] == "Deployment":
            merged = json_merge(obj, overrides)
            for path in ("apiVersion", "kind"):
                if merged.get(path) != obj[path]:
                    raise fail(f"deployment_overrides.{path}", "may not be changed")
            for path in ("name", "namespace"):
                if (merged.get("metadata") or {}).get(path) != obj["metadata"][path]:
                    raise fail(f"deployment_overrides.metadata.{path}", "may not be changed")
            if (merged.get("spec") or {}).get("selector") != obj["spec"]["selector"]:
                raise fail(
                    "deployment_overrides.spec.selector", "may not be changed (Service and PDB use it)"
                )
            obj = merged
        out.append(obj)
    return out


#: BatchInferenceSpec fields the CronJob operator takes as arguments of the same name.
CRONJOB_ARGUMENTS = (
    "schedule",
    "time_zone",
    "concurrency_policy",
    "starting_deadline_seconds",
    "successful_jobs_history_limit",
    "failed_jobs_history_limit",
    "suspend",
    "backoff_limit",
    "active_deadline_seconds",
    "ttl_seconds_after_finished",
)


def _batch_fields(values: Mapping[str, Any], model_uri: str) -> dict[str, Any]:
    """The BatchInferenceSpec fields but the pod, as the CronJob operator gives them."""
    return {
        "model_uri": model_uri,
        "input_uri": values.get("input_uri"),
        "output_uri": values.get("output_uri"),
        "labels": values.get("labels") or {},
        "annotations": values.get("annotations") or {},
        **{name: values[name] for name in CRONJOB_ARGUMENTS if name in values},
    }


def check_cronjob_args(values: Mapping[str, Any]) -> None:
    """The CronJob operator's spec arguments by the rule functions, building nothing (DAG parse time)."""
    from airflow_k8s_ml.manifests.batch_rules import check_batch_fields  # the cron grammar: CronJobs only

    model_uri = resolve_model_uri(values.get("model_uri"))
    fields = _batch_fields(values, model_uri)
    injected = {"MODEL_URI": model_uri, "INPUT_URI": fields["input_uri"], "OUTPUT_URI": fields["output_uri"]}
    _check_pod(values, pod_ip_env=False, injected_env=injected)
    check_batch_fields(fields)


def batch_spec(values: Mapping[str, Any]) -> BatchInferenceSpec:
    """:class:`BatchInferenceSpec` from the CronJob operator's (rendered) arguments."""
    from airflow_k8s_ml.manifests.batch import BatchInferenceSpec

    model_uri = resolve_model_uri(values.get("model_uri"))
    return BatchInferenceSpec(pod=pod_template(values), **_batch_fields(values, model_uri))
