"""Admission of TrainingRuntimes and ClusterTrainingRuntimes: the CRDs' field types (422), then Kubeflow
Trainer's validating webhooks (``validateReplicatedJobs``; updates are accepted as upstream's are)."""

from __future__ import annotations

from collections.abc import Callable

from ... import errors
from ..crd_types import check_fields, check_type
from ..jobset.admission import spec_type_errors
from ..webhook import FieldError, denial, invalid, render_value
from .api import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    CLUSTER_TRAINING_RUNTIME,
    DATASET_INITIALIZER,
    GROUP,
    MODEL_INITIALIZER,
    NODE,
    WEBHOOK_CLUSTER_TRAINING_RUNTIME,
    WEBHOOK_TRAINING_RUNTIME,
    Obj,
)

_EXPECTED_CONTAINER = {
    ANCESTOR_TRAINER: NODE,
    DATASET_INITIALIZER: DATASET_INITIALIZER,
    MODEL_INITIALIZER: MODEL_INITIALIZER,
}


def runtime_errors(runtime: Obj) -> list[FieldError]:
    """``validateReplicatedJobs``: initializer and trainer jobs have one replica and their container."""
    base = "spec.template.spec.replicatedJobs"
    rjobs = (((runtime.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "replicatedJobs"
    ) or []
    problems: list[FieldError] = []
    for index, rjob in enumerate(rjobs):
        labels = ((rjob.get("template") or {}).get("metadata") or {}).get("labels")
        step = (labels or {}).get(ANCESTOR_LABEL)
        if step not in _EXPECTED_CONTAINER:
            continue
        replicas = rjob.get("replicas", 1)
        if replicas != 1:
            problems.append(invalid(f"{base}[{index}].replicas", str(replicas), "always must be 1"))
        pod = ((rjob.get("template") or {}).get("spec") or {}).get("template") or {}
        containers = (pod.get("spec") or {}).get("containers") or []
        if not any(c.get("name") == _EXPECTED_CONTAINER[step] for c in containers):
            problems.append(
                invalid(
                    f"{base}[{index}].template.spec.template.spec.containers",
                    render_value(containers),
                    f"must contain the required container for the ancestor: {step}",
                )
            )
    return problems


def runtime_admission(kind: str) -> Callable[[Obj, Obj | None], Obj]:
    webhook = (
        WEBHOOK_CLUSTER_TRAINING_RUNTIME if kind == CLUSTER_TRAINING_RUNTIME else WEBHOOK_TRAINING_RUNTIME
    )
    plural = kind.lower() + "s"

    def admit(obj: Obj, old: Obj | None) -> Obj:
        name = (obj.get("metadata") or {}).get("name", "")
        spec = obj.get("spec", {})
        typed = check_type("spec", spec, "object")
        if not typed:
            typed = check_fields(spec, "spec", {"mlPolicy": "object", "template": "object"})
            typed += check_fields(
                spec.get("mlPolicy"), "spec.mlPolicy", {"numNodes": "integer", "torch": "object"}
            )
            template = spec.get("template")
            if isinstance(template, dict) and "spec" in template:
                typed += spec_type_errors(template["spec"], "spec.template.spec")
        if typed:
            raise errors.invalid(kind, GROUP, plural, name, typed)
        if old is not None:  # ValidateUpdate accepts everything
            return obj
        problems = runtime_errors(obj)
        if problems:
            raise denial(webhook, GROUP, plural, name, problems)
        return obj

    return admit
