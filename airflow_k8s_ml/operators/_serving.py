"""Pure helpers shared by the serving operators: the labels of long-lived objects, argument coercion.

(The run identity itself is the runner's, :func:`airflow_k8s_ml.operators._runner.run_key`, as for every
operator.)

Why the run labels here omit the attempt: Deployments, Services and CronJobs are long-lived objects that every
run re-applies. Labelling them with the try number would make a plain task retry look like a change
("configured") when nothing about the serving state differs. A run-now Job *is* a per-attempt workload and
gets :meth:`RunKey.labels` (with the attempt) from its operator instead.

Why typed arguments: each operator reads its arguments once - after templating in ``execute``, neutralised
(:func:`neutral`) in ``__init__`` - into a frozen :class:`InferenceArgs` / :class:`CronJobArgs`, and every
helper here takes that value, so a misspelt argument name is a type error instead of a ``KeyError`` (or a
silent default) in one of the ~25 places that read it.

Why two paths from the arguments: :func:`check_inference_args` / :func:`check_cronjob_args` judge the
arguments with the rule functions alone (``manifests/*_rules.py``), building nothing, because the operators
run them in ``__init__`` on every DAG parse; :func:`inference_spec` / :func:`batch_spec` build the typed
specs in ``execute``. Both read the arguments through the same helpers, and the specs apply the same rules in
``__post_init__``, so the two cannot disagree. The spec modules are imported on use only.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from airflow_k8s_ml.k8s.record import Record
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
from airflow_k8s_ml.manifests.validation import checked_options, fail, renamed_fields
from airflow_k8s_ml.operators._args import PLACEHOLDER, argument_names
from airflow_k8s_ml.operators.templating import neutralize

if TYPE_CHECKING:
    from airflow_k8s_ml.manifests.batch import BatchInferenceSpec
    from airflow_k8s_ml.manifests.naming import RunKey
    from airflow_k8s_ml.manifests.pod import PodTemplate
    from airflow_k8s_ml.manifests.serving import InferenceSpec

__all__ = [
    "CRONJOB_ARGUMENTS",
    "DEPLOYMENT_OPTIONS",
    "POD_ARGUMENTS",
    "CronJobArgs",
    "InferenceArgs",
    "ServingArgs",
    "batch_spec",
    "check_cronjob_args",
    "check_inference_args",
    "inference_spec",
    "json_merge",
    "neutral",
    "object_labels",
    "pod_template",
    "render_inference",
    "resolve_model_uri",
]


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


class ServingArgs(Record):
    """What both serving operators take, read once (after templating, or neutralised at parse time).

    ``pod`` maps each pod argument (:data:`POD_ARGUMENTS`, plus ``pod_options``) to its value, as
    :class:`~airflow_k8s_ml.operators._kind.WorkloadArgs` does for the workload operators.
    """

    name: Any
    namespace: Any
    model_uri: Any
    pod: Mapping[str, Any]
    labels: Any
    annotations: Any

    @classmethod
    def read(cls, operator: object) -> Self:
        """The operator's attributes of the same names (``pod``: its pod arguments and ``pod_options``)."""
        pod = {name: getattr(operator, name) for name in (*POD_ARGUMENTS, "pod_options")}
        own = {name: getattr(operator, name) for name in cls._fields if name != "pod"}
        return cls(pod=pod, **own)


class InferenceArgs(ServingArgs):
    """``InferenceDeploymentOperator``'s arguments that shape or check the objects it applies."""

    replicas: Any
    port: Any
    service_port: Any
    readiness_path: Any
    liveness_path: Any
    deployment_options: Any
    autoscaling: Any
    pdb_min_available: Any
    network_policy: Any
    deployment_overrides: Any
    smoke_path: Any
    smoke_request: Any
    expected_response: Any
    expected_status: Any


class CronJobArgs(ServingArgs):
    """``BatchInferenceCronJobOperator``'s arguments that shape or check the CronJob it applies."""

    input_uri: Any
    output_uri: Any
    schedule: Any
    time_zone: Any
    concurrency_policy: Any
    starting_deadline_seconds: Any
    successful_jobs_history_limit: Any
    failed_jobs_history_limit: Any
    suspend: Any
    backoff_limit: Any
    active_deadline_seconds: Any
    ttl_seconds_after_finished: Any


_Args = TypeVar("_Args", bound=ServingArgs)


def neutral(args: _Args) -> _Args:
    """The parse-time stand-in of typed arguments: templated strings (anywhere inside) and XComArgs
    (``gate.output``, resolved at run time) become the placeholder, which the rules let pass."""

    def value(item: Any) -> Any:
        if hasattr(item, "resolve") and not isinstance(item, str | Mapping | list | tuple):
            return PLACEHOLDER
        return neutralize(item)

    fields = {name: value(item) for name, item in args._asdict().items() if name != "pod"}
    return type(args)(pod={name: value(item) for name, item in args.pod.items()}, **fields)


