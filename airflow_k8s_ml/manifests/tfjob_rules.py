"""What makes the arguments of a kubeflow.org/v1 ``TFJob`` valid, as plain functions.

Why apart from :mod:`~airflow_k8s_ml.manifests.tfjob`: the operator checks its static arguments on every DAG
parse, in a fresh fork of the dag processor; these rules import no dataclass (see
:mod:`~airflow_k8s_ml.manifests.pod_rules`). The spec applies the same functions in ``__post_init__``.

The replica types are training-operator 1.9's: one ``Chief`` (the coordinator; without it Worker 0 is),
``workers`` Workers, ``ps`` parameter servers and an optional ``Evaluator``. ``success_policy`` is the
TFJob's: ``""`` (the job succeeds with the Chief, or without one when Worker 0 exits 0) or ``AllWorkers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_k8s_ml.manifests.formats import validate_annotations, validate_labels
from airflow_k8s_ml.manifests.training_rules import CLEAN_POD_POLICIES, PYTORCH_RESTART_POLICIES, check_queue
from airflow_k8s_ml.manifests.validation import (
    check_bool,
    check_choice,
    check_int,
    check_optional_int,
    fail,
    with_defaults,
)

__all__ = [
    "SUCCESS_POLICIES",
    "TFJOB_DEFAULTS",
    "TF_CONTAINER",
    "TF_REPLICA_TYPES",
    "TF_RESTART_POLICIES",
    "check_tfjob_fields",
    "tfjob_max_name_length",
]

#: The training operator requires the training container to be named ``tensorflow``.
TF_CONTAINER = "tensorflow"
TF_REPLICA_TYPES = ("Chief", "Evaluator", "Master", "PS", "Worker")
TF_RESTART_POLICIES = PYTORCH_RESTART_POLICIES  # the v1 ReplicaSpec's: Always, OnFailure, Never, ExitCode
SUCCESS_POLICIES = ("", "AllWorkers")
_INT32_MAX = 2**31 - 1

#: The fields of :class:`~airflow_k8s_ml.manifests.tfjob.TFJobSpec` but the pods.
TFJOB_DEFAULTS: Mapping[str, Any] = {
    "workers": 1,
    "ps": 0,
    "chief": True,
    "evaluator": False,
    "success_policy": "",
    "restart_policy": "Never",
    "backoff_limit": None,
    "active_deadline_seconds": None,
    "ttl_seconds_after_finished": None,
    "clean_pod_policy": "Running",
    "queue_name": None,
    "suspend": None,
    "labels": {},
    "annotations": {},
}


def tfjob_max_name_length(workers: int, ps: int) -> int:
    """Longest TFJob name whose per-replica pods and Services (``<name>-<type>-<i>``) stay DNS-1035 labels."""
    suffixes = ["-chief-0", "-evaluator-0"]
    if workers > 0:
        suffixes.append(f"-worker-{workers - 1}")
    if ps > 0:
        suffixes.append(f"-ps-{ps - 1}")
    return 63 - max(len(s) for s in suffixes)


def check_tfjob_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """Check a TFJob's arguments (any of :data:`TFJOB_DEFAULTS`); return all, normalised."""
    job = with_defaults(values, TFJOB_DEFAULTS)
    workers = check_int(job["workers"], "workers", minimum=0)
    ps = check_int(job["ps"], "ps", minimum=0)
    check_bool(job["chief"], "chief")
    check_bool(job["evaluator"], "evaluator")
    if not job["chief"] and workers == 0:
        raise fail("workers", "must be at least 1 without a chief: Worker 0 is the coordinator then")
    if ps > 0 and workers == 0:
        raise fail("ps", "parameter servers need workers (workers >= 1)")
    check_choice(job["success_policy"], SUCCESS_POLICIES, "success_policy")
    if job["success_policy"] == "AllWorkers" and job["chief"]:
        raise fail("success_policy", "'AllWorkers' applies only without a chief (chief=False)")
    check_choice(job["restart_policy"], TF_RESTART_POLICIES, "restart_policy")
    check_optional_int(job["backoff_limit"], "backoff_limit", minimum=0, maximum=_INT32_MAX)
    check_optional_int(job["active_deadline_seconds"], "active_deadline_seconds", minimum=1)
    check_optional_int(job["ttl_seconds_after_finished"], "ttl_seconds_after_finished", minimum=0)
    check_choice(job["clean_pod_policy"], CLEAN_POD_POLICIES, "clean_pod_policy")
    check_queue(job["queue_name"], job["suspend"])
    job["labels"] = validate_labels(job["labels"], "labels")
    job["annotations"] = validate_annotations(job["annotations"], "annotations")
    return job
