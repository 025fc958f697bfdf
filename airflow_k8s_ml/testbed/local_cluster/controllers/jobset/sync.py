"""One JobSet reconcile as a pure decision (jobset_controller.go ``reconcile``, depends_on.go,
startup_policy.go, ttl_after_finished.go; the success and failure policies are :mod:`.policies`): from the
JobSet and its child Jobs, the new status and the actions to take.

The controller applies the actions (create/delete/suspend/resume Jobs, create the Service, events);
keeping the decision pure lets unit tests cover every policy branch without a cluster.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from ...meta import parse_time
from .api import (
    ALL_JOBS_COMPLETED,
    COMPLETED,
    FAILED,
    IN_ORDER_COMPLETED,
    IN_ORDER_IN_PROGRESS,
    REPLICATED_JOB_NAME_KEY,
    RESTARTING_JOBS_READY,
    RESTARTING_JOBSET_COMPLETED,
    RESTARTING_JOBSET_SUSPENDED,
    RESTARTS_KEY,
    RESUMED_JOBS,
    STARTUP_COMPLETED,
    STARTUP_IN_PROGRESS,
    SUSPENDED,
    SUSPENDED_JOBS,
    Obj,
    dns_hostnames_enabled,
    replicas,
    replicated_jobs,
    suspended,
)
from .conditions import Event, restarting_false, set_condition
from .jobs import desired_jobs
from .policies import apply_failure_policy, success_reached


@dataclass
class Decision:
    status: Obj
    create: list[Obj] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)  # Job names, deleted with Foreground propagation
    suspend: list[str] = field(default_factory=list)
    resume: list[str] = field(default_factory=list)
    service: bool = False  # the headless Service must exist
    expired: bool = False  # ttlSecondsAfterFinished ran out: delete the JobSet (Foreground)
    events: list[Event] = field(default_factory=list)


@dataclass
class ChildJobs:
    active: list[Obj] = field(default_factory=list)
    successful: list[Obj] = field(default_factory=list)
    failed: list[Obj] = field(default_factory=list)
    previous: list[Obj] = field(default_factory=list)  # from an earlier restart attempt


def finished_type(job: Obj) -> str | None:
    """``JobFinished``: Complete or Failed when that condition is True."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return None


def classify(js: Obj, jobs: list[Obj]) -> ChildJobs:
    """``getChildJobs``: Jobs of an older restart attempt are ``previous``; the rest by their state."""
    restarts = int((js.get("status") or {}).get("restarts") or 0)
    out = ChildJobs()
    for job in sorted(jobs, key=lambda j: j["metadata"]["name"]):
        labels = job["metadata"].get("labels") or {}
        try:
            attempt = int(labels.get(RESTARTS_KEY, ""))
        except ValueError:
            attempt = -1
        if attempt < restarts:
            out.previous.append(job)
            continue
        kind = finished_type(job)
        {"Failed": out.failed, "Complete": out.successful}.get(kind or "", out.active).append(job)
    return out


def _job_suspended(job: Obj) -> bool:
    return (job.get("spec") or {}).get("suspend") is True


