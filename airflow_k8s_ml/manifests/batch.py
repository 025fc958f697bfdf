"""Scheduled batch inference: a batch/v1 CronJob, its run-now Job, and the Airflow-scheduled Job equivalent.

Why the labels are split: the CronJob is long-lived and re-applied by every DAG run, so the run identity goes
on the CronJob's own metadata only. Its job template carries stable labels (``airflow-k8s-ml/cronjob``);
otherwise every Job the CronJob controller creates on schedule would look like the last DAG run's workload
and could be adopted by mistake. A run-now Job gets the run labels added by :func:`job_from_cronjob`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_k8s_ml.manifests._jobs import job_spec
from airflow_k8s_ml.manifests.batch_rules import BATCH_DEFAULTS, BATCH_URIS, check_batch_fields
from airflow_k8s_ml.manifests.cron import next_schedule_time, validate_schedule
from airflow_k8s_ml.manifests.formats import validate_annotations, validate_labels, validate_name
from airflow_k8s_ml.manifests.naming import (
    ANNOTATION_PREFIX,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    merge_labels,
    object_meta,
)
from airflow_k8s_ml.manifests.pod import PodTemplate, build_pod_template
from airflow_k8s_ml.manifests.validation import fail, store_checked

__all__ = [
    "BATCH_CONTAINER",
    "CRONJOB_LABEL",
    "INSTANTIATE_ANNOTATION",
    "BatchInferenceSpec",
    "build_batch_job",
    "build_cronjob",
    "job_from_cronjob",
    "next_schedule_time",
    "validate_schedule",
]

CRONJOB_LABEL = f"{ANNOTATION_PREFIX}cronjob"
INSTANTIATE_ANNOTATION = "cronjob.kubernetes.io/instantiate"
BATCH_CONTAINER = "main"
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class BatchInferenceSpec:
    """Batch prediction over ``input_uri`` into ``output_uri`` with the model at ``model_uri``.

    The three URIs are injected as ``MODEL_URI``/``INPUT_URI``/``OUTPUT_URI``. ``schedule`` is only needed for
    the CronJob form. ``concurrency_policy`` defaults to ``Forbid`` (not Kubernetes' ``Allow``): two batch
    runs writing the same output prefix is a data race. ``backoff_limit`` defaults to 2 because nothing above
    a CronJob retries.
    """

    pod: PodTemplate
    model_uri: str
    input_uri: str
    output_uri: str
    schedule: str | None = None
    time_zone: str | None = None
    concurrency_policy: str = "Forbid"
    starting_deadline_seconds: int | None = None
    successful_jobs_history_limit: int = 3
    failed_jobs_history_limit: int = 1
    suspend: bool = False
    backoff_limit: int = 2
    restart_policy: str = "Never"
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.pod, PodTemplate):
            raise fail("pod", f"must be a PodTemplate, got {type(self.pod).__name__}")
        values = {name: getattr(self, name) for name in (*BATCH_URIS, *BATCH_DEFAULTS)}
        store_checked(self, check_batch_fields(values))

    def env(self) -> dict[str, str]:
        return {"MODEL_URI": self.model_uri, "INPUT_URI": self.input_uri, "OUTPUT_URI": self.output_uri}


def _job_body(
    spec: BatchInferenceSpec, template_labels: Mapping[str, str], template_annotations: Any
) -> dict[str, Any]:
    template = build_pod_template(
        spec.pod,
        labels=template_labels,
        annotations=template_annotations,
        restart_policy=spec.restart_policy,
        container_name=BATCH_CONTAINER,
        extra_env=spec.env(),
    )
    return job_spec(
        template=template,
        backoff_limit=spec.backoff_limit,
        active_deadline_seconds=spec.active_deadline_seconds,
        ttl_seconds_after_finished=spec.ttl_seconds_after_finished,
    )


def build_cronjob(
    spec: BatchInferenceSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """batch/v1 CronJob (name <= 52 characters). ``labels``/``annotations`` go on the CronJob only."""
    if spec.schedule is None:
        raise fail("schedule", "is required for a CronJob")
    validate_schedule(spec.schedule, spec.time_zone)
    metadata = object_meta(
        "CronJob",
        name,
        namespace,
        merge_labels(dict(labels or {}), spec.labels, "labels"),
        {**spec.annotations, **dict(annotations or {})},
    )
    stable = {MANAGED_BY_LABEL: MANAGED_BY, CRONJOB_LABEL: name}
    body: dict[str, Any] = {"schedule": spec.schedule}
    if spec.time_zone is not None:
        body["timeZone"] = spec.time_zone
    body["concurrencyPolicy"] = spec.concurrency_policy
    if spec.starting_deadline_seconds is not None:
        body["startingDeadlineSeconds"] = spec.starting_deadline_seconds
    body["successfulJobsHistoryLimit"] = spec.successful_jobs_history_limit
    body["failedJobsHistoryLimit"] = spec.failed_jobs_history_limit
    body["suspend"] = spec.suspend
    body["jobTemplate"] = {"metadata": {"labels": dict(stable)}, "spec": _job_body(spec, stable, None)}
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": metadata, "spec": body}


def build_batch_job(
    spec: BatchInferenceSpec,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The same batch work as a plain Job, once per DAG run (Airflow owns schedule, backfills, retries)."""
    ours = dict(labels or {})
    ours_annotations = dict(annotations or {})
    metadata = object_meta(
        "Job",
        name,
        namespace,
        merge_labels(ours, spec.labels, "labels"),
        {**spec.annotations, **ours_annotations},
    )
    body = _job_body(spec, ours, ours_annotations)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": body}


def job_from_cronjob(
    cronjob: Mapping[str, Any],
    job_name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    block_owner_deletion: bool = True,
) -> dict[str, Any]:
    """A Job the way ``kubectl create job <job_name> --from=cronjob/<name>`` builds it.

    Template spec, labels and annotations are copied; annotation ``cronjob.kubernetes.io/instantiate: manual``
    is added (template annotations win on a clash, as in kubectl) and a controller ownerReference points at
    the CronJob, so deleting the CronJob garbage-collects the Job. ``cronjob`` must come from the API server
    (it needs ``metadata.uid``). Differences from kubectl, both deliberate: ``blockOwnerDeletion`` is set (as
    the CronJob controller does for its own Jobs; pass False for clusters enforcing OwnerReferencesPermission
    without finalizer rights), and ``labels``/``annotations`` (the run identity) are merged on top.
    """
    if not isinstance(cronjob, Mapping) or cronjob.get("kind") != "CronJob":
        raise fail("cronjob", "must be a batch/v1 CronJob object")
    meta = cronjob.get("metadata") or {}
    cronjob_name = meta.get("name")
    uid = meta.get("uid")
    if not cronjob_name or not uid:
        raise fail(
            "cronjob", "metadata.name and metadata.uid are required: read the CronJob from the API first"
        )
    template = (cronjob.get("spec") or {}).get("jobTemplate") or {}
    if "spec" not in template:
        raise fail("cronjob", "spec.jobTemplate.spec is missing")
    validate_name("Job", job_name, "job_name")
    template_meta = template.get("metadata") or {}
    job_annotations = {INSTANTIATE_ANNOTATION: "manual", **(template_meta.get("annotations") or {})}
    job_annotations.update(validate_annotations(annotations or {}, "annotations"))
    job_labels = {**(template_meta.get("labels") or {}), **validate_labels(labels or {}, "labels")}
    owner: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "name": cronjob_name,
        "uid": uid,
        "controller": True,
    }
    if block_owner_deletion:
        owner["blockOwnerDeletion"] = True
    metadata: dict[str, Any] = {"name": job_name}
    if meta.get("namespace"):
        metadata["namespace"] = meta["namespace"]
    if job_labels:
        metadata["labels"] = job_labels
    metadata["annotations"] = job_annotations
    metadata["ownerReferences"] = [owner]
    spec = copy.deepcopy(template["spec"])
    if labels:
        # The run identity also goes on the pods: log streaming and adoption find them by the same selector.
        pod_meta = spec.setdefault("template", {}).setdefault("metadata", {})
        pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **dict(labels)}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": spec}
