"""JobSet's success and failure policies as pure decisions (success_policy.go, failure_policy.go): which
failed Job a rule matches, whether to restart or fail and with which reason and message.
"""

from __future__ import annotations

import re

from .api import (
    FAIL_JOBSET_ACTION,
    FAILED_JOBS,
    REACHED_MAX_RESTARTS,
    REPLICATED_JOB_NAME_KEY,
    RESTART_IGNORE_MAX_ACTION,
    RESTART_JOBSET_ACTION,
    RESTARTING,
    RESTARTING_DEFAULT_POLICY,
    RESTARTING_RULE_FORMAT,
    Obj,
    replicas,
    replicated_jobs,
)
from .conditions import Event, failed, set_condition


def _failure_condition(job: Obj) -> Obj | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return c
    return None


def first_failed(jobs: list[Obj]) -> Obj | None:
    """``findFirstFailedJob``: the Job whose Failed condition is oldest (ties: the first by name)."""
    dated = [(str((_failure_condition(j) or {}).get("lastTransitionTime") or ""), j) for j in jobs]
    dated = [d for d in dated if d[0]]
    return min(dated, key=lambda d: d[0])[1] if dated else None


def _rule_applies(rule: Obj, job: Obj) -> bool:
    cond = _failure_condition(job) or {}
    reasons = rule.get("onJobFailureReasons") or []
    if reasons and cond.get("reason") not in reasons:
        return False
    patterns = rule.get("onJobFailureMessagePatterns") or []
    message = str(cond.get("message") or "")
    if patterns and not any(_search(p, message) for p in patterns):
        return False
    targets = rule.get("targetReplicatedJobs") or []
    parent = (job["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME_KEY)
    return parent is not None and (not targets or parent in targets)


def _search(pattern: str, message: str) -> bool:
    try:
        return re.search(pattern, message) is not None
    except re.error:
        return False


def matching_rule(rules: list[Obj], failed_jobs: list[Obj]) -> tuple[Obj | None, Obj | None]:
    """``findFirstFailedPolicyRuleAndJob``: the first rule any failed Job matches, with the earliest such
    Job."""
    for rule in rules:
        job = first_failed([j for j in failed_jobs if _rule_applies(rule, j)])
        if job is not None:
            return rule, job
    return None, None


def _with_first(why: tuple[str, str], job: Obj) -> tuple[str, str]:
    """``messageWithFirstFailedJob``."""
    return why[0], f"{why[1]} (first failed job: {job['metadata']['name']})"


def apply_failure_policy(
    js: Obj, status: Obj, failed_jobs: list[Obj], now: float, events: list[Event]
) -> None:
    """``executeFailurePolicy``: no policy fails the JobSet; otherwise the first matching rule's action (by
    default RestartJobSet), restarting until ``maxRestarts`` restarts counted towards it."""
    policy = (js.get("spec") or {}).get("failurePolicy")
    earliest = first_failed(failed_jobs) or failed_jobs[0]
    if policy is None:
        failed(status, _with_first(FAILED_JOBS, earliest), now, events)
        return
    rule, matched = matching_rule(list(policy.get("rules") or []), failed_jobs)
    action = (rule or {}).get("action") or "RestartJobSet"
    job = matched if matched is not None else earliest
    if action == "FailJobSet":
        failed(status, _with_first(FAIL_JOBSET_ACTION, job), now, events)
        return
    counted = action == "RestartJobSet"
    if counted and int(status.get("restartsCountTowardsMax") or 0) >= int(policy.get("maxRestarts") or 0):
        failed(status, _with_first(REACHED_MAX_RESTARTS, job), now, events)
        return
    base = RESTART_JOBSET_ACTION if counted else RESTART_IGNORE_MAX_ACTION
    _, message = _with_first(base, job)
    events.append(("Warning", base[0], message))
    status["restarts"] = int(status.get("restarts") or 0) + 1
    if counted:
        status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax") or 0) + 1
    reason = RESTARTING_RULE_FORMAT.format(rule["name"]) if rule is not None else RESTARTING_DEFAULT_POLICY
    set_condition(status, RESTARTING, "True", (reason, message), now, events, warn=True)


def success_reached(js: Obj, successful: list[Obj]) -> bool:
    """``executeSuccessPolicy``: All (every targeted replica) or Any (one targeted Job) completed."""
    policy = (js.get("spec") or {}).get("successPolicy") or {"operator": "All"}
    targets = policy.get("targetReplicatedJobs") or []

    def targeted(name: str | None) -> bool:
        return not targets or name in targets

    done = sum(
        1 for j in successful if targeted((j["metadata"].get("labels") or {}).get(REPLICATED_JOB_NAME_KEY))
    )
    if policy.get("operator") == "Any":
        needed = 1
    else:
        needed = sum(replicas(r) for r in replicated_jobs(js) if targeted(r["name"]))
    return done >= needed
