"""Fine-tune workloads: a batch/v1 Job (one pod) or a kubeflow.org/v1 PyTorchJob (master + N workers).

Why typed specs: the operator turns its (templated) arguments into a frozen spec once, the spec validates
itself, and the builders are pure ``spec -> dict`` functions the tests can check field by field. Nothing here
talks to a cluster; the same dict goes to a real API server or the embedded local cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_k8s_ml.manifests._jobs import job_spec, with_disruption_rule
from airflow_k8s_ml.manifests.naming import merge_labels, object_meta
from airflow_k8s_ml.manifests.pod import PodTemplate, build_pod_template
from airflow_k8s_ml.manifests.training_rules import (
    CLEAN_POD_POLICIES,
    FINETUNE_JOB_DEFAULTS,
    KUEUE_QUEUE_LABEL,
    PYTORCH_RESTART_POLICIES,
    PYTORCHJOB_DEFAULTS,
    check_finetune_job_fields,
    check_pytorchjob_fields,
)
from airflow_k8s_ml.manifests.validation import fail, store_checked

__all__ = [
    "CLEAN_POD_POLICIES",
    "KUEUE_QUEUE_LABEL",
    "PYTORCH_CONTAINER",
    "PYTORCH_RESTART_POLICIES",
    "FineTuneJobSpec",
    "PyTorchJobSpec",
    "build_job",
    "build_pytorchjob",
    "pytorchjob_max_name_length",
]

#: The training operator requires the training container to be named ``pytorch``.
PYTORCH_CONTAINER = "pytorch"


def _check_pod(pod: Any, name: str) -> PodTemplate:
    if not isinstance(pod, PodTemplate):
        raise fail(name, f"must be a PodTemplate, got {type(pod).__name__}")
    return pod


@dataclass(frozen=True, slots=True)
class FineTuneJobSpec:
    """A single-pod (or ``parallelism``-pod) fine-tune run as a batch/v1 Job.

    ``backoff_limit`` defaults to 0: Airflow's retries own retrying (each try is a new Job that resumes from
    the newest checkpoint), so Kubernetes-side retries would silently multiply GPU hours. ``queue_name``
    submits through Kueue (label + created suspended); ``suspend`` defaults to True then and may not be False.
    A disruption is not a failure: the Job carries a pod failure policy whose first rule ignores pods with
    ``DisruptionTarget`` (:data:`~airflow_k8s_ml.manifests._jobs.DISRUPTION_RULE`), so an evicted or
    preempted pod is replaced at once without spending ``backoff_limit`` (``restart_policy="Never"`` only).
    """

    pod: PodTemplate
    backoff_limit: int = 0
    restart_policy: str = "Never"
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    parallelism: int = 1
    completions: int = 1
    queue_name: str | None = None
    suspend: bool | None = None
    pod_failure_policy: Mapping[str, Any] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_pod(self.pod, "pod")
        values = {name: getattr(self, name) for name in FINETUNE_JOB_DEFAULTS}
        store_checked(self, check_finetune_job_fields(values))

    @property
    def effective_suspend(self) -> bool:
        return self.suspend if self.suspend is not None else self.queue_name is not None


def _workload_labels(
    spec_labels: Mapping[str, str], ours: Mapping[str, str], queue_name: str | None
) -> dict[str, str]:
    labels = merge_labels(dict(ours), spec_labels, "labels")
    if queue_name is not None:
        labels[KUEUE_QUEUE_LABEL] = queue_name
    return labels


def build_job(
    spec: FineTuneJobSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The batch/v1 Job. ``labels``/``annotations`` (the run identity) go on the Job *and* its pod template,
    so pods can be found with the same selector as the Job."""
    ours = dict(labels or {})
    ours_annotations = dict(annotations or {})
    metadata = object_meta(
        "Job",
        name,
        namespace,
        _workload_labels(spec.labels, ours, spec.queue_name),
        {**spec.annotations, **ours_annotations},
    )
    template = build_pod_template(
        spec.pod, labels=ours, annotations=ours_annotations, restart_policy=spec.restart_policy
    )
    body = job_spec(
        template=template,
        backoff_limit=spec.backoff_limit,
        active_deadline_seconds=spec.active_deadline_seconds,
        ttl_seconds_after_finished=spec.ttl_seconds_after_finished,
        suspend=spec.effective_suspend,
        parallelism=spec.parallelism,
        completions=spec.completions,
        pod_failure_policy=with_disruption_rule(spec.pod_failure_policy, spec.restart_policy),
    )
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": body}


