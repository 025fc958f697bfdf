"""One sync of one Job: upstream's ``syncJob`` (pkg/controller/job/job_controller.go, 1.31/1.32).

The order matters and is upstream's:
1. count pods: active, ready, terminating, newly finished (pods still carrying the tracking finalizer);
2. decide a failure: FailureTarget already recorded, podFailurePolicy FailJob, backoffLimit (failed count
   for Never, restart counts for OnFailure), then activeDeadlineSeconds;
3. on failure delete the active pods (keeping their finalizers, so they are counted as failed); otherwise
   create or delete pods towards ``min(parallelism, completions - succeeded)``, or delete them all while
   suspended, and detect success;
4. track: put finished pods' uids in ``status.uncountedTerminatedPods`` and write, remove their
   finalizers, move them into ``succeeded``/``failed`` and write again; the interim FailureTarget or
   SuccessCriteriaMet goes in with the first write, the terminal Failed or Complete only once no pod is
   uncounted or still terminating.
Everything here runs on the cluster's loop with no await, so the store cannot change under a sync.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...meta import parse_time, rfc3339
from . import conditions as jc
from . import indexes as ji
from .failures import BackoffRecord, match_pod_failure_policy, next_backoff_record, remaining_backoff
from .pods import (
    completion_index,
    has_tracking_finalizer,
    is_active,
    is_failed,
    is_ready,
    is_terminating,
    only_replace_failed,
    phase,
    removal_order_key,
    restart_count,
    uid,
)

Obj = dict[str, Any]


class JobOps(Protocol):
    """What a sync needs from the cluster (implemented by the JobController over the store)."""

    @property
    def backoff_base(self) -> float: ...
    @property
    def backoff_cap(self) -> float: ...

    def now(self) -> float: ...
    def pods_of(self, job: Obj) -> list[Obj]: ...
    def create_pod(self, job: Obj, index: int | None) -> bool: ...
    def delete_pod(self, job: Obj, pod: Obj, keep_finalizer: bool) -> bool: ...
    def release_pod(self, pod: Obj) -> bool: ...
    def write_status(self, job: Obj, status: Obj) -> None: ...
    def backoff(self, job: Obj) -> BackoffRecord: ...
    def set_backoff(self, job: Obj, record: BackoffRecord) -> None: ...
    def event(self, job: Obj, type_: str, reason: str, message: str) -> None: ...


@dataclass
class SyncContext:
    """``syncJobCtx``: the snapshot one sync works on and the counters it derives."""

    job: Obj
    status: Obj
    pods: list[Obj]
    now: float
    active_pods: list[Obj] = field(default_factory=list)
    ready: int = 0
    terminating: int = 0
    succeeded: int = 0
    failed: int = 0
    uncounted_succeeded: set[str] = field(default_factory=set)
    uncounted_failed: set[str] = field(default_factory=set)
    finished: jc.Condition | None = None
    prev_indexes: list[ji.Interval] = field(default_factory=list)
    indexes: list[ji.Interval] = field(default_factory=list)
    backoff: BackoffRecord = field(default_factory=BackoffRecord)

    @property
    def spec(self) -> Obj:
        return self.job.get("spec") or {}

    @property
    def indexed(self) -> bool:
        return self.spec.get("completionMode") == "Indexed"

    @property
    def suspended(self) -> bool:
        return bool(self.spec.get("suspend"))

    @property
    def conditions(self) -> list[jc.Condition]:
        return self.status.setdefault("conditions", [])


def sync_job(ops: JobOps, job: Obj) -> None:
    """Bring one unfinished Job one step closer to its desired state (see the module docstring)."""
    ctx = _snapshot(ops, job)
    ctx.finished = _finished_or_failure(ctx)
    if ctx.indexed:
        ctx.prev_indexes, ctx.indexes = ji.succeeded_indexes(job, ctx.pods)
        ctx.succeeded = ji.total(ctx.indexes)
    active = len(ctx.active_pods)
    suspend_changed = False
    if ctx.finished is not None:
        active -= _delete_pods(ops, ctx, ctx.active_pods, keep_finalizer=True)
    else:
        managed = not (job.get("metadata") or {}).get("deletionTimestamp")
        if managed:
            active = _manage(ops, ctx, active)
        if _complete(ctx, active):
            ctx.finished = jc.new_condition(
                jc.SUCCESS_CRITERIA_MET,
                "True",
                jc.REASON_COMPLETIONS_REACHED,
                jc.MESSAGE_COMPLETIONS_REACHED,
                ctx.now,
            )
        elif managed:
            suspend_changed = _update_suspended(ops, ctx)
    ctx.status["active"] = active
    ctx.status["ready"] = ctx.ready
    ctx.status["terminating"] = ctx.terminating
    _track_and_finish(ops, ctx, suspend_changed)


# -- 1. counting --------------------------------------------------------------------------------------
def _snapshot(ops: JobOps, job: Obj) -> SyncContext:
    status = copy.deepcopy(job.get("status") or {})
    uncounted = status.setdefault("uncountedTerminatedPods", {})
    ctx = SyncContext(job=job, status=status, pods=ops.pods_of(job), now=ops.now())
    ctx.uncounted_succeeded = set(uncounted.get("succeeded") or [])
    ctx.uncounted_failed = set(uncounted.get("failed") or [])
    ctx.active_pods = [p for p in ctx.pods if is_active(p)]
    ctx.ready = sum(1 for p in ctx.active_pods if is_ready(p))
    ctx.terminating = sum(1 for p in ctx.pods if is_terminating(p))
    new_succeeded, new_failed = _new_finished_pods(ctx)
    policy = ctx.spec.get("podFailurePolicy")
    counted_failures = [p for p in new_failed if match_pod_failure_policy(policy, p)[1]]
    ctx.succeeded = int(status.get("succeeded") or 0) + len(new_succeeded) + len(ctx.uncounted_succeeded)
    ctx.failed = int(status.get("failed") or 0) + len(counted_failures) + len(ctx.uncounted_failed)
    if not status.get("startTime") and not ctx.suspended:
        status["startTime"] = rfc3339(ctx.now)
    ctx.backoff = next_backoff_record(ops.backoff(job), new_succeeded, new_failed)
    return ctx


def _new_finished_pods(ctx: SyncContext) -> tuple[list[Obj], list[Obj]]:
    """Finished pods not yet accounted: they still carry the finalizer and are not in the uncounted lists
    (Indexed Jobs: only pods with a valid index)."""
    succeeded, failed = [], []
    completions = ctx.spec.get("completions")
    for pod in ctx.pods:
        if not has_tracking_finalizer(pod):
            continue
        if ctx.indexed:
            ix = completion_index(pod)
            if ix is None or completions is None or ix >= completions:
                continue
        if phase(pod) == "Succeeded" and uid(pod) not in ctx.uncounted_succeeded:
            succeeded.append(pod)
        elif is_failed(pod, ctx.job) and uid(pod) not in ctx.uncounted_failed:
            failed.append(pod)
    return succeeded, failed


# -- 2. failure ---------------------------------------------------------------------------------------
def _finished_or_failure(ctx: SyncContext) -> jc.Condition | None:
    """The condition the Job is heading to, in upstream's precedence: a recorded SuccessCriteriaMet or
    FailureTarget, then podFailurePolicy FailJob, then backoffLimit, then activeDeadlineSeconds."""
    met = jc.find(ctx.conditions, jc.SUCCESS_CRITERIA_MET)
    if met is not None and met.get("status") == "True":
        return met
    target = jc.find(ctx.conditions, jc.FAILURE_TARGET)
    if target is not None and target.get("status") == "True":
        return jc.new_condition(
            jc.FAILED, "True", target.get("reason", ""), target.get("message", ""), ctx.now
        )
    message = _fail_job_message(ctx)
    if message is not None:
        return jc.new_condition(jc.FAILURE_TARGET, "True", jc.REASON_POD_FAILURE_POLICY, message, ctx.now)
    if ctx.failed > int(ctx.spec.get("backoffLimit", 6)) or _past_backoff_limit_on_failure(ctx):
        return jc.new_condition(
            jc.FAILURE_TARGET, "True", jc.REASON_BACKOFF_LIMIT, jc.MESSAGE_BACKOFF_LIMIT, ctx.now
        )
    if _past_active_deadline(ctx):
        return jc.new_condition(jc.FAILURE_TARGET, "True", jc.REASON_DEADLINE, jc.MESSAGE_DEADLINE, ctx.now)
    return None


def _fail_job_message(ctx: SyncContext) -> str | None:
    policy = ctx.spec.get("podFailurePolicy")
    if policy is None:
        return None
    for pod in ctx.pods:
        if is_failed(pod, ctx.job):
            message = match_pod_failure_policy(policy, pod)[0]
            if message is not None:
                return message
    return None


def _past_backoff_limit_on_failure(ctx: SyncContext) -> bool:
    """restartPolicy OnFailure: containers restart in place, so their restarts are the failures."""
    if ((ctx.spec.get("template") or {}).get("spec") or {}).get("restartPolicy") != "OnFailure":
        return False
    restarts = restart_count(ctx.pods)
    limit = int(ctx.spec.get("backoffLimit", 6))
    return restarts > 0 if limit == 0 else restarts >= limit


def _past_active_deadline(ctx: SyncContext) -> bool:
    deadline = ctx.spec.get("activeDeadlineSeconds")
    start = ctx.status.get("startTime")
    if deadline is None or not start or ctx.suspended:
        return False
    return ctx.now - parse_time(start) >= float(deadline)


# -- 3. managing pods ---------------------------------------------------------------------------------
def _delete_pods(ops: JobOps, ctx: SyncContext, pods: list[Obj], keep_finalizer: bool) -> int:
    """Delete pods; the deleted count moves from active to terminating. Returns how many were deleted."""
    deleted = 0
    for pod in pods:
        if ops.delete_pod(ctx.job, pod, keep_finalizer):
            deleted += 1
            ctx.terminating += 1
            ctx.ready -= 1 if is_ready(pod) else 0
    return deleted


def _manage(ops: JobOps, ctx: SyncContext, active: int) -> int:
    """``manageJob``: returns the new active count."""
    if ctx.suspended:
        return active - _delete_pods(
            ops, ctx, sorted(ctx.active_pods, key=removal_order_key), keep_finalizer=False
        )
    want = _wanted_active(ctx, active)
    to_delete = _pods_for_removal(ctx, max(0, active - want))
    if to_delete:
        # One direction per sync, as upstream: deletions take precedence over creations.
        return active - _delete_pods(ops, ctx, to_delete, keep_finalizer=False)
    terminating = ctx.terminating if only_replace_failed(ctx.job) else 0
    diff = want - terminating - active
    if diff <= 0:
        return active
    if remaining_backoff(ctx.backoff, ctx.now, ops.backoff_base, ops.backoff_cap) > 0:
        return active  # the periodic resync retries once the back-off has passed
    indexes: list[int | None]
    if ctx.indexed:
        indexes = list(ji.first_pending_indexes(ctx.pods, ctx.indexes, diff, int(ctx.spec["completions"])))
    else:
        indexes = [None] * diff
    for index in indexes:
        if not ops.create_pod(ctx.job, index):
            break  # like the slow-start batches: stop at the first failure, retry on a later sync
        active += 1
    return active


def _wanted_active(ctx: SyncContext, active: int) -> int:
    parallelism = int(ctx.spec.get("parallelism") or 0)
    completions = ctx.spec.get("completions")
    if completions is None:
        # Work-queue Jobs: once one pod succeeded, let the others finish but start no new ones.
        return active if ctx.succeeded > 0 else parallelism
    return max(0, min(int(completions) - ctx.succeeded, parallelism))


def _pods_for_removal(ctx: SyncContext, at_least: int) -> list[Obj]:
    remove: list[Obj] = []
    left = ctx.active_pods
    if ctx.indexed:
        remove = list(ji.duplicated_index_pods(ctx.active_pods, int(ctx.spec["completions"])))  # type: ignore[arg-type]
        removed = {uid(p) for p in remove}
        left = [p for p in ctx.active_pods if uid(p) not in removed]
    if len(remove) < at_least:
        remove += sorted(left, key=removal_order_key)[: at_least - len(remove)]
    return remove


def _complete(ctx: SyncContext, active: int) -> bool:
    completions = ctx.spec.get("completions")
    if completions is None:
        return ctx.succeeded > 0 and active == 0
    return ctx.succeeded >= int(completions) and active == 0


def _update_suspended(ops: JobOps, ctx: SyncContext) -> bool:
    """Suspended=True while suspended; on resume Suspended=False and a fresh startTime (the deadline
    counts continuous activity)."""
    if ctx.suspended:
        changed = jc.ensure_status(
            ctx.conditions, jc.SUSPENDED, "True", "JobSuspended", "Job suspended", ctx.now
        )
        if changed:
            ops.event(ctx.job, "Normal", "Suspended", "Job suspended")
        return changed
    changed = jc.ensure_status(ctx.conditions, jc.SUSPENDED, "False", "JobResumed", "Job resumed", ctx.now)
    if changed:
        ops.event(ctx.job, "Normal", "Resumed", "Job resumed")
        ctx.status["startTime"] = rfc3339(ctx.now)
    return changed


# -- 4. tracking --------------------------------------------------------------------------------------
def _track_and_finish(ops: JobOps, ctx: SyncContext, needs_flush: bool) -> None:
    """``trackJobStatusAndRemoveFinalizers`` + ``enactJobFinished``."""
    with_finalizer = {uid(p) for p in ctx.pods if has_tracking_finalizer(p)}
    needs_flush = _count_released(ctx.status, with_finalizer) or needs_flush
    to_release, new_indexes, added = _classify_finished(ctx)
    needs_flush = needs_flush or added
    if ctx.indexed:
        ctx.indexes = ji.with_indexes(ctx.indexes, new_indexes)
        completed = ji.format_indexes(ctx.indexes)
        needs_flush = needs_flush or completed != (ctx.status.get("completedIndexes") or "")
        ctx.status["completedIndexes"] = completed
        ctx.status["succeeded"] = ji.total(ctx.indexes)
    needs_flush = _add_interim_condition(ctx) or needs_flush
    if needs_flush:
        ops.write_status(ctx.job, _normalized(ctx.status))
        ops.set_backoff(ctx.job, ctx.backoff)
    for pod in to_release:
        if ops.release_pod(pod):
            with_finalizer.discard(uid(pod))
    _count_released(ctx.status, with_finalizer)
    finished = _enact_finished(ctx)
    ops.write_status(ctx.job, _normalized(ctx.status))
    if finished:
        _record_finished(ops, ctx)


def _classify_finished(ctx: SyncContext) -> tuple[list[Obj], list[int], bool]:
    """Pods whose finalizer can go, new succeeded indexes, and whether uncounted uids were added."""
    uncounted = ctx.status["uncountedTerminatedPods"]
    succeeded_uids: list[str] = list(uncounted.get("succeeded") or [])
    failed_uids: list[str] = list(uncounted.get("failed") or [])
    previous = set(ji.members(ctx.prev_indexes))
    completions = ctx.spec.get("completions")
    failing = ctx.finished is not None and ctx.finished.get("type") != jc.SUCCESS_CRITERIA_MET
    pods = sorted(ctx.pods, key=lambda p: completion_index(p) or 0) if ctx.indexed else ctx.pods
    to_release, new_indexes, added = [], [], False
    for pod in pods:
        if not has_tracking_finalizer(pod):
            continue
        considered_failed = is_failed(pod, ctx.job)
        if not _can_release(ctx, pod, considered_failed):
            continue
        to_release.append(pod)
        pod_uid, ix = uid(pod), completion_index(pod)
        if phase(pod) == "Succeeded" and pod_uid not in ctx.uncounted_failed:
            if ctx.indexed:
                if ix is not None and completions is not None and ix < completions and ix not in previous:
                    new_indexes.append(ix)
            elif pod_uid not in succeeded_uids:
                succeeded_uids.append(pod_uid)
                added = True
        elif considered_failed or failing:
            valid = not ctx.indexed or (ix is not None and completions is not None and ix < completions)
            counts = match_pod_failure_policy(ctx.spec.get("podFailurePolicy"), pod)[1]
            if pod_uid not in failed_uids and valid and counts:
                failed_uids.append(pod_uid)
                added = True
    uncounted["succeeded"], uncounted["failed"] = succeeded_uids, failed_uids
    return to_release, new_indexes, added


def _can_release(ctx: SyncContext, pod: Obj, considered_failed: bool) -> bool:
    if (ctx.job.get("metadata") or {}).get("deletionTimestamp") or ctx.finished is not None:
        return True
    return phase(pod) == "Succeeded" or considered_failed


def _count_released(status: Obj, with_finalizer: set[str]) -> bool:
    """``cleanUncountedPodsWithoutFinalizers``: uncounted pods whose finalizer is gone join the counters."""
    uncounted = status["uncountedTerminatedPods"]
    changed = False
    for key in ("succeeded", "failed"):
        uids = list(uncounted.get(key) or [])
        kept = [u for u in uids if u in with_finalizer]
        if len(kept) != len(uids):
            status[key] = int(status.get(key) or 0) + len(uids) - len(kept)
            uncounted[key] = kept
            changed = True
    return changed


def _add_interim_condition(ctx: SyncContext) -> bool:
    """Record FailureTarget / SuccessCriteriaMet now; prepare the terminal Failed / Complete twin."""
    finished = ctx.finished
    if finished is None:
        return False
    if finished.get("type") == jc.FAILURE_TARGET:
        ctx.conditions.append(finished)
        ctx.finished = jc.new_condition(jc.FAILED, "True", finished["reason"], finished["message"], ctx.now)
        return True
    if finished.get("type") == jc.SUCCESS_CRITERIA_MET:
        added = jc.find(ctx.conditions, jc.SUCCESS_CRITERIA_MET) is None
        if added:
            ctx.conditions.append(finished)
        ctx.finished = jc.new_condition(jc.COMPLETE, "True", finished["reason"], finished["message"], ctx.now)
        return added
    return False


def _enact_finished(ctx: SyncContext) -> bool:
    """The terminal condition, once every finished pod is counted and none is still terminating."""
    finished = ctx.finished
    if finished is None:
        return False
    uncounted = ctx.status["uncountedTerminatedPods"]
    if uncounted.get("succeeded") or uncounted.get("failed") or ctx.terminating > 0:
        return False
    jc.ensure_status(
        ctx.conditions, finished["type"], "True", finished["reason"], finished["message"], ctx.now
    )
    if finished["type"] == jc.COMPLETE:
        ctx.status["completionTime"] = jc.find(ctx.conditions, jc.COMPLETE)["lastTransitionTime"]  # type: ignore[index]
    return True


def _record_finished(ops: JobOps, ctx: SyncContext) -> None:
    finished = ctx.finished
    assert finished is not None
    if finished["type"] == jc.COMPLETE:
        completions = ctx.spec.get("completions")
        if completions is not None and int(ctx.status.get("succeeded") or 0) > int(completions):
            ops.event(
                ctx.job,
                "Warning",
                "TooManySucceededPods",
                "Too many succeeded pods running after completion count reached",
            )
        ops.event(ctx.job, "Normal", "Completed", "Job completed")
    else:
        ops.event(ctx.job, "Warning", finished["reason"], finished["message"])


def _normalized(status: Obj) -> Obj:
    """The status as the apiserver serializes it: zero counters, empty lists and strings omitted
    (``omitempty``), while ``ready``, ``terminating`` and ``uncountedTerminatedPods`` stay."""
    out = copy.deepcopy(status)
    for key in ("active", "succeeded", "failed"):
        if not out.get(key):
            out.pop(key, None)
    for key in ("completedIndexes", "conditions"):
        if not out.get(key):
            out.pop(key, None)
    uncounted = out.setdefault("uncountedTerminatedPods", {})
    for key in ("succeeded", "failed"):
        if not uncounted.get(key):
            uncounted.pop(key, None)
    return out
