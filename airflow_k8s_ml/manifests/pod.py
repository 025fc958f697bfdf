"""The pod every workload runs: one typed :class:`PodTemplate` rendered into a PodTemplateSpec dict.

Why one shared builder: fine-tune Jobs, PyTorchJob replicas, inference Deployments and batch CronJobs all need
the same container knobs (image, env and secret references, GPUs, tolerations, volumes, security context).
Building them in one place means one set of validation rules and one restrictive security default, and the
workload builders only add what is specific to them (restart policy, ports, probes, injected env).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, cast

from airflow_k8s_ml.manifests.formats import validate_dns1123_label
from airflow_k8s_ml.manifests.naming import merge_labels
from airflow_k8s_ml.manifests.pod_rules import (
    SHM_VOLUME,
    check_injected_env,
    check_pod_fields,
    toleration_fields,
    volume_fields,
)
from airflow_k8s_ml.manifests.quantities import GPU_RESOURCE, Quantity, format_quantity
from airflow_k8s_ml.manifests.validation import check_choice, check_int, fail

__all__ = [
    "DEFAULT_CONTAINER_SECURITY_CONTEXT",
    "DEFAULT_POD_SECURITY_CONTEXT",
    "SPOT_NODE_LABELS",
    "SPOT_TAINTS",
    "PodTemplate",
    "Toleration",
    "Volume",
    "build_container",
    "build_pod_template",
    "gpu_toleration",
    "pod_security_context",
    "spot_node_selector",
    "spot_tolerations",
]

#: Pod-level default: the "restricted" Pod Security Standard's pod fields. ``runAsNonRoot`` means the image
#: must declare a numeric non-root USER, or set ``run_as_user`` via :func:`pod_security_context`.
DEFAULT_POD_SECURITY_CONTEXT: Mapping[str, Any] = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
#: Container-level default. ``readOnlyRootFilesystem`` is *not* forced: training code writes caches
#: (HF, torch) under $HOME, and a read-only root breaks most images without an obvious error.
DEFAULT_CONTAINER_SECURITY_CONTEXT: Mapping[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
}


def pod_security_context(
    *, run_as_user: int | None = None, run_as_group: int | None = None, fs_group: int | None = None
) -> dict[str, Any]:
    """The restrictive default plus the ids root-by-default images (e.g. ``pytorch/pytorch``) need."""
    context = copy.deepcopy(dict(DEFAULT_POD_SECURITY_CONTEXT))
    for key, value in (("runAsUser", run_as_user), ("runAsGroup", run_as_group), ("fsGroup", fs_group)):
        if value is not None:
            context[key] = check_int(value, key, minimum=0)
    if run_as_user == 0:
        raise fail("run_as_user", "0 (root) contradicts runAsNonRoot; pass pod_security_context={} instead")
    return context


def _as_fields(value: Any, cls: type[Toleration] | type[Volume]) -> Any:
    """A Toleration/Volume object as the field mapping the rules check; anything else unchanged."""
    return asdict(value) if isinstance(value, cls) else value


# --- tolerations and node placement ----------------------------------------------------------------------

#: Taints cloud providers put on spot/preemptible nodes (key, value).
SPOT_TAINTS: Mapping[str, tuple[str, str]] = {
    "gke": ("cloud.google.com/gke-spot", "true"),
    "gke-preemptible": ("cloud.google.com/gke-preemptible", "true"),
    "aks": ("kubernetes.azure.com/scalesetpriority", "spot"),
    "karpenter": ("karpenter.sh/capacity-type", "spot"),
}
#: Node labels that select spot capacity (key, value).
SPOT_NODE_LABELS: Mapping[str, tuple[str, str]] = {
    "gke": ("cloud.google.com/gke-spot", "true"),
    "gke-preemptible": ("cloud.google.com/gke-preemptible", "true"),
    "aks": ("kubernetes.azure.com/scalesetpriority", "spot"),
    "eks": ("eks.amazonaws.com/capacityType", "SPOT"),
    "karpenter": ("karpenter.sh/capacity-type", "spot"),
}


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration; ``Toleration.coerce`` also accepts the Kubernetes dict form."""

    key: str | None = None
    operator: str = "Equal"
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.key:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out

    @classmethod
    def coerce(cls, value: Toleration | Mapping[str, Any], field_name: str = "tolerations") -> Toleration:
        """A checked toleration (:func:`~airflow_k8s_ml.manifests.pod_rules.toleration_fields`)."""
        return cls(**toleration_fields(_as_fields(value, cls), field_name))


