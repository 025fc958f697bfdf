"""Pure helpers of the CronJob controller: the Job it creates for a scheduled time, which Jobs are its
children, the ``status.active`` list, and which finished Jobs exceed the history limits.

Ports of pkg/controller/cronjob (utils.go, ``getJobsToBeReconciled``, ``cleanupFinishedJobs``) kept apart
from the controller's I/O so each rule can be read (and tested) against upstream on its own.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import datetime, tzinfo
from typing import Any

from ...meta import controller_ref, owner_reference, parse_time

Obj = dict[str, Any]

SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
INSTANTIATE_ANNOTATION = "cronjob.kubernetes.io/instantiate"  # "manual": kubectl create job --from=cronjob/x
COMPLETE, FAILED = "Complete", "Failed"


def job_name(cronjob: Mapping[str, Any], scheduled: datetime) -> str:
    """``getJobName``: minutes since the epoch, so one scheduled time can only ever make one Job."""
    return f"{cronjob['metadata']['name']}-{int(scheduled.timestamp()) // 60}"


def job_from_template(cronjob: Mapping[str, Any], scheduled: datetime, zone: tzinfo) -> Obj:
    """``getJobFromTemplate2``: the template's labels, annotations and spec, the scheduled-timestamp
    annotation in the CronJob's time zone, and a controller ownerReference (blockOwnerDeletion)."""
    template = cronjob["spec"].get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    annotations[SCHEDULED_TIMESTAMP_ANNOTATION] = go_rfc3339(scheduled.astimezone(zone))
    metadata: Obj = {
        "name": job_name(cronjob, scheduled),
        "namespace": cronjob["metadata"]["namespace"],
        "annotations": annotations,
        "ownerReferences": [owner_reference(dict(cronjob), controller=True, block=True)],
    }
    if template_meta.get("labels"):
        metadata["labels"] = dict(template_meta["labels"])
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": copy.deepcopy(template.get("spec") or {}),
    }


def go_rfc3339(moment: datetime) -> str:
    """Go's ``time.RFC3339`` formatting: seconds, ``Z`` for a zero offset, else ``+01:00``."""
    text = moment.isoformat(timespec="seconds")
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def go_rfc1123z(moment: datetime) -> str:
    """Go's ``time.RFC1123Z`` (what MissSchedule quotes), always in UTC here."""
    return moment.strftime("%a, %d %b %Y %H:%M:%S +0000")


def job_reference(job: Mapping[str, Any]) -> Obj:
    """``ref.GetReference`` of a Job, as ``status.active`` holds it."""
    meta = job["metadata"]
    return {
        "kind": "Job",
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "uid": meta.get("uid"),
        "apiVersion": "batch/v1",
        "resourceVersion": meta.get("resourceVersion"),
    }


def is_child_of(job: Mapping[str, Any], cronjob: Mapping[str, Any]) -> bool:
    """``getJobsToBeReconciled``: upstream matches the controller reference by name only (not kind or
    uid), so manual Jobs from ``kubectl create job --from=cronjob/x`` are children too."""
    ref = controller_ref(dict(job))
    return ref is not None and ref.get("name") == cronjob["metadata"]["name"]


def is_controlled_by(job: Mapping[str, Any], cronjob: Mapping[str, Any]) -> bool:
    """``metav1.IsControlledBy``: the controller reference carries this CronJob's uid."""
    ref = controller_ref(dict(job))
    return ref is not None and ref.get("uid") == cronjob["metadata"].get("uid")


def finished_condition(job: Mapping[str, Any]) -> str | None:
    """``getFinishedStatus``: the type of the first true Complete or Failed condition."""
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in (COMPLETE, FAILED) and condition.get("status") == "True":
            return str(condition["type"])
    return None


def is_succeeded(job: Mapping[str, Any]) -> bool:
    """``jobutil.IsJobSucceeded``: a true Complete condition (anywhere in the list)."""
    return any(
        c.get("type") == COMPLETE and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


# -- status.active -------------------------------------------------------------------------------------
def in_active(status: Mapping[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in status.get("active") or [])


def in_active_by_name(status: Mapping[str, Any], namespace: str, name: str) -> bool:
    return any(
        ref.get("name") == name and ref.get("namespace") == namespace for ref in status.get("active") or []
    )


def remove_active(status: Obj, uid: str) -> None:
    """``deleteFromActiveList``; an empty list is omitted, as Go's omitempty serializes it."""
    remaining = [ref for ref in status.get("active") or [] if ref.get("uid") != uid]
    if remaining:
        status["active"] = remaining
    else:
        status.pop("active", None)


# -- history -------------------------------------------------------------------------------------------
def history_to_delete(
    jobs: Iterable[Obj], successful_limit: int | None, failed_limit: int | None
) -> list[Obj]:
    """``cleanupFinishedJobs``: the oldest finished Jobs beyond each limit (None = unlimited), oldest
    first by ``status.startTime`` (Jobs never started sort last), names breaking ties."""
    by_result: dict[str, list[Obj]] = {COMPLETE: [], FAILED: []}
    for job in jobs:
        result = finished_condition(job)
        if result is not None:
            by_result[result].append(job)
    doomed: list[Obj] = []
    for result, limit in ((COMPLETE, successful_limit), (FAILED, failed_limit)):
        group = by_result[result]
        if limit is not None and len(group) > limit:
            doomed += sorted(group, key=_start_time_order)[: len(group) - limit]
    return doomed


def _start_time_order(job: Mapping[str, Any]) -> tuple[bool, float, str]:
    start = (job.get("status") or {}).get("startTime")
    return (start is None, parse_time(start) if start else 0.0, job["metadata"]["name"])


def completion_after(job: Mapping[str, Any], last: str | None) -> str | None:
    """The Job's completionTime when it should become ``lastSuccessfulTime`` (later than ``last``)."""
    completed = (job.get("status") or {}).get("completionTime")
    if completed and (last is None or parse_time(completed) > parse_time(last)):
        return str(completed)
    return None


__all__ = [
    "INSTANTIATE_ANNOTATION",
    "SCHEDULED_TIMESTAMP_ANNOTATION",
    "completion_after",
    "finished_condition",
    "go_rfc1123z",
    "go_rfc3339",
    "history_to_delete",
    "in_active",
    "in_active_by_name",
    "is_child_of",
    "is_controlled_by",
    "is_succeeded",
    "job_from_template",
    "job_name",
    "job_reference",
    "remove_active",
]
