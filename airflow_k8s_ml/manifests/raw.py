"""The raw-manifest escape hatch: a dict or a plain YAML file, validated and labelled like our own manifests.

Why validate what the user wrote: the operator still owns naming (deterministic names for submit-or-adopt),
the run labels (on the object *and* its pod templates, so pods are found by the same selector) and Kueue's
suspend rule. A raw manifest that bypassed these would break adoption, deadlines and log streaming in ways
that are hard to see. Templates are plain YAML: Airflow's own templating (``template_ext``) may render the
file before it gets here, so leftover ``{{ }}``/``{% %}`` means it was not rendered and is refused.

Why the typed arguments' rules apply here too: ``nvidia.com/gpu: "0.5"`` or ``memory: "2GB"`` in a raw Job is
accepted by the API server (or not even looked at until scheduling) and makes a Job that never gets a pod.
The same rule functions that judge ``requests=``/``gpus=``/``active_deadline_seconds=`` judge the manifest's
fields (:func:`~.validation.renamed_fields` only translates the argument's name in an error into the
manifest path), and every error names the operator argument and the path inside it:
``manifest.spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.k8s.kinds import WORKLOAD_KINDS
from airflow_k8s_ml.manifests._jobs import check_job_options
from airflow_k8s_ml.manifests.cron import parse_schedule, validate_time_zone
from airflow_k8s_ml.manifests.formats import (
    validate_annotations,
    validate_dns1123_label,
    validate_labels,
    validate_name,
    validate_namespace,
)
from airflow_k8s_ml.manifests.naming import merge_labels
from airflow_k8s_ml.manifests.pod_fields import pod_spec_keys
from airflow_k8s_ml.manifests.pod_rules import check_pod_fields
from airflow_k8s_ml.manifests.quantities import validate_resources
from airflow_k8s_ml.manifests.tfjob_rules import TF_CONTAINER, tfjob_max_name_length
from airflow_k8s_ml.manifests.training import KUEUE_QUEUE_LABEL, PYTORCH_CONTAINER, pytorchjob_max_name_length
from airflow_k8s_ml.manifests.training_rules import check_pytorchjob_fields
from airflow_k8s_ml.manifests.trainjob_rules import check_trainjob_fields, check_trainjob_pod
from airflow_k8s_ml.manifests.validation import PLACEHOLDER, fail, renamed_fields

__all__ = [
    "SUPPORTED_KINDS",
    "env_containers",
    "load_manifest",
    "pod_templates",
    "prepare_manifest",
    "strip_status",
]

#: (apiVersion, kind) pairs the operators know how to submit and watch.
SUPPORTED_KINDS: frozenset[tuple[str, str]] = frozenset(
    {
        *((k.api_version, k.kind) for k in WORKLOAD_KINDS),
        ("v1", "Service"),
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("policy/v1", "PodDisruptionBudget"),
        ("networking.k8s.io/v1", "NetworkPolicy"),
    }
)

_WORKLOAD_KINDS = tuple(k.kind for k in WORKLOAD_KINDS)

#: Fields the API server owns; a ``kubectl get -o yaml`` dump must lose them before it can be created.
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "ownerReferences",
)


def strip_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy without ``status`` and server-set metadata (uid, resourceVersion, managedFields, ...)."""
    out = copy.deepcopy(dict(obj))
    out.pop("status", None)
    metadata = out.get("metadata")
    if isinstance(metadata, dict):
        for key in _SERVER_METADATA:
            metadata.pop(key, None)
        annotations = metadata.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
            annotations.pop("deployment.kubernetes.io/revision", None)
    return out


def _looks_like_path(source: str) -> bool:
    text = source.strip()
    return "\n" not in text and text.lower().endswith((".yaml", ".yml", ".json"))


