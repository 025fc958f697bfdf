"""Job conditions exactly as the training operator keeps them (pkg/util/status.go, release-1.9).

Why copy the quirks: clients (our status classifier, Kueue, dashboards) read the condition list as the
operator leaves it. One condition per type, the changed one appended last; ``Running`` and ``Restarting``
remove each other; ``Succeeded``/``Failed`` turn ``Running`` to False; once ``Failed`` is True nothing
changes any more (sticky); an update with the same status and reason is ignored (the first message stays).
"""

from __future__ import annotations

from ...meta import rfc3339
from .api import KIND, Obj

CREATED, RUNNING, RESTARTING = "Created", "Running", "Restarting"
SUCCEEDED, FAILED, SUSPENDED = "Succeeded", "Failed", "Suspended"
RESUMED = "Resumed"  # a reason only (Suspended=False)


def reason(suffix: str) -> str:
    """``commonutil.NewReason``: the kind glued to the reason, e.g. ``PyTorchJobRunning``."""
    return f"{KIND}{suffix}"


def find(status: Obj, type_: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


def is_true(status: Obj, type_: str) -> bool:
    condition = find(status, type_)
    return condition is not None and condition.get("status") == "True"


def is_finished(status: Obj) -> bool:
    return is_true(status, SUCCEEDED) or is_true(status, FAILED)


def new_condition(type_: str, status: str, why: str, message: str, now: float) -> Obj:
    stamp = rfc3339(now)
    return {
        "type": type_,
        "status": status,
        "reason": why,
        "message": message,
        "lastUpdateTime": stamp,
        "lastTransitionTime": stamp,
    }


def _filter_out(conditions: list[Obj], type_: str) -> list[Obj]:
    kept = []
    for condition in conditions:
        other = condition.get("type")
        if {type_, other} == {RUNNING, RESTARTING} or other == type_:
            continue
        if type_ in (FAILED, SUCCEEDED) and other == RUNNING:
            condition = {**condition, "status": "False"}
        kept.append(condition)
    return kept


def set_condition(status: Obj, type_: str, value: str, why: str, message: str, now: float) -> bool:
    """``UpdateJobConditions``; returns whether the list changed."""
    if is_true(status, FAILED):
        return False
    current = find(status, type_)
    if current is not None and current.get("status") == value and current.get("reason") == why:
        return False
    condition = new_condition(type_, value, why, message, now)
    if current is not None and current.get("status") == value:
        condition["lastTransitionTime"] = current.get("lastTransitionTime", condition["lastTransitionTime"])
    status["conditions"] = [*_filter_out(list(status.get("conditions") or []), type_), condition]
    return True


__all__ = [
    "CREATED",
    "FAILED",
    "RESTARTING",
    "RESUMED",
    "RUNNING",
    "SUCCEEDED",
    "SUSPENDED",
    "find",
    "is_finished",
    "is_true",
    "reason",
    "set_condition",
]