def _pod_arguments(args: ServingArgs, *, pod_ip_env: bool) -> dict[str, Any]:
    """PodTemplate arguments from the top-level pod arguments plus ``pod_options`` (any other field).

    ``pod_ip_env`` adds ``POD_IP`` from the downward API (``status.podIP``) unless the user sets it: a
    server must bind the pod's address to be reachable by probes and the Service, and Kubernetes only
    provides it that way (``workloads.serve`` binds ``POD_IP``).
    """
    options = checked_options(
        args.pod.get("pod_options"), option_fields(POD_ARGUMENTS), "pod_options", arguments=POD_ARGUMENTS
    )
    given = {field: args.pod[arg] for arg, field in POD_ARGUMENTS.items() if args.pod.get(arg) is not None}
    if pod_ip_env:
        field_env = dict(options.get("field_env") or {})
        user_vars = {*(given.get("env") or {}), *(given.get("secret_env") or {}), *field_env}
        user_vars |= set(options.get("config_map_env") or {})
        if POD_IP_ENV not in user_vars:
            options["field_env"] = {POD_IP_ENV: "status.podIP", **field_env}
    return {**given, **options}


def pod_template(args: ServingArgs, *, pod_ip_env: bool = False) -> PodTemplate:
    """The pod from the top-level pod arguments plus ``pod_options`` (see :func:`_pod_arguments`)."""
    from airflow_k8s_ml.manifests.pod import PodTemplate

    with argument_names():
        return PodTemplate(**_pod_arguments(args, pod_ip_env=pod_ip_env))


def _check_pod(args: ServingArgs, *, pod_ip_env: bool, injected_env: Mapping[str, str]) -> dict[str, Any]:
    """The pod's arguments by the pod rules (building nothing); a variable we inject may not be set."""
    with argument_names():
        pod = check_pod_fields(_pod_arguments(args, pod_ip_env=pod_ip_env))
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


def _autoscaling(args: InferenceArgs) -> dict[str, Any] | None:
    return _checked(args.autoscaling, check_autoscaling_fields, _AUTOSCALING, "autoscaling")


def _network_policy(args: InferenceArgs) -> dict[str, Any] | None:
    return _checked(args.network_policy, check_ingress_fields, _INGRESS_POLICY, "network_policy")


def _server_fields(args: InferenceArgs, model_uri: str) -> dict[str, Any]:
    """The InferenceSpec fields besides pod, autoscaling and network policy, as the operator gives them."""
    options = checked_options(args.deployment_options, DEPLOYMENT_OPTIONS, "deployment_options")
    return {
        "model_uri": model_uri,
        "replicas": args.replicas,
        "port": args.port,
        "service_port": args.service_port,
        "readiness_path": args.readiness_path,
        "liveness_path": args.liveness_path,
        "pdb_min_available": args.pdb_min_available,
        "labels": args.labels or {},
        "annotations": args.annotations or {},
        **options,
    }


def _server_env(model_uri: str, args: InferenceArgs) -> dict[str, str]:
    """What the model server's container gets from the operator (and the user may not set)."""
    return {"MODEL_URI": model_uri, "PORT": str(args.port)}


def check_inference_args(args: InferenceArgs) -> None:
    """Every argument of ``InferenceDeploymentOperator`` by the rule functions, building nothing: what
    ``__init__`` runs on every DAG parse (templated values arrive as placeholders)."""
    check_server_name(args.name)
    model_uri = resolve_model_uri(args.model_uri)
    pod = _check_pod(args, pod_ip_env=True, injected_env=_server_env(model_uri, args))
    autoscaling = _autoscaling(args)
    _network_policy(args)
    with renamed_fields(_OPTION_ARGUMENTS):  # the user wrote deployment_options={"max_surge": ...}
        check_inference_fields(
            _server_fields(args, model_uri), requests=pod["requests"], autoscaling=autoscaling
        )


def inference_spec(args: InferenceArgs) -> InferenceSpec:
    """The InferenceSpec from the operator's (rendered) arguments; ``ValidationError`` names the field."""
    from airflow_k8s_ml.manifests.serving import Autoscaling, InferenceSpec, IngressPolicy

    pod = pod_template(args, pod_ip_env=True)
    model_uri = resolve_model_uri(args.model_uri)
    fields = _server_fields(args, model_uri)
    autoscaling, policy = _autoscaling(args), _network_policy(args)
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


def _batch_fields(args: CronJobArgs, model_uri: str) -> dict[str, Any]:
    """The BatchInferenceSpec fields but the pod, as the CronJob operator gives them."""
    return {
        "model_uri": model_uri,
        "input_uri": args.input_uri,
        "output_uri": args.output_uri,
        "labels": args.labels or {},
        "annotations": args.annotations or {},
        **{name: getattr(args, name) for name in CRONJOB_ARGUMENTS},
    }


def check_cronjob_args(args: CronJobArgs) -> None:
    """The CronJob operator's spec arguments by the rule functions, building nothing (DAG parse time)."""
    from airflow_k8s_ml.manifests.batch_rules import check_batch_fields  # the cron grammar: CronJobs only

    model_uri = resolve_model_uri(args.model_uri)
    fields = _batch_fields(args, model_uri)
    injected = {"MODEL_URI": model_uri, "INPUT_URI": fields["input_uri"], "OUTPUT_URI": fields["output_uri"]}
    _check_pod(args, pod_ip_env=False, injected_env=injected)
    check_batch_fields(fields)


def batch_spec(args: CronJobArgs) -> BatchInferenceSpec:
    """:class:`BatchInferenceSpec` from the CronJob operator's (rendered) arguments."""
    from airflow_k8s_ml.manifests.batch import BatchInferenceSpec

    model_uri = resolve_model_uri(args.model_uri)
    return BatchInferenceSpec(pod=pod_template(args), **_batch_fields(args, model_uri))
