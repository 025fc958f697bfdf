"""One sync of a CronJob, ported from cronjob_controllerv2.go (``sync``, ``syncCronJob``,
``cleanupFinishedJobs``) with the same order, events, reasons and messages.

The sync edits ``cronjob["status"]`` in place and returns when to look again (seconds, or None: only a
change of the CronJob or of one of its Jobs wakes it up, as upstream returns no requeue). Effects on the
cluster go through :class:`CronJobOps`, so this module holds the rules and the controller the I/O.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from typing import Any, Protocol

from airflow_k8s_ml.k8s.cron import Schedule, ScheduleError, format_schedule, load_location, parse_standard

from ... import errors
from ...meta import parse_time, rfc3339
from .jobs import (
    completion_after,
    finished_condition,
    go_rfc1123z,
    history_to_delete,
    in_active,
    in_active_by_name,
    is_controlled_by,
    is_succeeded,
    job_from_template,
    job_name,
    job_reference,
    remove_active,
)
from .schedule import MANY_MISSED, most_recent_schedule_time, next_schedule_delay

Obj = dict[str, Any]
TOO_MANY_MISSED = (
    "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"
)


class SyncError(errors.LocalClusterError):
    """The sync failed part-way; upstream requeues the CronJob with rate-limited back-off."""


class CronJobOps(Protocol):
    def event(self, cronjob: Obj, type_: str, reason: str, message: str) -> None: ...

    def get_job(self, namespace: str, name: str) -> Obj | None: ...

    def create_job(self, job: Obj) -> Obj:
        """Create through admission; raises StatusError like the API would."""
        ...

    def delete_job(self, job: Obj) -> None:
        """Delete with Background propagation; raises StatusError."""
        ...


def sync(ops: CronJobOps, cronjob: Obj, jobs: list[Obj], now: datetime) -> float | None:
    """``ControllerV2.sync`` minus the status write (the caller writes ``cronjob["status"]`` even when
    :class:`SyncError` is raised, as upstream updates status before returning the error)."""
    cronjob.setdefault("status", {})
    cleanup_finished(ops, cronjob, jobs)
    return sync_cronjob(ops, cronjob, jobs, now)


def cleanup_finished(ops: CronJobOps, cronjob: Obj, jobs: list[Obj]) -> None:
    spec = cronjob["spec"]
    doomed = history_to_delete(
        jobs, spec.get("successfulJobsHistoryLimit"), spec.get("failedJobsHistoryLimit")
    )
    for job in doomed:
        delete_job(ops, cronjob, job)


def delete_job(ops: CronJobOps, cronjob: Obj, job: Obj) -> bool:
    """``deleteJob``: the Job (Background) and its reference in ``status.active``."""
    try:
        ops.delete_job(job)
    except errors.StatusError as exc:
        ops.event(cronjob, "Warning", "FailedDelete", f"Deleted job: {exc.message}")
        return False
    remove_active(cronjob["status"], job["metadata"]["uid"])
    ops.event(cronjob, "Normal", "SuccessfulDelete", f"Deleted job {job['metadata']['name']}")
    return True


def track_children(ops: CronJobOps, cronjob: Obj, jobs: list[Obj]) -> None:
    """Finished children leave ``active``; successes move ``lastSuccessfulTime``; unfinished Jobs the
    controller did not create (e.g. ``kubectl create job --from``) are reported but, as upstream, not
    added to ``active``; references to Jobs that no longer exist are dropped."""
    status = cronjob["status"]
    for job in jobs:
        name, uid = job["metadata"]["name"], job["metadata"]["uid"]
        found = in_active(status, uid)
        finished = finished_condition(job)
        if finished is None:
            if not found:
                ops.event(
                    cronjob,
                    "Warning",
                    "UnexpectedJob",
                    f"Saw a job that the controller did not create or forgot: {name}",
                )
            continue
        if found:
            remove_active(status, uid)
            message = f"Saw completed job: {name}, condition: {finished}"
            ops.event(cronjob, "Normal", "SawCompletedJob", message)
        if is_succeeded(job):
            completed = completion_after(job, status.get("lastSuccessfulTime"))
            if completed is not None:
                status["lastSuccessfulTime"] = completed
    children = {job["metadata"]["uid"] for job in jobs}
    for ref in list(status.get("active") or []):
        if ref.get("uid") in children or ops.get_job(ref.get("namespace", ""), ref.get("name", "")):
            continue
        ops.event(cronjob, "Normal", "MissingJob", f"Active job went missing: {ref.get('name')}")
        remove_active(status, ref.get("uid", ""))


def sync_cronjob(ops: CronJobOps, cronjob: Obj, jobs: list[Obj], now: datetime) -> float | None:
    """``syncCronJob``: track children, then start the most recent unmet scheduled time if allowed."""
    track_children(ops, cronjob, jobs)
    spec, status = cronjob["spec"], cronjob["status"]
    if cronjob["metadata"].get("deletionTimestamp"):  # being deleted: only the status is kept current
        return None
    zone = _time_zone(ops, cronjob)
    if zone is None or spec.get("suspend"):
        return None
    schedule = _schedule(ops, cronjob)
    if schedule is None:
        return None
    scheduled = _next_schedule_time(ops, cronjob, now, schedule)

    def requeue() -> float | None:  # nextScheduleTimeDuration, from the status as it is by then
        return next_schedule_delay(earliest_time(cronjob), now, schedule)

    if scheduled is None or _not_now(ops, cronjob, scheduled, now):
        return requeue()
    if spec.get("concurrencyPolicy") == "Replace":
        _replace_active(ops, cronjob)
    if not _start_job(ops, cronjob, scheduled, zone):
        return None
    status["lastScheduleTime"] = rfc3339(scheduled.timestamp())
    return requeue()


def _not_now(ops: CronJobOps, cronjob: Obj, scheduled: datetime, now: datetime) -> bool:
    """Whether ``scheduled`` must not start now: too late for startingDeadlineSeconds, already started,
    or (Forbid) a Job is still active."""
    spec, status = cronjob["spec"], cronjob["status"]
    deadline = spec.get("startingDeadlineSeconds")
    if deadline is not None and scheduled.timestamp() + deadline < now.timestamp():
        # Unreachable after the deadline-clamped search, exactly as upstream (kubernetes#101148).
        missed = go_rfc1123z(scheduled.astimezone(UTC))
        ops.event(cronjob, "Warning", "MissSchedule", f"Missed scheduled time to start a job: {missed}")
        return True
    last = status.get("lastScheduleTime")
    if in_active_by_name(status, cronjob["metadata"]["namespace"], job_name(cronjob, scheduled)) or (
        last and parse_time(last) == scheduled.timestamp()
    ):
        return True
    if spec.get("concurrencyPolicy") == "Forbid" and status.get("active"):
        message = "Not starting job because prior execution is running and concurrency policy is Forbid"
        ops.event(cronjob, "Normal", "JobAlreadyActive", message)
        return True
    return False


def _time_zone(ops: CronJobOps, cronjob: Obj) -> tzinfo | None:
    """The zone of the scheduled-timestamp annotation (UTC without ``timeZone``); None, after an
    ``UnknownTimeZone`` event, when the zone does not load."""
    name = cronjob["spec"].get("timeZone")
    try:
        return load_location(name or "")
    except ScheduleError as exc:
        ops.event(cronjob, "Warning", "UnknownTimeZone", f'invalid timeZone: "{name}": {exc}')
        return None


def _schedule(ops: CronJobOps, cronjob: Obj) -> Schedule | None:
    spec = cronjob["spec"]
    schedule = spec.get("schedule") or ""
    if "TZ" in schedule:
        ops.event(
            cronjob,
            "Warning",
            "UnsupportedSchedule",
            f'CRON_TZ or TZ used in schedule "{schedule}" is not officially supported, see '
            "https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
        )
    try:
        return parse_standard(format_schedule(schedule, spec.get("timeZone")))
    except ScheduleError as exc:
        ops.event(cronjob, "Warning", "UnparseableSchedule", f'unparseable schedule: "{schedule}" : {exc}')
        return None


def earliest_time(cronjob: Obj) -> datetime:
    """lastScheduleTime, else creationTimestamp: the first run is the first fire time after it."""
    stamp = (cronjob.get("status") or {}).get("lastScheduleTime") or cronjob["metadata"]["creationTimestamp"]
    return datetime.fromtimestamp(parse_time(stamp), UTC)


def _next_schedule_time(ops: CronJobOps, cronjob: Obj, now: datetime, schedule: Schedule) -> datetime | None:
    """``nextScheduleTime``: the most recent unmet time no older than startingDeadlineSeconds."""
    recent = most_recent_schedule_time(
        earliest_time(cronjob), now, schedule, cronjob["spec"].get("startingDeadlineSeconds")
    )
    if recent.most_recent is None or recent.most_recent > now:
        if recent.error is not None:
            ops.event(
                cronjob,
                "Warning",
                "InvalidSchedule",
                f"invalid schedule: {cronjob['spec'].get('schedule')} : {recent.error}",
            )
        return None
    if recent.missed > MANY_MISSED:
        ops.event(cronjob, "Warning", "TooManyMissedTimes", TOO_MANY_MISSED)
    return recent.most_recent


def _replace_active(ops: CronJobOps, cronjob: Obj) -> None:
    """concurrencyPolicy Replace: delete every active Job (Background) before starting the new one."""
    for ref in list(cronjob["status"].get("active") or []):
        job = ops.get_job(ref.get("namespace", ""), ref.get("name", ""))
        if job is None:
            message = errors.not_found("batch", "jobs", ref.get("name", "")).message
            ops.event(cronjob, "Warning", "FailedGet", f"Get job: {message}")
            raise SyncError(message)
        if not delete_job(ops, cronjob, job):
            raise SyncError(f"could not replace job {ref.get('namespace')}/{ref.get('name')}")


def _start_job(ops: CronJobOps, cronjob: Obj, scheduled: datetime, zone: tzinfo) -> bool:
    """Create the Job for ``scheduled`` and add it to ``active``. A Job of that name that already exists
    is adopted when this CronJob controls it (a previous sync created it but lost the status update);
    False means: stop here without requeue, as upstream does."""
    request = job_from_template(cronjob, scheduled, zone)
    meta = request["metadata"]
    try:
        job = ops.create_job(request)
    except errors.StatusError as exc:
        if exc.code == 409 and exc.reason == "AlreadyExists":
            existing = ops.get_job(meta["namespace"], meta["name"])
            if existing is None:
                raise SyncError(exc.message) from None
            tracked = in_active(cronjob["status"], existing["metadata"]["uid"])
            if tracked or not is_controlled_by(existing, cronjob):
                return False  # already tracked, or another actor's Job: nothing to do
            job = existing
        elif "being terminated" in exc.message:  # NamespaceTerminatingCause: no event
            raise SyncError(exc.message) from None
        else:
            ops.event(cronjob, "Warning", "FailedCreate", f"Error creating job: {exc.message}")
            raise SyncError(exc.message) from None
    else:
        ops.event(cronjob, "Normal", "SuccessfulCreate", f"Created job {job['metadata']['name']}")
    cronjob["status"].setdefault("active", []).append(job_reference(job))
    return True


__all__ = ["CronJobOps", "SyncError", "earliest_time", "sync"]
