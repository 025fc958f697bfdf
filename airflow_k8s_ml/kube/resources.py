"""Pure REST facts: which URL serves a kind, and how to find a workload's pods and name its replicas.

Why our own table instead of discovery: the kinds we drive are fixed and well known, and a discovery round
trip per client (what the dynamic client does) costs requests and start-up time in every task and trigger.
Unknown kinds still work when the caller names the plural (``resource_for(..., plural=...)``).
Shared by the sync and async clients so both build the same requests (sans-I/O core).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.k8s.kinds import WORKLOAD_KINDS, kind_facts

__all__ = [
    "DEFAULT_API_VERSIONS",
    "JOB_NAME_LABEL",
    "LEGACY_JOB_NAME_LABEL",
    "PYTORCHJOB_NAME_LABEL",
    "REPLICATED_JOB_LABEL",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "Resource",
    "pod_label_key",
    "pod_selector",
    "replica_name",
    "resource_for",
    "resource_of",
]

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_JOB_NAME_LABEL = "job-name"
PYTORCHJOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
#: JobSet's pod labels (a TrainJob's nodes): the replicated job, the Job's index in it, and the Indexed Job's
#: completion index (the node rank ``PET_NODE_RANK`` is read from).
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX_LABEL = "batch.kubernetes.io/job-completion-index"


@dataclass(frozen=True)
class Resource:
    """One REST resource (``group/version/plural``) and the kind it serves."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def collection_path(self, namespace: str | None) -> str:
        """``/apis/batch/v1/namespaces/ns/jobs`` (all namespaces when ``namespace`` is None)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        return f"{base}/{self.plural}"

    def object_path(self, namespace: str | None, name: str, subresource: str | None = None) -> str:
        path = f"{self.collection_path(namespace)}/{quote(name, safe='')}"
        return f"{path}/{subresource}" if subresource else path


def kueue_visibility_local_queues(version: str) -> Resource:
    """Kueue's on-demand visibility API at ``version`` (the same as its ``kueue.x-k8s.io``): a LocalQueue's
    ``pendingworkloads`` (the only path it serves there)."""
    return Resource("visibility.kueue.x-k8s.io", version, "localqueues", "LocalQueue")


_KNOWN: tuple[Resource, ...] = (
    Resource("", "v1", "pods", "Pod"),
    Resource("", "v1", "events", "Event"),
    Resource("", "v1", "services", "Service"),
    Resource("", "v1", "configmaps", "ConfigMap"),
    Resource("", "v1", "secrets", "Secret"),
    Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    Resource("", "v1", "serviceaccounts", "ServiceAccount"),
    Resource("", "v1", "namespaces", "Namespace", namespaced=False),
    Resource("apps", "v1", "replicasets", "ReplicaSet"),
    Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    Resource("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy"),
    # Kueue's Workload, read for queued jobs' admission, at the version the cluster serves (kube_version).
    Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload"),
    Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload"),
    *(Resource(k.group, k.version, k.plural, k.kind) for k in WORKLOAD_KINDS),
)

#: The api version each workload kind is driven at when the caller only names the kind.
DEFAULT_API_VERSIONS: dict[str, str] = {
    **{k.kind: k.api_version for k in WORKLOAD_KINDS},
    "Pod": "v1",
    "Event": "v1",
}


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def resource_for(api_version: str | None, kind: str, *, plural: str | None = None) -> Resource:
    """The resource serving ``kind`` at ``api_version`` (default: :data:`DEFAULT_API_VERSIONS`).

    Raises ``ValidationError('kind')`` for a kind we do not know unless ``plural`` is given.
    """
    api_version = api_version or DEFAULT_API_VERSIONS.get(kind)
    if not api_version:
        raise ValidationError("kind", f"unknown kind {kind!r}: pass its apiVersion")
    group, version = _split(api_version)
    for res in _KNOWN:
        if res.kind == kind and res.group == group and res.version == version:
            return res if plural in (None, res.plural) else Resource(group, version, plural, kind)
    if plural:
        return Resource(group, version, plural, kind)
    raise ValidationError("kind", f"unknown resource {api_version} {kind}: pass plural=")


def resource_of(obj: Mapping[str, Any]) -> Resource:
    """The resource of a full object (``apiVersion`` and ``kind`` set)."""
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValidationError("kind", "the object has no kind")
    return resource_for(obj.get("apiVersion"), kind)


def _template_labels(workload: Mapping[str, Any] | None) -> Mapping[str, Any]:
    spec = (workload or {}).get("spec") or {}
    return ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}


def pod_label_key(kind: str, workload: Mapping[str, Any] | None = None) -> str | None:
    """The label whose value is the workload's name on every pod it owns; None for kinds we do not track.

    Jobs: ``batch.kubernetes.io/job-name``, or the legacy ``job-name`` when the Job's template shows only
    that (clusters older than 1.27). Other kinds: their ``pod_name_label`` in
    :data:`~airflow_k8s_ml.k8s.kinds.WORKLOAD_KINDS` (PyTorchJobs: ``training.kubeflow.org/job-name``).
    """
    if kind == "Job":
        labels = _template_labels(workload)
        if workload is not None and LEGACY_JOB_NAME_LABEL in labels and JOB_NAME_LABEL not in labels:
            return LEGACY_JOB_NAME_LABEL
        return JOB_NAME_LABEL
    facts = kind_facts(kind)
    return facts.pod_name_label if facts is not None else None


def pod_selector(kind: str, name: str, workload: Mapping[str, Any] | None = None) -> str | None:
    """``<label>=<name>`` selecting the workload's pods, or None when the kind has no such label."""
    key = pod_label_key(kind, workload)
    return f"{key}={name}" if key else None


def replica_name(pod: Mapping[str, Any]) -> str:
    """``master-0`` / ``worker-1`` for training-operator pods; ``node-0`` / ``node-1`` for a JobSet's (a
    TrainJob's nodes: replicated job and completion index, with the Job index between them when it is not
    0); else the pod name (``[pod-name]`` in logs)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    role, index = labels.get(REPLICA_TYPE_LABEL), labels.get(REPLICA_INDEX_LABEL)
    if role and index is not None:
        return f"{str(role).lower()}-{index}"
    replicated_job, completion = labels.get(REPLICATED_JOB_LABEL), labels.get(COMPLETION_INDEX_LABEL)
    if replicated_job and completion is not None:
        job_index = str(labels.get(JOB_INDEX_LABEL) or "0")
        middle = "" if job_index == "0" else f"{job_index}-"
        return f"{replicated_job}-{middle}{completion}"
    return str(meta.get("name") or "?")
