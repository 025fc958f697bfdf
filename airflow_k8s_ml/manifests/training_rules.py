"""What makes the workload arguments of a fine-tune Job or a PyTorchJob valid, as plain functions.

Why apart from :mod:`~airflow_k8s_ml.manifests.training`: the training operators check their static
arguments on every DAG parse, which the dag processor runs in a fresh fork; these rules import no dataclass
(see :mod:`~airflow_k8s_ml.manifests.pod_rules` for the why). The specs apply the same functions in
``__post_init__``, so a parse-time check and a built spec can never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.manifests._jobs import check_job_options
from airflow_k8s_ml.manifests.formats import validate_annotations, validate_dns1123_subdomain, validate_labels
from airflow_k8s_ml.manifests.validation import (
    check_bool,
    check_choice,
    check_int,
    check_optional_int,
    fail,
    with_defaults,
)

__all__ = [
    "CLEAN_POD_POLICIES",
    "FINETUNE_JOB_DEFAULTS",
    "KUEUE_QUEUE_LABEL",
    "PYTORCHJOB_DEFAULTS",
    "PYTORCH_RESTART_POLICIES",
    "check_finetune_job_fields",
    "check_pytorchjob_fields",
    "check_queue",
]

#: Kueue finds workloads by this label and admits them by flipping ``suspend`` to false.
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PYTORCH_RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES = ("None", "Running", "All")
_INT32_MAX = 2**31 - 1

#: The fields of :class:`~airflow_k8s_ml.manifests.training.FineTuneJobSpec` but ``pod``, with defaults.
FINETUNE_JOB_DEFAULTS: Mapping[str, Any] = {
    "backoff_limit": 0,
    "restart_policy": "Never",
    "active_deadline_seconds": None,
    "ttl_seconds_after_finished": None,
    "parallelism": 1,
    "completions": 1,
    "queue_name": None,
    "suspend": None,
    "pod_failure_policy": None,
    "labels": {},
    "annotations": {},
}
#: The fields of :class:`~airflow_k8s_ml.manifests.training.PyTorchJobSpec` but ``master`` and ``worker``.
PYTORCHJOB_DEFAULTS: Mapping[str, Any] = {
    "workers": 0,
    "nproc_per_node": None,
    "restart_policy": "OnFailure",
    "backoff_limit": None,
    "active_deadline_seconds": None,
    "ttl_seconds_after_finished": None,
    "clean_pod_policy": "None",
    "queue_name": None,
    "suspend": None,
    "scheduling_queue": None,
    "min_available": None,
    "priority_class": None,
    "labels": {},
    "annotations": {},
}


def check_queue(queue_name: Any, suspend: Any) -> None:
    """Kueue admits a workload by un-suspending it, so one created unsuspended would bypass the queue."""
    if suspend is not None:
        check_bool(suspend, "suspend")
    if queue_name is None:
        return
    validate_dns1123_subdomain(queue_name, "queue_name", max_length=63)
    if suspend is False:
        raise fail(
            "suspend",
            "must not be False with queue_name: Kueue admits a workload by un-suspending it, so it must be "
            "created suspended",
        )


def _check_metadata(job: dict[str, Any]) -> dict[str, Any]:
    job["labels"] = validate_labels(job["labels"], "labels")
    job["annotations"] = validate_annotations(job["annotations"], "annotations")
    return job


def check_finetune_job_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """Check a fine-tune Job's arguments (any of :data:`FINETUNE_JOB_DEFAULTS`); return all, normalised."""
    job = with_defaults(values, FINETUNE_JOB_DEFAULTS)
    check_job_options(
        restart_policy=job["restart_policy"],
        backoff_limit=job["backoff_limit"],
        active_deadline_seconds=job["active_deadline_seconds"],
        ttl_seconds_after_finished=job["ttl_seconds_after_finished"],
        pod_failure_policy=job["pod_failure_policy"],
    )
    check_int(job["backoff_limit"], "backoff_limit", minimum=0)
    check_int(job["parallelism"], "parallelism", minimum=1)
    check_int(job["completions"], "completions", minimum=1)
    check_queue(job["queue_name"], job["suspend"])
    return _check_metadata(job)


def check_pytorchjob_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """Check a PyTorchJob's arguments (any of :data:`PYTORCHJOB_DEFAULTS`); return all, normalised."""
    job = with_defaults(values, PYTORCHJOB_DEFAULTS)
    workers = check_int(job["workers"], "workers", minimum=0)
    nproc = job["nproc_per_node"]
    if isinstance(nproc, str) and not nproc.isdigit():
        check_choice(nproc, ("auto", "cpu", "gpu"), "nproc_per_node")
    elif nproc is not None:
        check_int(int(nproc) if isinstance(nproc, str) else nproc, "nproc_per_node", minimum=1)
    check_choice(job["restart_policy"], PYTORCH_RESTART_POLICIES, "restart_policy")
    check_optional_int(job["backoff_limit"], "backoff_limit", minimum=0, maximum=_INT32_MAX)
    check_optional_int(job["active_deadline_seconds"], "active_deadline_seconds", minimum=1)
    check_optional_int(job["ttl_seconds_after_finished"], "ttl_seconds_after_finished", minimum=0)
    check_choice(job["clean_pod_policy"], CLEAN_POD_POLICIES, "clean_pod_policy")
    check_queue(job["queue_name"], job["suspend"])
    if job["scheduling_queue"] is not None:
        validate_dns1123_subdomain(job["scheduling_queue"], "scheduling_queue")
    check_optional_int(job["min_available"], "min_available", minimum=1, maximum=1 + workers)
    if job["priority_class"] is not None:
        validate_dns1123_subdomain(job["priority_class"], "priority_class")
    return _check_metadata(job)
