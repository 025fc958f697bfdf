"""Pure helpers shared by the serving operators: run identity from the Airflow context, argument coercion.

Why the run labels here omit the attempt: Deployments, Services and CronJobs are long-lived objects that every
run re-applies. Labelling them with the try number would make a plain task retry look like a change
("configured") when nothing about the serving state differs. A run-now Job *is* a per-attempt workload and
gets :meth:`RunKey.labels` (with the attempt) from its operator instead.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

from airflow_k8s_ml.manifests.batch import BatchInferenceSpec
from airflow_k8s_ml.manifests.naming import ATTEMPT_LABEL, RunKey
from airflow_k8s_ml.manifests.pod import PodTemplate
from airflow_k8s_ml.manifests.serving import (
    Autoscaling,
    InferenceSpec,
    IngressPolicy,
    build_inference_objects,
)
from airflow_k8s_ml.manifests.validation import fail, renamed_fields
from airflow_k8s_ml.operators._args import POD_ARGUMENTS as ALL_POD_ARGUMENTS
from airflow_k8s_ml.operators._args import argument_names

__all__ = [
    "CRONJOB_ARGUMENTS",
    "DEPLOYMENT_OPTIONS",
    "POD_ARGUMENTS",
    "batch_spec",
    "coerce_dataclass",
    "inference_spec",
    "json_merge",
    "object_labels",
    "pod_template",
    "render_inference",
    "resolve_model_uri",
    "run_key",
]

T = TypeVar("T")


def run_key(context: Mapping[str, Any]) -> RunKey:
    """The task instance of this execution (``context["ti"]``); ``attempt`` is Airflow's try number."""
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


def coerce_dataclass(cls: type[T], value: Any, field_name: str) -> T | None:
    """``None``, an instance of ``cls``, or a mapping of its fields (DAG-file friendly, serialisable)."""
    if value is None or isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise fail(field_name, f"must be a {cls.__name__} or a mapping, got {type(value).__name__}")
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(value) - known)
    if unknown:
        raise fail(f"{field_name}.{unknown[0]}", f"unknown key; expected one of {', '.join(sorted(known))}")
    return cls(**value)


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
#: The pod arguments the serving operators take at the top level (named as on the training operators);
#: the other PodTemplate fields go in ``pod_options``.
POD_ARGUMENTS: Mapping[str, str] = {
    name: ALL_POD_ARGUMENTS[name]
    for name in ("image", "command", "args", "env", "secret_env", "env_from", "requests", "limits", "gpus")
}
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


def pod_template(values: Mapping[str, Any], *, pod_ip_env: bool = False) -> PodTemplate:
    """The pod from the top-level pod arguments plus ``pod_options`` (any other PodTemplate field).

    ``pod_ip_env`` adds ``POD_IP`` from the downward API (``status.podIP``) unless the user sets it: a
    server must bind the pod's address to be reachable by probes and the Service, and Kubernetes only
    provides it that way (``workloads.serve`` binds ``POD_IP``).
    """
    extra_fields = tuple(f.name for f in fields(PodTemplate) if f.name not in POD_ARGUMENTS.values())
    options = _options(values.get("pod_options"), extra_fields, "pod_options")
    given = {field: values[arg] for arg, field in POD_ARGUMENTS.items() if values.get(arg) is not None}
    if pod_ip_env:
        field_env = dict(options.get("field_env") or {})
        user_vars = {*(given.get("env") or {}), *(given.get("secret_env") or {}), *field_env}
        user_vars |= set(options.get("config_map_env") or {})
        if POD_IP_ENV not in user_vars:
            options["field_env"] = {POD_IP_ENV: "status.podIP", **field_env}
    with argument_names():
        return PodTemplate(**given, **options)


def inference_spec(values: Mapping[str, Any]) -> InferenceSpec:
    """The InferenceSpec from the operator's (rendered) arguments; ``ValidationError`` names the field."""
    options = _options(values.get("deployment_options"), DEPLOYMENT_OPTIONS, "deployment_options")
    pod = pod_template(values, pod_ip_env=True)
    model_uri = resolve_model_uri(values.get("model_uri"))
    with renamed_fields(_OPTION_ARGUMENTS):  # the user wrote deployment_options={"max_surge": ...}
        return _inference_spec(values, pod, model_uri, options)


def _inference_spec(
    values: Mapping[str, Any], pod: PodTemplate, model_uri: str, options: Mapping[str, Any]
) -> InferenceSpec:
    return InferenceSpec(
        pod=pod,
        model_uri=model_uri,
        replicas=values.get("replicas"),
        port=values.get("port", 8080),
        service_port=values.get("service_port", 80),
        readiness_path=values.get("readiness_path", "/readyz"),
        liveness_path=values.get("liveness_path"),
        autoscaling=coerce_dataclass(Autoscaling, values.get("autoscaling"), "autoscaling"),
        pdb_min_available=values.get("pdb_min_available"),
        network_policy=coerce_dataclass(IngressPolicy, values.get("network_policy"), "network_policy"),
        labels=values.get("labels") or {},
        annotations=values.get("annotations") or {},
        **options,
    )


def render_inference(
    spec: InferenceSpec, name: str, namespace: str, key: RunKey, overrides: Mapping[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Every serving object in apply order, labelled with the run; ``overrides`` merged into the
    Deployment (identity and selector may not change: the Service and PDB depend on them)."""
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


def batch_spec(values: Mapping[str, Any]) -> BatchInferenceSpec:
    """:class:`BatchInferenceSpec` from the CronJob operator's (rendered) arguments."""
    return BatchInferenceSpec(
        pod=pod_template(values),
        model_uri=resolve_model_uri(values.get("model_uri")),
        input_uri=values.get("input_uri"),  # type: ignore[arg-type]
        output_uri=values.get("output_uri"),  # type: ignore[arg-type]
        labels=values.get("labels") or {},
        annotations=values.get("annotations") or {},
        **{name: values[name] for name in CRONJOB_ARGUMENTS if name in values},
    )
