"""A Kubeflow Trainer v2 ``TrainJob`` (``trainer.kubeflow.org/v1alpha1``): the typed spec and its builder.

Why the pod goes through :func:`~airflow_k8s_ml.manifests.pod.build_pod_template` first: the trainer node's
pod is the same :class:`~airflow_k8s_ml.manifests.pod.PodTemplate` every other kind renders (one set of
rules, our restrictive security defaults, the injected env); it is then split over the two places a TrainJob
holds a pod. ``spec.trainer`` takes the container's image, command, args, env and resources
(``resourcesPerNode``); ``spec.runtimePatches`` (Trainer v2.2+, replacing ``podTemplateOverrides`` and the
TrainJob's ``labels``/``annotations``) takes the rest for the runtime's ``node`` replicated job: the pod's
service account, volumes, pull secrets, security context, node selector, affinity, tolerations and grace
period, the ``node`` container's volume mounts and security context, and the labels and annotations of the
JobSet, the Job and the pods. A field neither can carry is refused by the rules
(:data:`~airflow_k8s_ml.manifests.trainjob_rules.UNSUPPORTED_POD_FIELDS`); the builder checks again so that
nothing is ever dropped silently.

Pure: nothing here talks to a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from airflow_k8s_ml.manifests.naming import merge_labels, object_meta
from airflow_k8s_ml.manifests.pod import PodTemplate, build_pod_template
from airflow_k8s_ml.manifests.training_rules import KUEUE_QUEUE_LABEL
from airflow_k8s_ml.manifests.trainjob_rules import (
    DEFAULT_RUNTIME,
    TRAINJOB_DEFAULTS,
    check_trainjob_fields,
    check_trainjob_pod,
)
from airflow_k8s_ml.manifests.validation import fail, store_checked

__all__ = [
    "API_VERSION",
    "DEFAULT_RUNTIME",
    "PATCH_MANAGER",
    "TRAINER_CONTAINER",
    "TRAINER_JOB",
    "TrainJobSpec",
    "build_trainjob",
]

API_VERSION = "trainer.kubeflow.org/v1alpha1"
#: Upstream's trainer container and replicated job are both named ``node`` (``constants.Node``).
TRAINER_CONTAINER = "node"
TRAINER_JOB = "node"
#: Our entry in ``spec.runtimePatches`` (a domain-prefixed path, as upstream's webhook requires; Kueue's
#: is ``kueue.x-k8s.io/manager``).
PATCH_MANAGER = "airflow-k8s-ml/operator"

#: PodSpec keys ``runtimePatches`` may set (upstream's ``PodSpecPatch``, minus ``initContainers`` and
#: ``schedulingGates``, which no argument of ours renders).
_POD_PATCH_KEYS = frozenset(
    {
        "serviceAccountName",
        "volumes",
        "imagePullSecrets",
        "securityContext",
        "nodeSelector",
        "affinity",
        "tolerations",
        "terminationGracePeriodSeconds",
    }
)
#: Container keys ``spec.trainer`` takes (same names), and those a ``runtimePatches`` ContainerPatch takes.
_TRAINER_KEYS = frozenset({"image", "command", "args", "env"})
_CONTAINER_PATCH_KEYS = frozenset({"volumeMounts", "securityContext"})


@dataclass(frozen=True, slots=True)
class TrainJobSpec:
    """A distributed run as a TrainJob: ``num_nodes`` trainer nodes of the ``trainer`` pod, on a runtime.

    ``runtime``/``runtime_kind`` reference the ClusterTrainingRuntime (default ``torch-distributed``) or a
    namespaced TrainingRuntime; ``num_nodes``/``num_proc_per_node`` None: the runtime's ``mlPolicy``.
    ``dataset_initializer``/``model_initializer`` (``{"storage_uri", "env", "secret"}``) need a runtime with
    those steps. ``queue_name`` is Kueue (label + ``spec.suspend``); ``active_deadline_seconds`` is the
    TrainJob's own (Trainer v2.2+), counted from creation or the last resume.
    """

    trainer: PodTemplate
    runtime: str = DEFAULT_RUNTIME
    runtime_kind: str = "ClusterTrainingRuntime"
    num_nodes: int | None = None
    num_proc_per_node: int | None = None
    dataset_initializer: Mapping[str, Any] | None = None
    model_initializer: Mapping[str, Any] | None = None
    active_deadline_seconds: int | None = None
    queue_name: str | None = None
    suspend: bool | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.trainer, PodTemplate):
            raise fail("trainer", f"must be a PodTemplate, got {type(self.trainer).__name__}")
        check_trainjob_pod({f.name: getattr(self.trainer, f.name) for f in fields(self.trainer)})
        values = {name: getattr(self, name) for name in TRAINJOB_DEFAULTS}
        store_checked(self, check_trainjob_fields(values))

    @property
    def effective_suspend(self) -> bool:
        return self.suspend if self.suspend is not None else self.queue_name is not None


def _initializer(value: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "storage_uri" in value:
        out["storageUri"] = value["storage_uri"]
    if value.get("env"):
        out["env"] = [{"name": k, "value": v} for k, v in value["env"].items()]
    if value.get("secret"):
        out["secretRef"] = {"name": value["secret"]}
    return out


def _split_pod(template: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A rendered pod template as (``spec.trainer`` fields, PodSpec patch, ``node`` ContainerPatch)."""
    pod_spec = dict(template["spec"])
    (container,) = pod_spec.pop("containers")
    trainer: dict[str, Any] = {}
    patch: dict[str, Any] = {"name": TRAINER_CONTAINER}
    for key, value in container.items():
        if key == "name":
            continue
        if key in _TRAINER_KEYS:
            trainer[key] = value
        elif key == "resources":
            trainer["resourcesPerNode"] = value
        elif key in _CONTAINER_PATCH_KEYS:
            patch[key] = value
        else:  # the rules refuse the arguments that render these; never drop one silently
            raise fail(f"trainer.{key}", "cannot be set on a TrainJob's trainer container")
    for key in pod_spec:
        if key not in _POD_PATCH_KEYS:
            raise fail(f"trainer.{key}", "cannot be set through a TrainJob's runtimePatches")
    return trainer, pod_spec, patch


