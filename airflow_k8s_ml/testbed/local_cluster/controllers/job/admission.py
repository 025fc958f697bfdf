"""Create/update admission for batch/v1 Jobs: upstream's defaulting (``SetDefaults_Job``), selector
generation (``jobStrategy.PrepareForCreate``) and validation, so that the object a POST returns already
looks like a real cluster's: generated selector, the four template labels, every defaulted field.
"""

from __future__ import annotations

import copy

from ... import errors
from ...store import Obj
from .validation import (
    CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
    validate_job,
    validate_job_update,
)

DEFAULT_BACKOFF_LIMIT = 6
MAX_INT32 = 2**31 - 1


def set_defaults(job: Obj) -> None:
    """``SetDefaults_Job`` (pkg/apis/batch/v1/defaults.go); runs on every write, like decoding does."""
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = (
            MAX_INT32 if spec.get("backoffLimitPerIndex") is not None else DEFAULT_BACKOFF_LIMIT
        )
    spec.setdefault("completionMode", "NonIndexed")
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        for pattern in rule.get("onPodConditions") or []:
            pattern.setdefault("status", "True")
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = (
            "Failed" if spec.get("podFailurePolicy") is not None else "TerminatingOrFailed"
        )
    _default_job_labels(job)


def _default_job_labels(job: Obj) -> None:
    """A Job without labels gets its template's labels (which, after generation, include the uid/name)."""
    template_labels = ((job["spec"].get("template") or {}).get("metadata") or {}).get("labels")
    meta = job.setdefault("metadata", {})
    if template_labels and not meta.get("labels"):
        meta["labels"] = dict(template_labels)


def generate_selector(job: Obj) -> None:
    """Add the job-name / controller-uid labels (new and legacy keys) to the template unless present, and
    select on ``batch.kubernetes.io/controller-uid``; conflicting user values are left for validation."""
    meta = job.get("metadata") or {}
    name, uid = meta.get("name", ""), meta.get("uid", "")
    template = job["spec"].setdefault("template", {})
    labels = template.setdefault("metadata", {}).setdefault("labels", {})
    for key in (LEGACY_JOB_NAME_LABEL, JOB_NAME_LABEL):
        labels.setdefault(key, name)
    for key in (LEGACY_CONTROLLER_UID_LABEL, CONTROLLER_UID_LABEL):
        labels.setdefault(key, uid)
    template["metadata"]["labels"] = dict(sorted(labels.items()))  # Go serializes maps key-sorted
    selector = job["spec"].get("selector") or {}
    match_labels = selector.setdefault("matchLabels", {})
    match_labels.setdefault(CONTROLLER_UID_LABEL, uid)
    selector["matchLabels"] = dict(sorted(match_labels.items()))
    job["spec"]["selector"] = selector


def admit_job(obj: Obj, old: Obj | None) -> Obj:
    """The cluster's admission hook for jobs: returns the object to store or raises 422 Invalid."""
    job = copy.deepcopy(obj)
    meta = job.setdefault("metadata", {})
    if old is None:
        # The cluster assigns metadata.uid before admission (as the apiserver fills system fields before
        # PrepareForCreate), so the generated selector can name it.
        job["spec"] = job.get("spec") or {}
        if not job["spec"].get("manualSelector"):
            generate_selector(job)
    set_defaults(job)
    causes = validate_job(job) if old is None else validate_job(job) + validate_job_update(job, old)
    if causes:
        raise errors.invalid("Job", "batch", "jobs", meta.get("name", ""), _dedupe(causes))
    return job


def _dedupe(causes: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    seen: set[tuple[str, str, str]] = set()
    unique = []
    for cause in causes:
        if cause not in seen:
            seen.add(cause)
            unique.append(cause)
    return unique


__all__ = ["admit_job", "generate_selector", "set_defaults"]