@dataclass(frozen=True, slots=True)
class PyTorchJobSpec:
    """A distributed run as a kubeflow.org/v1 PyTorchJob: one Master plus ``workers`` Workers.

    ``worker`` defaults to the master's pod (same image, resources, env). ``queue_name`` is Kueue (label +
    ``runPolicy.suspend``); ``scheduling_queue``/``min_available``/``priority_class`` fill
    ``runPolicy.schedulingPolicy`` for gang schedulers such as Volcano (set ``scheduler_name`` on the pods).
    ``clean_pod_policy`` is rendered explicitly (upstream default ``None`` keeps idle workers running after
    the master succeeded; ``Running`` frees their GPUs).
    """

    master: PodTemplate
    workers: int = 0
    worker: PodTemplate | None = None
    nproc_per_node: int | str | None = None
    restart_policy: str = "OnFailure"
    backoff_limit: int | None = None
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    clean_pod_policy: str = "None"
    queue_name: str | None = None
    suspend: bool | None = None
    scheduling_queue: str | None = None
    min_available: int | None = None
    priority_class: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_pod(self.master, "master")
        if self.worker is not None:
            _check_pod(self.worker, "worker")
            if self.workers == 0:
                raise fail("worker", "a worker pod was given but workers is 0")
        values = {name: getattr(self, name) for name in PYTORCHJOB_DEFAULTS}
        store_checked(self, check_pytorchjob_fields(values))

    @property
    def effective_suspend(self) -> bool:
        return self.suspend if self.suspend is not None else self.queue_name is not None

    @property
    def worker_pod(self) -> PodTemplate:
        return self.worker if self.worker is not None else self.master

    def run_policy(self) -> dict[str, Any]:
        policy: dict[str, Any] = {"cleanPodPolicy": self.clean_pod_policy}
        if self.backoff_limit is not None:
            policy["backoffLimit"] = self.backoff_limit
        if self.active_deadline_seconds is not None:
            policy["activeDeadlineSeconds"] = self.active_deadline_seconds
        if self.ttl_seconds_after_finished is not None:
            policy["ttlSecondsAfterFinished"] = self.ttl_seconds_after_finished
        if self.effective_suspend:
            policy["suspend"] = True
        scheduling: dict[str, Any] = {}
        if self.scheduling_queue is not None:
            scheduling["queue"] = self.scheduling_queue
        if self.min_available is not None:
            scheduling["minAvailable"] = self.min_available
        if self.priority_class is not None:
            scheduling["priorityClass"] = self.priority_class
        if scheduling:
            policy["schedulingPolicy"] = scheduling
        return policy


def pytorchjob_max_name_length(workers: int) -> int:
    """Longest PyTorchJob name whose per-replica Services (``<name>-worker-<i>``) stay DNS-1035 labels."""
    suffix = f"-worker-{workers - 1}" if workers > 0 else "-master-0"
    return 63 - max(len(suffix), len("-master-0"))


def build_pytorchjob(
    spec: PyTorchJobSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The kubeflow.org/v1 PyTorchJob; run labels go on the job and on every replica's pod template."""
    ours = dict(labels or {})
    ours_annotations = dict(annotations or {})
    metadata = object_meta(
        "PyTorchJob",
        name,
        namespace,
        _workload_labels(spec.labels, ours, spec.queue_name),
        {**spec.annotations, **ours_annotations},
        max_name_length=pytorchjob_max_name_length(spec.workers),
    )

    def replica(pod: PodTemplate, replicas: int) -> dict[str, Any]:
        template = build_pod_template(
            pod, labels=ours, annotations=ours_annotations, container_name=PYTORCH_CONTAINER
        )
        return {"replicas": replicas, "restartPolicy": spec.restart_policy, "template": template}

    replica_specs = {"Master": replica(spec.master, 1)}
    if spec.workers:
        replica_specs["Worker"] = replica(spec.worker_pod, spec.workers)
    body: dict[str, Any] = {"runPolicy": spec.run_policy()}
    if spec.nproc_per_node is not None:
        body["nprocPerNode"] = str(spec.nproc_per_node)
    body["pytorchReplicaSpecs"] = replica_specs
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata, "spec": body}