def _runtime_patch(
    pod_metadata: Mapping[str, Any],
    pod_spec: Mapping[str, Any],
    container: Mapping[str, Any],
    ours: Mapping[str, str],
    ours_annotations: Mapping[str, str],
) -> dict[str, Any]:
    """Our ``runtimePatches`` entry: run labels on the JobSet and the Job, the pod for the ``node`` job."""
    identity: dict[str, Any] = {}
    if ours:
        identity["labels"] = dict(ours)
    if ours_annotations:
        identity["annotations"] = dict(ours_annotations)
    pod: dict[str, Any] = {}
    if pod_metadata:
        pod["metadata"] = dict(pod_metadata)
    spec = dict(pod_spec)
    if len(container) > 1:
        spec["containers"] = [dict(container)]
    if spec:
        pod["spec"] = spec
    job: dict[str, Any] = {"name": TRAINER_JOB, "template": {"spec": {"template": pod}}}
    if identity:
        job["template"]["metadata"] = identity
    template: dict[str, Any] = {"spec": {"replicatedJobs": [job]}}
    if identity:
        template["metadata"] = identity
    return {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": template}}


def build_trainjob(
    spec: TrainJobSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The TrainJob. ``labels``/``annotations`` (the run identity) go on the TrainJob and, through our
    runtime patch, on its JobSet, the trainer Job and every node's pod."""
    ours = dict(labels or {})
    ours_annotations = dict(annotations or {})
    job_labels = merge_labels(dict(ours), spec.labels, "labels")
    if spec.queue_name is not None:
        job_labels[KUEUE_QUEUE_LABEL] = spec.queue_name
    metadata = object_meta("TrainJob", name, namespace, job_labels, {**spec.annotations, **ours_annotations})
    template = build_pod_template(
        spec.trainer, labels=ours, annotations=ours_annotations, container_name=TRAINER_CONTAINER
    )
    trainer, pod_spec, container = _split_pod(template)
    if spec.num_nodes is not None:
        trainer["numNodes"] = spec.num_nodes
    if spec.num_proc_per_node is not None:
        trainer["numProcPerNode"] = spec.num_proc_per_node
    body: dict[str, Any] = {
        "runtimeRef": {"name": spec.runtime, "apiGroup": "trainer.kubeflow.org", "kind": spec.runtime_kind},
    }
    initializer = {
        key: _initializer(value)
        for key, value in (("dataset", spec.dataset_initializer), ("model", spec.model_initializer))
        if value is not None
    }
    if initializer:
        body["initializer"] = initializer
    body["trainer"] = trainer
    body["runtimePatches"] = [
        _runtime_patch(template.get("metadata") or {}, pod_spec, container, ours, ours_annotations)
    ]
    if spec.effective_suspend:
        body["suspend"] = True
    if spec.active_deadline_seconds is not None:
        body["activeDeadlineSeconds"] = spec.active_deadline_seconds
    return {"apiVersion": API_VERSION, "kind": "TrainJob", "metadata": metadata, "spec": body}

