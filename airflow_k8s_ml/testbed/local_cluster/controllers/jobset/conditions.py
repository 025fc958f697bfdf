"""JobSet's own condition rule (``updateCondition`` in jobset_controller.go), which differs from
``meta.SetStatusCondition``: a condition that does not exist yet is only added when True; a changed reason
or message keeps the transition time; the startup-policy pair turn each other False. Each change is also
an event (``setCondition``): the condition's reason and message, Normal or Warning.
"""

from __future__ import annotations

from ...meta import rfc3339
from .api import FAILED, RESTARTING, RESTARTING_JOBSET_FAILED, STARTUP_COMPLETED, STARTUP_IN_PROGRESS, Obj

Event = tuple[str, str, str]  # (type, reason, message)

_EXCLUSIVE = {STARTUP_IN_PROGRESS: STARTUP_COMPLETED, STARTUP_COMPLETED: STARTUP_IN_PROGRESS}


def set_condition(
    status: Obj,
    type_: str,
    value: str,
    why: tuple[str, str],
    now: float,
    events: list[Event],
    warn: bool = False,
) -> bool:
    """Apply one condition to ``status`` as upstream does; record its event when anything changed."""
    reason, message = why
    new = {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(now),
    }
    conditions: list[Obj] = status.setdefault("conditions", [])
    found = changed = False
    for i, current in enumerate(conditions):
        if current.get("type") == type_:
            found = True
            if current.get("status") != value:
                conditions[i] = new
                changed = True
            elif current.get("reason") != reason or current.get("message") != message:
                conditions[i] = {**new, "lastTransitionTime": current.get("lastTransitionTime")}
                changed = True
        elif (
            _EXCLUSIVE.get(str(current.get("type"))) == type_
            and current.get("status") == "True"
            and value == "True"
        ):
            conditions[i] = {**current, "status": "False"}
            changed = True
    if not found and value == "True":
        conditions.append(new)
        changed = True
    if changed:
        events.append(("Warning" if warn else "Normal", reason, message))
    return changed


def restarting_false(status: Obj, why: tuple[str, str], now: float, events: list[Event]) -> None:
    set_condition(status, RESTARTING, "False", why, now, events)


def failed(status: Obj, why: tuple[str, str], now: float, events: list[Event]) -> None:
    """``setJobSetFailedCondition``: Failed, Restarting False, terminal state."""
    set_condition(status, FAILED, "True", why, now, events, warn=True)
    restarting_false(status, RESTARTING_JOBSET_FAILED, now, events)
    status["terminalState"] = FAILED