def spot_tolerations(*providers: str) -> tuple[Toleration, ...]:
    """Tolerate the spot-node taints of the given providers (default: all known; extra ones are harmless)."""
    names = providers or tuple(SPOT_TAINTS)
    out = []
    for provider in names:
        check_choice(provider, SPOT_TAINTS, "providers")
        key, value = SPOT_TAINTS[provider]
        out.append(Toleration(key=key, operator="Equal", value=value, effect="NoSchedule"))
    return tuple(out)


def spot_node_selector(provider: str) -> dict[str, str]:
    """Node selector that puts pods on spot capacity of one provider."""
    check_choice(provider, SPOT_NODE_LABELS, "provider")
    key, value = SPOT_NODE_LABELS[provider]
    return {key: value}


def gpu_toleration(resource: str = GPU_RESOURCE) -> Toleration:
    """GPU node pools are commonly tainted ``nvidia.com/gpu:NoSchedule`` (GKE does it automatically)."""
    return Toleration(key=resource, operator="Exists", effect="NoSchedule")


# --- volumes ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Volume:
    """A volume and its mount in the main container; one source: pvc, empty_dir, config_map or secret."""

    name: str
    mount_path: str
    pvc: str | None = None
    empty_dir: bool = False
    config_map: str | None = None
    secret: str | None = None
    read_only: bool = False
    sub_path: str | None = None
    size_limit: Quantity | None = None
    medium: str | None = None

    def volume_dict(self) -> dict[str, Any]:
        if self.pvc is not None:
            source: dict[str, Any] = {"persistentVolumeClaim": {"claimName": self.pvc}}
            if self.read_only:
                source["persistentVolumeClaim"]["readOnly"] = True
        elif self.config_map is not None:
            source = {"configMap": {"name": self.config_map}}
        elif self.secret is not None:
            source = {"secret": {"secretName": self.secret}}
        else:
            empty: dict[str, Any] = {}
            if self.medium:
                empty["medium"] = self.medium
            if self.size_limit is not None:
                empty["sizeLimit"] = format_quantity(self.size_limit)
            source = {"emptyDir": empty}
        return {"name": self.name, **source}

    def mount_dict(self) -> dict[str, Any]:
        mount: dict[str, Any] = {"name": self.name, "mountPath": self.mount_path}
        if self.read_only:
            mount["readOnly"] = True
        if self.sub_path:
            mount["subPath"] = self.sub_path
        return mount

    @classmethod
    def coerce(cls, value: Volume | Mapping[str, Any], field_name: str = "volumes") -> Volume:
        """A checked volume (:func:`~airflow_k8s_ml.manifests.pod_rules.volume_fields`)."""
        return cls(**volume_fields(_as_fields(value, cls), field_name))


