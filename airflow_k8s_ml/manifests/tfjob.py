"""Distributed TensorFlow training as a kubeflow.org/v1 ``TFJob`` (training-operator 1.9): a Chief,
Workers, parameter servers (PS) and an Evaluator, every replica with the same pod.

Why a typed spec: as for the PyTorchJob, the operator turns its (templated) arguments into a frozen spec
once, the spec validates itself (:mod:`.tfjob_rules`), and :func:`build_tfjob` is a pure ``spec -> dict``.
The training operator gives every replica ``TF_CONFIG`` (the cluster spec and its task); nothing here sets
it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_k8s_ml.manifests.naming import merge_labels, object_meta
from airflow_k8s_ml.manifests.pod import PodTemplate, build_pod_template
from airflow_k8s_ml.manifests.tfjob_rules import (
    TF_CONTAINER,
    TFJOB_DEFAULTS,
    check_tfjob_fields,
    tfjob_max_name_length,
)
from airflow_k8s_ml.manifests.training_rules import KUEUE_QUEUE_LABEL
from airflow_k8s_ml.manifests.validation import fail, store_checked

__all__ = ["TFJobSpec", "build_tfjob"]


@dataclass(frozen=True, slots=True)
class TFJobSpec:
    """A TFJob: a Chief (``chief``), ``workers`` Workers, ``ps`` parameter servers and an Evaluator
    (``evaluator``), all running ``pod``.

    ``clean_pod_policy`` defaults to ``Running`` (upstream: ``None``): parameter servers serve until they are
    stopped, so with ``None`` they would keep running, and holding their resources, after the job succeeded.
    ``restart_policy`` defaults to upstream's ``Never``: Airflow's retries own retrying. ``queue_name`` is
    Kueue (label + ``runPolicy.suspend``).
    """

    pod: PodTemplate
    workers: int = 1
    ps: int = 0
    chief: bool = True
    evaluator: bool = False
    success_policy: str = ""
    restart_policy: str = "Never"
    backoff_limit: int | None = None
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    clean_pod_policy: str = "Running"
    queue_name: str | None = None
    suspend: bool | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.pod, PodTemplate):
            raise fail("pod", f"must be a PodTemplate, got {type(self.pod).__name__}")
        values = {name: getattr(self, name) for name in TFJOB_DEFAULTS}
        store_checked(self, check_tfjob_fields(values))

    @property
    def effective_suspend(self) -> bool:
        return self.suspend if self.suspend is not None else self.queue_name is not None

    def replicas(self) -> dict[str, int]:
        """Replica type -> count, in training-operator's order; absent types are left out."""
        counts = {"Chief": int(self.chief), "Evaluator": int(self.evaluator), "PS": self.ps}
        counts["Worker"] = self.workers
        return {rtype: n for rtype, n in counts.items() if n > 0}

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
        return policy


def build_tfjob(
    spec: TFJobSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The kubeflow.org/v1 TFJob; run labels go on the job and on every replica's pod template."""
    ours = dict(labels or {})
    ours_annotations = dict(annotations or {})
    job_labels = merge_labels(dict(ours), spec.labels, "labels")
    if spec.queue_name is not None:
        job_labels[KUEUE_QUEUE_LABEL] = spec.queue_name
    metadata = object_meta(
        "TFJob",
        name,
        namespace,
        job_labels,
        {**spec.annotations, **ours_annotations},
        max_name_length=tfjob_max_name_length(spec.workers, spec.ps),
    )
    template = build_pod_template(
        spec.pod, labels=ours, annotations=ours_annotations, container_name=TF_CONTAINER
    )
    replica_specs = {
        rtype: {"replicas": count, "restartPolicy": spec.restart_policy, "template": template}
        for rtype, count in spec.replicas().items()
    }
    body: dict[str, Any] = {"runPolicy": spec.run_policy(), "successPolicy": spec.success_policy}
    body["tfReplicaSpecs"] = replica_specs
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": metadata, "spec": body}
