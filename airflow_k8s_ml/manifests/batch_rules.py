"""What makes the arguments of a batch-inference run (CronJob or Job) valid, as plain functions.

Why apart from :mod:`~airflow_k8s_ml.manifests.batch`: ``BatchInferenceCronJobOperator`` checks its static
arguments on every DAG parse, in a fresh dag-processor fork, where the typed spec and the pod builder cost
milliseconds to import (see :mod:`~airflow_k8s_ml.manifests.pod_rules`). :class:`BatchInferenceSpec` applies
exactly this function in ``__post_init__``, so a parse-time check and a built spec can never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.manifests._jobs import check_job_options
from airflow_k8s_ml.manifests.cron import parse_schedule, validate_time_zone
from airflow_k8s_ml.manifests.formats import validate_annotations, validate_labels
from airflow_k8s_ml.manifests.validation import (
    check_bool,
    check_choice,
    check_int,
    check_non_empty_str,
    check_optional_int,
    with_defaults,
)

__all__ = ["BATCH_DEFAULTS", "BATCH_URIS", "check_batch_fields"]

#: The URIs a batch run reads and writes (required; injected as ``MODEL_URI``/``INPUT_URI``/``OUTPUT_URI``).
BATCH_URIS = ("model_uri", "input_uri", "output_uri")
#: The fields of :class:`~airflow_k8s_ml.manifests.batch.BatchInferenceSpec` but ``pod`` and the URIs, with
#: their defaults. ``tests/unit/test_manifests_batch.py`` checks that the two stay the same.
BATCH_DEFAULTS: Mapping[str, Any] = {
    "schedule": None,
    "time_zone": None,
    "concurrency_policy": "Forbid",
    "starting_deadline_seconds": None,
    "successful_jobs_history_limit": 3,
    "failed_jobs_history_limit": 1,
    "suspend": False,
    "backoff_limit": 2,
    "restart_policy": "Never",
    "active_deadline_seconds": None,
    "ttl_seconds_after_finished": None,
    "labels": {},
    "annotations": {},
}


def check_batch_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """Check a batch run's arguments (the URIs and any of :data:`BATCH_DEFAULTS`); return all, normalised."""
    batch = with_defaults(values, BATCH_DEFAULTS, BATCH_URIS)
    for name in BATCH_URIS:
        check_non_empty_str(batch.get(name), name)
    if batch["schedule"] is not None:
        parse_schedule(batch["schedule"], "schedule")
    validate_time_zone(batch["time_zone"], "time_zone")
    check_choice(batch["concurrency_policy"], ("Allow", "Forbid", "Replace"), "concurrency_policy")
    check_optional_int(batch["starting_deadline_seconds"], "starting_deadline_seconds", minimum=0)
    check_int(batch["successful_jobs_history_limit"], "successful_jobs_history_limit", minimum=0)
    check_int(batch["failed_jobs_history_limit"], "failed_jobs_history_limit", minimum=0)
    check_bool(batch["suspend"], "suspend")
    check_int(batch["backoff_limit"], "backoff_limit", minimum=0)
    check_job_options(
        restart_policy=batch["restart_policy"],
        backoff_limit=batch["backoff_limit"],
        active_deadline_seconds=batch["active_deadline_seconds"],
        ttl_seconds_after_finished=batch["ttl_seconds_after_finished"],
    )
    batch["labels"] = validate_labels(batch["labels"], "labels")
    batch["annotations"] = validate_annotations(batch["annotations"], "annotations")
    return batch