def load_manifest(source: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    """A manifest from a dict (copied), a path to a ``.yaml``/``.yml``/``.json`` file, or YAML text.

    Exactly one document is allowed: an operator submits and watches one workload.
    """
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source))
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _looks_like_path(source)):
        path = Path(os.fspath(source)).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise fail("manifest", f"cannot read {path}: {exc.strerror or exc}") from None
    elif isinstance(source, str):
        text = source
    else:
        raise fail(
            "manifest", f"must be a mapping, a YAML file path or YAML text, got {type(source).__name__}"
        )
    if "{{" in text or "{%" in text:
        raise fail("manifest", "contains unrendered Jinja ({{ }} or {% %}); raw manifests must be plain YAML")
    import yaml  # lazily: only the escape hatch needs it

    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        raise fail("manifest", f"invalid YAML: {exc}") from None
    if len(documents) != 1:
        raise fail("manifest", f"must contain exactly one YAML document, found {len(documents)}")
    if not isinstance(documents[0], dict):
        raise fail("manifest", f"must be a mapping at the top level, got {type(documents[0]).__name__}")
    return documents[0]


#: The Kubeflow v1 kinds: where their replica specs are, and the container the training operator requires.
_REPLICA_SPECS = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs"}
_TRAINING_CONTAINER = {"PyTorchJob": PYTORCH_CONTAINER, "TFJob": TF_CONTAINER}


