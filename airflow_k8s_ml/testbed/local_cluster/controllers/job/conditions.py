"""Job conditions with upstream's types, reasons and messages, and the rule for updating them.

Clients branch on these strings (``kubectl wait --for=condition=complete``, Airflow's job hooks), so
they are constants here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...meta import rfc3339

Condition = dict[str, Any]

COMPLETE = "Complete"
FAILED = "Failed"
FAILURE_TARGET = "FailureTarget"
SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"
SUSPENDED = "Suspended"

REASON_BACKOFF_LIMIT = "BackoffLimitExceeded"
MESSAGE_BACKOFF_LIMIT = "Job has reached the specified backoff limit"
REASON_DEADLINE = "DeadlineExceeded"
MESSAGE_DEADLINE = "Job was active longer than specified deadline"
REASON_POD_FAILURE_POLICY = "PodFailurePolicy"
REASON_COMPLETIONS_REACHED = "CompletionsReached"
MESSAGE_COMPLETIONS_REACHED = "Reached expected number of succeeded pods"


def new_condition(type_: str, status: str, reason: str, message: str, now: float) -> Condition:
    stamp = rfc3339(now)
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": stamp,
        "lastTransitionTime": stamp,
    }


def find(conditions: list[Condition] | None, type_: str) -> Condition | None:
    return next((c for c in conditions or [] if c.get("type") == type_), None)


def is_true(conditions: list[Condition] | None, type_: str) -> bool:
    condition = find(conditions, type_)
    return condition is not None and condition.get("status") == "True"


def is_finished(job: Mapping[str, Any]) -> bool:
    """``util.IsJobFinished``: a true Complete or Failed condition."""
    conditions = (job.get("status") or {}).get("conditions")
    return is_true(conditions, COMPLETE) or is_true(conditions, FAILED)


def terminal_condition(job: Mapping[str, Any]) -> Condition | None:
    """The true Complete or Failed condition (its lastTransitionTime starts the TTL)."""
    conditions = (job.get("status") or {}).get("conditions")
    for type_ in (COMPLETE, FAILED):
        condition = find(conditions, type_)
        if condition is not None and condition.get("status") == "True":
            return condition
    return None


def ensure_status(
    conditions: list[Condition], type_: str, status: str, reason: str, message: str, now: float
) -> bool:
    """``ensureJobConditionStatus``: replace a differing condition of that type, or append a new one
    unless it would be False (nothing -> False says nothing). Returns whether the list changed."""
    existing = find(conditions, type_)
    if existing is not None:
        if (existing.get("status"), existing.get("reason"), existing.get("message")) == (
            status,
            reason,
            message,
        ):
            return False
        existing.clear()
        existing.update(new_condition(type_, status, reason, message, now))
        return True
    if status != "False":
        conditions.append(new_condition(type_, status, reason, message, now))
        return True
    return False