def replicated_jobs_status(js: Obj, jobs: ChildJobs) -> list[Obj]:
    """``calculateReplicatedJobStatuses``: per replicated job, counts of ready/succeeded/failed/active/
    suspended child Jobs (a Job is ready when its ready plus succeeded pods reach its pod count)."""
    counts = {
        r["name"]: {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
        for r in replicated_jobs(js)
    }

    def bucket(job: Obj) -> dict[str, int] | None:
        return counts.get((job["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME_KEY, ""))

    for job in jobs.active:
        c = bucket(job)
        if c is None:
            continue
        spec, st = job.get("spec") or {}, job.get("status") or {}
        pods = int(spec.get("parallelism") or 1)
        if spec.get("completions") is not None:
            pods = min(pods, int(spec["completions"]))
        if int(st.get("succeeded") or 0) + int(st.get("ready") or 0) >= pods:
            c["ready"] += 1
        if int(st.get("active") or 0) > 0:
            c["active"] += 1
        if _job_suspended(job):
            c["suspended"] += 1
    for name, jobs_of in (("succeeded", jobs.successful), ("failed", jobs.failed)):
        for job in jobs_of:
            c = bucket(job)
            if c is not None:
                c[name] += 1
    return [{"name": name, **c} for name, c in counts.items()]


def is_finished(js: Obj) -> bool:
    conditions = (js.get("status") or {}).get("conditions") or []
    return any(c.get("type") in (COMPLETED, FAILED) and c.get("status") == "True" for c in conditions)


def ttl_expired(js: Obj, now: float) -> bool:
    """``executeTTLAfterFinishedPolicy``: the terminal condition's transition time plus the TTL has passed."""
    ttl = (js.get("spec") or {}).get("ttlSecondsAfterFinished")
    if ttl is None or js["metadata"].get("deletionTimestamp"):
        return False
    for c in (js.get("status") or {}).get("conditions") or []:
        if c.get("type") in (COMPLETED, FAILED) and c.get("status") == "True" and c.get("lastTransitionTime"):
            return now >= parse_time(c["lastTransitionTime"]) + float(ttl)
    return False


def dependencies_reached(js: Obj, rjob_name: str, statuses: list[Obj]) -> bool:
    """``dependencyReachedStatus``: every ``dependsOn`` entry's replicated job has all its Jobs succeeded
    (``Complete``) or ready, failed or succeeded (``Ready``)."""
    rjobs = {r["name"]: r for r in replicated_jobs(js)}
    by_name = {s["name"]: s for s in statuses}
    for dep in (rjobs.get(rjob_name) or {}).get("dependsOn") or []:
        wanted, actual = replicas(rjobs.get(dep.get("name"), {})), by_name.get(dep.get("name"))
        if actual is None:
            return False
        if dep.get("status") == "Complete" and wanted != actual["succeeded"]:
            return False
        reached = actual["failed"] + actual["ready"] + actual["succeeded"]
        if dep.get("status") == "Ready" and wanted != reached:
            return False
    return True


def _all_ready(js: Obj, statuses: list[Obj]) -> bool:
    total = sum(replicas(r) for r in replicated_jobs(js))
    return total == sum(int(s["ready"]) + int(s["succeeded"]) for s in statuses)


def decide(js: Obj, jobs: list[Obj], now: float) -> Decision:
    """The JobSet's next step, in upstream's order."""
    status = copy.deepcopy(js.get("status") or {})
    status.setdefault("restarts", 0)
    children = classify(js, jobs)
    status["replicatedJobsStatus"] = replicated_jobs_status(js, children)
    decision = Decision(status=status)
    events = decision.events
    if is_finished(js):
        decision.delete = [j["metadata"]["name"] for j in children.active]
        decision.expired = ttl_expired(js, now)
        return decision
    decision.delete = [j["metadata"]["name"] for j in children.previous]
    if not suspended(js) and _all_ready(js, status["replicatedJobsStatus"]):
        restarting_false(status, RESTARTING_JOBS_READY, now, events)
    if children.failed:
        apply_failure_policy(js, status, children.failed, now, events)
        return decision
    if children.successful and success_reached(js, children.successful):
        set_condition(status, COMPLETED, "True", ALL_JOBS_COMPLETED, now, events)
        restarting_false(status, RESTARTING_JOBSET_COMPLETED, now, events)
        status["terminalState"] = COMPLETED
        return decision
    decision.service = dns_hostnames_enabled(js)
    _start_replicated_jobs(js, jobs, children, decision, now)
    return decision


def _in_order(js: Obj) -> bool:
    return ((js.get("spec") or {}).get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"


def _all_started(rjob: Obj, statuses: list[Obj]) -> bool:
    """``allReplicasStarted``: every Job of the replicated job is ready, failed or succeeded."""
    found = next((s for s in statuses if s["name"] == rjob["name"]), None)
    return found is not None and replicas(rjob) == found["failed"] + found["ready"] + found["succeeded"]


def _start_replicated_jobs(
    js: Obj, jobs: list[Obj], children: ChildJobs, decision: Decision, now: float
) -> None:
    """``reconcileReplicatedJobs`` then ``suspendJobs`` / ``resumeJobsIfNecessary``: missing Jobs are
    created and suspended ones resumed replicated job by replicated job, each once its ``dependsOn`` is
    reached; with ``startupPolicyOrder: InOrder`` one replicated job at a time, the next only once every
    Job of the previous one started (``StartupPolicyInProgress``, then ``StartupPolicyCompleted``)."""
    status, events = decision.status, decision.events
    statuses = status["replicatedJobsStatus"]
    existing = {j["metadata"]["name"] for j in jobs}
    wanted: dict[str, list[Obj]] = {}
    for job in desired_jobs({**js, "status": status}):
        wanted.setdefault(_rjob_of(job), []).append(job)
    in_order, held = _in_order(js), suspended(js)
    for rjob in replicated_jobs(js):
        if not dependencies_reached(js, rjob["name"], statuses):
            continue
        if not held and in_order and _all_started(rjob, statuses):
            continue
        decision.create += [j for j in wanted.get(rjob["name"], []) if j["metadata"]["name"] not in existing]
        if not held and in_order:
            set_condition(status, STARTUP_IN_PROGRESS, "True", IN_ORDER_IN_PROGRESS, now, events)
            break
    else:
        if not held and in_order:
            set_condition(status, STARTUP_COMPLETED, "True", IN_ORDER_COMPLETED, now, events)
    if held:
        decision.suspend = [j["metadata"]["name"] for j in children.active if not _job_suspended(j)]
        set_condition(status, SUSPENDED, "True", SUSPENDED_JOBS, now, events)
        restarting_false(status, RESTARTING_JOBSET_SUSPENDED, now, events)
        return
    for rjob in replicated_jobs(js):
        if not dependencies_reached(js, rjob["name"], statuses):
            continue
        if in_order and _all_started(rjob, statuses):
            continue
        decision.resume += [
            j["metadata"]["name"]
            for j in children.active
            if _job_suspended(j) and _rjob_of(j) == rjob["name"]
        ]
        if in_order:
            set_condition(status, STARTUP_IN_PROGRESS, "True", IN_ORDER_IN_PROGRESS, now, events)
            return
    set_condition(status, SUSPENDED, "False", RESUMED_JOBS, now, events)


def _rjob_of(job: Obj) -> str:
    return str((job["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME_KEY, ""))
