"""Kubernetes names and the labels that tie a workload to one Airflow task instance.

Why deterministic names: submit-or-adopt. A retry after a worker crash must find the workload the first try
created instead of launching a second GPU job, so the name (and the labels, the fallback lookup) must be a
pure function of ``(dag_id, task_id, run_id, map_index, attempt)``. Names stay readable (a slug of dag and
task id) and unique (a short hash of the full task-instance identity), and fit each kind's length limit.

Why sanitised labels *and* raw annotations: label values are limited to 63 characters of ``[A-Za-z0-9._-]``
(Airflow run ids like ``manual__2024-01-01T00:00:00+00:00`` are not), so labels carry a sanitised, still
unique form for selectors and annotations carry the exact values for humans and for adoption checks.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from airflow_k8s_ml.k8s.kinds import WORKLOAD_KINDS
from airflow_k8s_ml.k8s.selectors import format_label_selector
from airflow_k8s_ml.manifests.formats import (
    LABEL_VALUE_MAX,
    is_label_value,
    validate_annotations,
    validate_labels,
    validate_name,
    validate_namespace,
)
from airflow_k8s_ml.manifests.validation import check_int, check_non_empty_str, fail

__all__ = [
    "ANNOTATION_PREFIX",
    "ATTEMPT_LABEL",
    "DAG_ID_LABEL",
    "GENERATED_NAME_MAX",
    "MANAGED_BY",
    "MANAGED_BY_LABEL",
    "MAP_INDEX_LABEL",
    "RUN_ID_LABEL",
    "TASK_ID_LABEL",
    "RunKey",
    "manual_job_name",
    "merge_labels",
    "object_meta",
    "run_annotations",
    "run_labels",
    "sanitize_label_value",
    "workload_name",
]

#: Lengths of the names :func:`workload_name` generates, per kind (why each: the comment on
#: :data:`~airflow_k8s_ml.k8s.kinds.WORKLOAD_KINDS`).
GENERATED_NAME_MAX: dict[str, int] = {
    k.kind: k.generated_name_max for k in WORKLOAD_KINDS if k.generated_name_max is not None
}


def _digest(*parts: object, length: int) -> str:
    """Stable short hash of JSON-encoded parts (JSON so ("a-b", "c") and ("a", "b-c") differ)."""
    data = json.dumps(parts, separators=(",", ":"), ensure_ascii=False).encode()
    return hashlib.sha256(data).hexdigest()[:length]


def sanitize_label_value(value: str) -> str:
    """Make ``value`` a valid label value, deterministically and without collisions in practice.

    A valid value is returned unchanged. Otherwise invalid characters become ``-``, the ends are trimmed to
    alphanumerics, and an 8-hex-digit hash of the *original* value is appended, so two run ids that differ
    only in characters we replaced (``...T00:00`` vs ``...T00-00``) still get different labels.
    """
    if is_label_value(value):
        return value
    digest = _digest(value, length=8)
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip("-._")
    head = cleaned[: LABEL_VALUE_MAX - len(digest) - 1].rstrip("-._")
    return f"{head}-{digest}" if head else digest


# --- the task-instance identity --------------------------------------------------------------------------

ANNOTATION_PREFIX = "airflow-k8s-ml/"
DAG_ID_LABEL = "airflow-k8s-ml/dag-id"
TASK_ID_LABEL = "airflow-k8s-ml/task-id"
RUN_ID_LABEL = "airflow-k8s-ml/run-id"
MAP_INDEX_LABEL = "airflow-k8s-ml/map-index"
ATTEMPT_LABEL = "airflow-k8s-ml/attempt"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "airflow-k8s-ml"

#: Label value for an unmapped task (``map_index == -1``): "-1" is not a valid label value.
UNMAPPED = "none"


@dataclass(frozen=True, slots=True)
class RunKey:
    """The Airflow task instance (plus attempt) a workload belongs to.

    ``attempt`` counts *workload launches* for this task instance (normally Airflow's try number): a retry
    after a failed workload gets a new name, while a retry after a worker crash reuses the same key to adopt.
    """

    dag_id: str
    task_id: str
    run_id: str
    map_index: int = -1
    attempt: int = 1

    def __post_init__(self) -> None:
        check_non_empty_str(self.dag_id, "dag_id")
        check_non_empty_str(self.task_id, "task_id")
        check_non_empty_str(self.run_id, "run_id")
        check_int(self.map_index, "map_index", minimum=-1)
        check_int(self.attempt, "attempt", minimum=1)

    def task_instance_labels(self) -> dict[str, str]:
        """Labels shared by every attempt of this task instance: the selector to find earlier attempts."""
        return {
            MANAGED_BY_LABEL: MANAGED_BY,
            DAG_ID_LABEL: sanitize_label_value(self.dag_id),
            TASK_ID_LABEL: sanitize_label_value(self.task_id),
            RUN_ID_LABEL: sanitize_label_value(self.run_id),
            MAP_INDEX_LABEL: str(self.map_index) if self.map_index >= 0 else UNMAPPED,
        }

    def labels(self) -> dict[str, str]:
        """Labels for this attempt's workload (and its pods)."""
        return {**self.task_instance_labels(), ATTEMPT_LABEL: str(self.attempt)}

    def annotations(self) -> dict[str, str]:
        """The exact values, which labels may only carry in sanitised form."""
        return {
            DAG_ID_LABEL: self.dag_id,
            TASK_ID_LABEL: self.task_id,
            RUN_ID_LABEL: self.run_id,
            MAP_INDEX_LABEL: str(self.map_index),
            ATTEMPT_LABEL: str(self.attempt),
        }

    def label_selector(self, *, include_attempt: bool = False) -> str:
        """``k=v,k=v`` selector string for list/watch calls."""
        labels = self.labels() if include_attempt else self.task_instance_labels()
        return format_label_selector(labels)

    def identity_digest(self, length: int = 10) -> str:
        """Short stable hash of the task instance (not the attempt): shared by all attempts' names."""
        return _digest(self.dag_id, self.task_id, self.run_id, self.map_index, length=length)

    def workload_name(self, kind: str = "Job", *, max_length: int | None = None) -> str:
        """``<slug of dag-task>-<hash>-a<attempt>``, DNS-1035 (valid for every kind), within the kind's limit.

        The hash covers dag, task, run and map index, so all attempts of one task instance share it
        (``kubectl get jobs | grep <hash>``); the visible attempt suffix makes each launch distinct.
        """
        limit = max_length if max_length is not None else GENERATED_NAME_MAX.get(kind, 63)
        suffix = f"-{self.identity_digest()}-a{self.attempt}"
        if limit < len(suffix) + 1:
            raise fail("max_length", f"{limit} is too short for a generated name (need > {len(suffix)})")
        slug = _slug(f"{self.dag_id}-{self.task_id}")
        head = slug[: limit - len(suffix)].rstrip("-")
        return f"{head}{suffix}"

    def next_attempt(self) -> RunKey:
        return replace(self, attempt=self.attempt + 1)


def _slug(text: str) -> str:
    """Lowercase DNS-1035-friendly slug; prefixed with ``w-`` when it would not start with a letter."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if not slug or not slug[0].isalpha():
        slug = f"w-{slug}".rstrip("-")
    return slug


def merge_labels(ours: Mapping[str, str], user: Mapping[str, str], field_name: str) -> dict[str, str]:
    """User labels plus ours; the user may not set keys under our prefix (they drive adoption)."""
    for key in user:
        if key.startswith(ANNOTATION_PREFIX) and key in ours and user[key] != ours[key]:
            raise fail(f"{field_name}[{key}]", f"is reserved for airflow-k8s-ml (would be {ours[key]!r})")
    return {**user, **ours}


def run_labels(
    dag_id: str, task_id: str, run_id: str, map_index: int = -1, attempt: int = 1
) -> dict[str, str]:
    """Labels ``airflow-k8s-ml/{dag-id,task-id,run-id,map-index,attempt}`` + ``app.kubernetes.io/managed-by``.

    Every value is a valid label value (see :func:`sanitize_label_value`); the raw values are in
    :func:`run_annotations`.
    """
    return RunKey(dag_id, task_id, run_id, map_index, attempt).labels()


def run_annotations(
    dag_id: str, task_id: str, run_id: str, map_index: int = -1, attempt: int = 1
) -> dict[str, str]:
    """The raw identity values under the same keys as :func:`run_labels`."""
    return RunKey(dag_id, task_id, run_id, map_index, attempt).annotations()


def workload_name(
    dag_id: str,
    task_id: str,
    run_id: str,
    map_index: int = -1,
    attempt: int = 1,
    *,
    kind: str = "Job",
) -> str:
    """Deterministic name for one attempt of one task instance; see :meth:`RunKey.workload_name`."""
    return RunKey(dag_id, task_id, run_id, map_index, attempt).workload_name(kind)


def manual_job_name(cronjob_name: str, key: RunKey) -> str:
    """Name of a run-now Job created from a CronJob for one task attempt: ``<cronjob>-manual-<hash>``.

    Deterministic (adoptable on retry) and distinct from the controller's ``<cronjob>-<minutes>`` Jobs.
    """
    validate_name("CronJob", cronjob_name, "cronjob_name")
    suffix = f"-manual-{_digest(key.dag_id, key.task_id, key.run_id, key.map_index, key.attempt, length=8)}"
    head = cronjob_name[: GENERATED_NAME_MAX["Job"] - len(suffix)].rstrip("-.")
    return f"{head}{suffix}"


def object_meta(
    kind: str,
    name: str,
    namespace: str,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    *,
    max_name_length: int | None = None,
) -> dict[str, Any]:
    """Validated ``metadata`` for a namespaced object; empty label/annotation maps are left out."""
    meta: dict[str, Any] = {
        "name": validate_name(kind, name, "name", max_length=max_name_length),
        "namespace": validate_namespace(namespace),
    }
    if labels:
        meta["labels"] = validate_labels(labels, "labels")
    if annotations:
        meta["annotations"] = validate_annotations(annotations, "annotations")
    return meta