def pod_templates(obj: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(path, PodTemplateSpec)`` for every pod template in a Job, CronJob, Deployment, PyTorchJob or
    TFJob."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind in ("Job", "Deployment"):
        yield "spec.template", spec.setdefault("template", {})
    elif kind == "CronJob":
        job_template = spec.setdefault("jobTemplate", {}).setdefault("spec", {})
        yield "spec.jobTemplate.spec.template", job_template.setdefault("template", {})
    elif kind in _REPLICA_SPECS:
        key = _REPLICA_SPECS[kind]
        for role, replica in (spec.get(key) or {}).items():
            if isinstance(replica, dict):
                yield f"spec.{key}.{role}.template", replica.setdefault("template", {})


def env_containers(obj: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(path, container)`` for every container the operator's env goes into: each pod template's
    containers, and a TrainJob's ``spec.trainer`` (its pods are the runtime's; the trainer is the container
    the TrainJob holds)."""
    for path, template in pod_templates(obj):
        for index, container in enumerate((template.get("spec") or {}).get("containers") or []):
            if isinstance(container, dict):
                yield f"{path}.spec.containers[{index}]", container
    if obj.get("kind") == "TrainJob" and isinstance(obj.get("spec"), dict):
        trainer = obj["spec"].setdefault("trainer", {})
        if isinstance(trainer, dict):
            yield "spec.trainer", trainer


@contextmanager
def _inside(argument: str) -> Iterator[None]:
    """Errors about the manifest's content name the operator argument first: ``manifest.spec...``."""
    try:
        yield
    except ValidationError as exc:
        if exc.field == argument or exc.field.startswith(f"{argument}."):
            raise
        raise fail(f"{argument}.{exc.field}", exc.message) from None


def _given(source: Mapping[str, Any], keys: Mapping[str, str]) -> dict[str, Any]:
    """``{argument: source[key]}`` for the keys present; a parse-time placeholder is judged once rendered."""
    return {arg: source[key] for arg, key in keys.items() if key in source and source[key] != PLACEHOLDER}


def _literal_map(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    return {key: item for key, item in value.items() if item != PLACEHOLDER}


#: Pod-spec fields judged by the typed pod arguments' rules (:func:`check_pod_fields`), from the one
#: declaration (:data:`~airflow_k8s_ml.manifests.pod_fields.POD_FIELDS`).
_POD_SPEC_FIELDS = pod_spec_keys()


def _check_container(
    where: str, container: Mapping[str, Any], pod_spec: Mapping[str, Any], path: str
) -> None:
    """Name, image, quantities and GPUs of one container, by the rules of the typed pod arguments."""
    validate_dns1123_label(container.get("name"), f"{where}.name")
    resources = container.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise fail(f"{where}.resources", f"must be a mapping, got {type(resources).__name__}")
    values = {
        "image": container.get("image"),
        "requests": _literal_map(resources.get("requests") or {}),
        "limits": _literal_map(resources.get("limits") or {}),
        **_given(pod_spec, _POD_SPEC_FIELDS),
    }
    paths = {
        "image": f"{where}.image",
        "requests": f"{where}.resources.requests",
        "limits": f"{where}.resources.limits",
        **{arg: f"{path}.spec.{key}" for arg, key in _POD_SPEC_FIELDS.items()},
    }
    with renamed_fields(paths):
        check_pod_fields(values)


def _check_containers(path: str, template: Mapping[str, Any], required_container: str | None) -> None:
    pod_spec = template.get("spec") or {}
    containers = pod_spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise fail(f"{path}.spec.containers", "at least one container is required")
    names = []
    for key in ("initContainers", "containers"):
        for index, container in enumerate(pod_spec.get(key) or []):
            where = f"{path}.spec.{key}[{index}]"
            if not isinstance(container, Mapping) or not container.get("name"):
                raise fail(f"{where}.name", "is required")
            if not isinstance(container.get("image"), str) or not container["image"].strip():
                raise fail(f"{where}.image", "is required")
            _check_container(where, container, pod_spec, path)
            if key == "containers":
                names.append(container["name"])
    if required_container is not None and required_container not in names:
        raise fail(f"{path}.spec.containers", f"a container named {required_container!r} is required")


#: JobSpec fields and the typed arguments whose rules (:func:`check_job_options`) judge them.
_JOB_FIELDS = {
    "backoff_limit": "backoffLimit",
    "active_deadline_seconds": "activeDeadlineSeconds",
    "ttl_seconds_after_finished": "ttlSecondsAfterFinished",
    "pod_failure_policy": "podFailurePolicy",
}


def _check_job_spec(job_spec: Mapping[str, Any], where: str) -> None:
    """A Job's (or a CronJob's job template's) restart policy, retry and deadline fields."""
    pod_spec = (job_spec.get("template") or {}).get("spec") or {}
    options = {name: None for name in _JOB_FIELDS} | _given(job_spec, _JOB_FIELDS)
    paths = {arg: f"{where}.{key}" for arg, key in _JOB_FIELDS.items()}
    paths["restart_policy"] = f"{where}.template.spec.restartPolicy"
    with renamed_fields(paths):
        check_job_options(restart_policy=pod_spec.get("restartPolicy"), **options)


#: PyTorchJob ``runPolicy`` fields and the typed arguments whose rules judge them.
_RUN_POLICY_FIELDS = {
    "backoff_limit": "backoffLimit",
    "active_deadline_seconds": "activeDeadlineSeconds",
    "ttl_seconds_after_finished": "ttlSecondsAfterFinished",
    "clean_pod_policy": "cleanPodPolicy",
}


def _check_pytorchjob_spec(spec: Mapping[str, Any]) -> None:
    replicas = spec.get("pytorchReplicaSpecs")
    if not isinstance(replicas, dict) or "Master" not in replicas:
        raise fail("spec.pytorchReplicaSpecs", "a Master replica spec is required")
    unknown = set(replicas) - {"Master", "Worker"}
    if unknown:
        raise fail("spec.pytorchReplicaSpecs", f"only Master and Worker are supported, got {sorted(unknown)}")
    if (replicas["Master"] or {}).get("replicas", 1) != 1:
        raise fail("spec.pytorchReplicaSpecs.Master.replicas", "must be exactly 1")
    run_policy = spec.get("runPolicy") or {}
    with renamed_fields({arg: f"spec.runPolicy.{key}" for arg, key in _RUN_POLICY_FIELDS.items()}):
        check_pytorchjob_fields(_given(run_policy, _RUN_POLICY_FIELDS))
    for role, replica in replicas.items():
        fields = replica if isinstance(replica, Mapping) else {}
        values = _given(fields, {"workers": "replicas", "restart_policy": "restartPolicy"})
        if role == "Master":
            values.pop("workers", None)
        where = f"spec.pytorchReplicaSpecs.{role}"
        with renamed_fields({"workers": f"{where}.replicas", "restart_policy": f"{where}.restartPolicy"}):
            check_pytorchjob_fields(values)


#: TrainJob fields and the typed arguments whose rules judge them.
_TRAINJOB_FIELDS = {"active_deadline_seconds": "activeDeadlineSeconds"}
_TRAINER_FIELDS = {"num_nodes": "numNodes", "num_proc_per_node": "numProcPerNode"}


def _check_trainjob_spec(spec: Mapping[str, Any]) -> None:
    """A raw TrainJob by the typed arguments' rules: runtimeRef, the trainer's image, env, resources and
    counts, the deadline."""
    ref = spec.get("runtimeRef")
    if not isinstance(ref, Mapping) or not ref.get("name"):
        raise fail("spec.runtimeRef.name", "is required (e.g. torch-distributed)")
    values: dict[str, Any] = {"runtime": ref["name"], **_given(spec, _TRAINJOB_FIELDS)}
    if ref.get("kind") is not None:
        values["runtime_kind"] = ref["kind"]
    trainer = spec.get("trainer") or {}
    if not isinstance(trainer, Mapping):
        raise fail("spec.trainer", f"must be a mapping, got {type(trainer).__name__}")
    values.update(_given(trainer, _TRAINER_FIELDS))
    paths = {
        "runtime": "spec.runtimeRef.name",
        "runtime_kind": "spec.runtimeRef.kind",
        **{arg: f"spec.{key}" for arg, key in _TRAINJOB_FIELDS.items()},
        **{arg: f"spec.trainer.{key}" for arg, key in _TRAINER_FIELDS.items()},
    }
    with renamed_fields(paths):
        check_trainjob_fields(values)
    resources = trainer.get("resourcesPerNode") or {}
    if not isinstance(resources, Mapping):
        raise fail("spec.trainer.resourcesPerNode", f"must be a mapping, got {type(resources).__name__}")
    env = [item for item in trainer.get("env") or [] if isinstance(item, Mapping)]
    with renamed_fields(
        {
            "image": "spec.trainer.image",
            "requests": "spec.trainer.resourcesPerNode.requests",
            "limits": "spec.trainer.resourcesPerNode.limits",
            "env": "spec.trainer.env",
        }
    ):
        validate_resources(
            _literal_map(resources.get("requests") or {}), _literal_map(resources.get("limits") or {})
        )
        if trainer.get("image") is not None:  # without one, the runtime's image runs
            check_pod_fields({"image": trainer["image"]})
        check_trainjob_pod({"env": {str(item.get("name")): "" for item in env}})


def _check_kind_rules(obj: dict[str, Any]) -> None:
    kind = obj["kind"]
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise fail("spec", "is required")
    if kind == "CronJob":
        parse_schedule(spec.get("schedule"), "spec.schedule")
        validate_time_zone(spec.get("timeZone"), "spec.timeZone")
    if kind == "PyTorchJob":
        _check_pytorchjob_spec(spec)
    if kind == "TrainJob":
        _check_trainjob_spec(spec)
    for path, template in pod_templates(obj):
        _check_containers(path, template, _TRAINING_CONTAINER.get(kind))
    if kind == "Job":
        _check_job_spec(spec, "spec")
    elif kind == "CronJob":
        _check_job_spec(spec["jobTemplate"]["spec"], "spec.jobTemplate.spec")


def _apply_queue_rule(obj: dict[str, Any], labels: Mapping[str, str]) -> None:
    """Kueue: a queued workload must be created suspended (Kueue un-suspends it on admission)."""
    if KUEUE_QUEUE_LABEL not in labels:
        return
    if obj["kind"] == "Job":
        holder, where = obj["spec"], "spec.suspend"
    elif obj["kind"] in _REPLICA_SPECS:
        holder, where = obj["spec"].setdefault("runPolicy", {}), "spec.runPolicy.suspend"
    elif obj["kind"] == "TrainJob":
        holder, where = obj["spec"], "spec.suspend"
    else:
        return
    if holder.get("suspend") is False:
        raise fail(where, f"must not be false with label {KUEUE_QUEUE_LABEL} (Kueue admits by un-suspending)")
    holder["suspend"] = True


def _set_name_and_namespace(obj: dict[str, Any], name: str | None, namespace: str | None) -> None:
    metadata = obj["metadata"]
    if "generateName" in metadata:
        raise fail("metadata.generateName", "is not supported: names must be deterministic to adopt on retry")
    if name is not None:
        metadata["name"] = name
    max_length = None
    if obj["kind"] == "PyTorchJob":
        workers = ((obj["spec"].get("pytorchReplicaSpecs") or {}).get("Worker") or {}).get("replicas", 0)
        max_length = pytorchjob_max_name_length(workers if isinstance(workers, int) else 0)
    if obj["kind"] == "TFJob":
        tf_specs = obj["spec"].get("tfReplicaSpecs") or {}
        counts = [(tf_specs.get(t) or {}).get("replicas", 1) for t in ("Worker", "PS")]
        max_length = tfjob_max_name_length(*(n if isinstance(n, int) else 0 for n in counts))
    validate_name(obj["kind"], metadata.get("name"), "metadata.name", max_length=max_length)
    existing = metadata.get("namespace")
    if namespace is not None:
        if existing is not None and existing != namespace:
            raise fail("metadata.namespace", f"is {existing!r} but the operator runs in {namespace!r}")
        metadata["namespace"] = namespace
    elif existing is not None:
        validate_namespace(existing, "metadata.namespace")


def prepare_manifest(
    manifest: Mapping[str, Any] | str | os.PathLike[str],
    *,
    namespace: str | None = None,
    name: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    kinds: frozenset[tuple[str, str]] | None = None,
    argument: str = "manifest",
) -> dict[str, Any]:
    """Load, check and label a raw manifest; returns a new dict ready to submit.

    ``name`` (the operator's deterministic name) replaces ``metadata.name``; ``namespace`` fills in a missing
    one and must match an explicit one; ``labels``/``annotations`` (the run identity) are added to the object
    and to each pod template; ``kinds`` restricts which (apiVersion, kind) the calling operator accepts.
    An error about the manifest's content names ``argument`` and the path inside it
    (``manifest.spec.template.spec.containers[0].resources.limits[nvidia.com/gpu]``).
    """
    if namespace is not None:
        validate_namespace(namespace)
    ours = validate_labels(labels or {}, "labels")
    ours_annotations = validate_annotations(annotations or {}, "annotations")
    with _inside(argument):
        obj = strip_status(load_manifest(manifest))
        _check_manifest(obj, kinds if kinds is not None else SUPPORTED_KINDS)
        _set_name_and_namespace(obj, name, namespace)
        _label(obj, ours, ours_annotations)
        _apply_queue_rule(obj, obj["metadata"]["labels"])
    metadata = obj["metadata"]
    for key_name in ("labels", "annotations"):
        if not metadata[key_name]:
            del metadata[key_name]
    return obj


def _check_manifest(obj: dict[str, Any], allowed: frozenset[tuple[str, str]]) -> None:
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key not in allowed:
        supported = ", ".join(f"{a} {k}" for a, k in sorted(allowed))
        raise fail("kind", f"unsupported apiVersion/kind {key[0]} {key[1]}; supported: {supported}")
    if not isinstance(obj.get("metadata", {}), dict):
        raise fail("metadata", "must be a mapping")
    obj.setdefault("metadata", {})
    if obj["kind"] in _WORKLOAD_KINDS:
        _check_kind_rules(obj)


def _label(obj: dict[str, Any], ours: dict[str, str], ours_annotations: dict[str, str]) -> None:
    """The run identity on the object and on each pod template (a user label may not spoof ours)."""
    metadata = obj["metadata"]
    user_labels = validate_labels(metadata.get("labels") or {}, "metadata.labels")
    metadata["labels"] = merge_labels(ours, user_labels, "metadata.labels")
    metadata["annotations"] = {
        **validate_annotations(metadata.get("annotations") or {}, "metadata.annotations"),
        **ours_annotations,
    }
    for path, template in pod_templates(obj):
        template_meta = template.setdefault("metadata", {})
        where = f"{path}.metadata"
        template_meta["labels"] = merge_labels(
            ours, validate_labels(template_meta.get("labels") or {}, f"{where}.labels"), f"{where}.labels"
        )
        if ours_annotations:
            template_meta["annotations"] = {**(template_meta.get("annotations") or {}), **ours_annotations}