# --- the pod template ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodTemplate:
    """Everything about the pod that is not specific to one workload kind.

    Values are validated on construction (``ValidationError`` names the argument), and sequences/mappings are
    copied into tuples/dicts so a spec cannot change after it was validated.
    ``secret_env={"HF_TOKEN": "hf-secret:token"}`` becomes a ``secretKeyRef`` (secrets never appear in the
    manifest); ``gpus=1`` sets ``nvidia.com/gpu`` (or ``gpu_resource``, e.g. ``nvidia.com/mig-1g.5gb``) in
    requests and limits. ``pod_security_context``/``container_security_context``: ``None`` = restrictive
    default, a mapping replaces it (``{}`` for none).
    """

    image: str
    command: Sequence[str] | None = None
    args: Sequence[str] | None = None
    working_dir: str | None = None
    env: Mapping[str, str | int | float] = field(default_factory=dict)
    secret_env: Mapping[str, str] = field(default_factory=dict)
    config_map_env: Mapping[str, str] = field(default_factory=dict)
    field_env: Mapping[str, str] = field(default_factory=dict)
    env_from_secrets: Sequence[str] = ()
    env_from_config_maps: Sequence[str] = ()
    requests: Mapping[str, Quantity] = field(default_factory=dict)
    limits: Mapping[str, Quantity] = field(default_factory=dict)
    gpus: int = 0
    gpu_resource: str = GPU_RESOURCE
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Toleration | Mapping[str, Any]] = ()
    affinity: Mapping[str, Any] | None = None
    image_pull_policy: str | None = None
    image_pull_secrets: Sequence[str] = ()
    volumes: Sequence[Volume | Mapping[str, Any]] = ()
    shm_size: Quantity | None = None
    service_account: str | None = None
    scheduler_name: str | None = None
    priority_class_name: str | None = None
    termination_grace_period_seconds: int | None = None
    pod_security_context: Mapping[str, Any] | None = None
    container_security_context: Mapping[str, Any] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name, cls in (("tolerations", Toleration), ("volumes", Volume)):
            if isinstance(values[name], list | tuple):
                values[name] = [_as_fields(item, cls) for item in values[name]]
        checked = check_pod_fields(values)
        checked["tolerations"] = tuple(Toleration(**t) for t in checked["tolerations"])
        checked["volumes"] = tuple(Volume(**v) for v in checked["volumes"])
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    # -- rendering --

    @property
    def toleration_specs(self) -> tuple[Toleration, ...]:
        """The tolerations after coercion (``__post_init__`` turned mappings into :class:`Toleration`)."""
        return cast(tuple[Toleration, ...], self.tolerations)

    @property
    def volume_specs(self) -> tuple[Volume, ...]:
        return cast(tuple[Volume, ...], self.volumes)

    def resources_dict(self) -> dict[str, dict[str, str]]:
        requests = {k: str(v) for k, v in self.requests.items()}
        limits = {k: str(v) for k, v in self.limits.items()}
        if self.gpus:
            requests[self.gpu_resource] = str(self.gpus)
            limits[self.gpu_resource] = str(self.gpus)
        out: dict[str, dict[str, str]] = {}
        if requests:
            out["requests"] = requests
        if limits:
            out["limits"] = limits
        return out

    def env_list(self, extra_env: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
        """Injected variables first, then the user's; secrets and config maps only as references."""
        extra = dict(extra_env or {})
        env_maps = ("env", "secret_env", "config_map_env", "field_env")
        check_injected_env({name: getattr(self, name) for name in env_maps}, extra)
        out: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in extra.items()]
        out += [{"name": k, "value": v} for k, v in self.env.items()]
        for var, ref in self.secret_env.items():
            name, key = ref.split(":")
            out.append({"name": var, "valueFrom": {"secretKeyRef": {"name": name, "key": key}}})
        for var, ref in self.config_map_env.items():
            name, key = ref.split(":")
            out.append({"name": var, "valueFrom": {"configMapKeyRef": {"name": name, "key": key}}})
        for var, path in self.field_env.items():
            out.append({"name": var, "valueFrom": {"fieldRef": {"fieldPath": path}}})
        return out

    def env_from_list(self) -> list[dict[str, Any]]:
        return [{"secretRef": {"name": n}} for n in self.env_from_secrets] + [
            {"configMapRef": {"name": n}} for n in self.env_from_config_maps
        ]

    def volume_lists(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        volumes = [v.volume_dict() for v in self.volume_specs]
        mounts = [v.mount_dict() for v in self.volume_specs]
        if self.shm_size is not None:
            volumes.append(
                {
                    "name": SHM_VOLUME,
                    "emptyDir": {"medium": "Memory", "sizeLimit": format_quantity(self.shm_size)},
                }
            )
            mounts.append({"name": SHM_VOLUME, "mountPath": "/dev/shm"})
        return volumes, mounts


def build_container(
    pod: PodTemplate,
    *,
    name: str = "main",
    extra_env: Mapping[str, str] | None = None,
    ports: Sequence[Mapping[str, Any]] = (),
    probes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The one container: ``probes`` maps ``readinessProbe``/``livenessProbe``/``startupProbe`` to bodies."""
    validate_dns1123_label(name, "container_name")
    container: dict[str, Any] = {"name": name, "image": pod.image}
    if pod.command is not None:
        container["command"] = list(pod.command)
    if pod.args is not None:
        container["args"] = list(pod.args)
    if pod.working_dir:
        container["workingDir"] = pod.working_dir
    env = pod.env_list(extra_env)
    if env:
        container["env"] = env
    env_from = pod.env_from_list()
    if env_from:
        container["envFrom"] = env_from
    if ports:
        container["ports"] = [dict(p) for p in ports]
    resources = pod.resources_dict()
    if resources:
        container["resources"] = resources
    _, mounts = pod.volume_lists()
    if mounts:
        container["volumeMounts"] = mounts
    for probe_name, body in (probes or {}).items():
        container[probe_name] = copy.deepcopy(dict(body))
    if pod.image_pull_policy:
        container["imagePullPolicy"] = pod.image_pull_policy
    security = (
        DEFAULT_CONTAINER_SECURITY_CONTEXT
        if pod.container_security_context is None
        else pod.container_security_context
    )
    if security:
        container["securityContext"] = copy.deepcopy(dict(security))
    return container


def build_pod_template(
    pod: PodTemplate,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    restart_policy: str | None = None,
    container_name: str = "main",
    extra_env: Mapping[str, str] | None = None,
    ports: Sequence[Mapping[str, Any]] = (),
    probes: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ``PodTemplateSpec`` dict: ``{"metadata": {labels, annotations}, "spec": {...}}``.

    ``labels``/``annotations`` are ours (run identity); they are merged over the user's pod labels.
    """
    metadata: dict[str, Any] = {}
    merged_labels = merge_labels(dict(labels or {}), pod.labels, "labels")
    if merged_labels:
        metadata["labels"] = merged_labels
    merged_annotations = {**pod.annotations, **dict(annotations or {})}
    if merged_annotations:
        metadata["annotations"] = merged_annotations
    spec: dict[str, Any] = {}
    if restart_policy is not None:
        spec["restartPolicy"] = restart_policy
    if pod.service_account:
        spec["serviceAccountName"] = pod.service_account
    if pod.scheduler_name:
        spec["schedulerName"] = pod.scheduler_name
    if pod.priority_class_name:
        spec["priorityClassName"] = pod.priority_class_name
    if pod.termination_grace_period_seconds is not None:
        spec["terminationGracePeriodSeconds"] = pod.termination_grace_period_seconds
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.tolerations:
        spec["tolerations"] = [t.to_dict() for t in pod.toleration_specs]
    if pod.affinity:
        spec["affinity"] = copy.deepcopy(dict(pod.affinity))
    if pod.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": n} for n in pod.image_pull_secrets]
    security = DEFAULT_POD_SECURITY_CONTEXT if pod.pod_security_context is None else pod.pod_security_context
    if security:
        spec["securityContext"] = copy.deepcopy(dict(security))
    spec["containers"] = [
        build_container(pod, name=container_name, extra_env=extra_env, ports=ports, probes=probes)
    ]
    volumes, _ = pod.volume_lists()
    if volumes:
        spec["volumes"] = volumes
    return {"metadata": metadata, "spec": spec}
