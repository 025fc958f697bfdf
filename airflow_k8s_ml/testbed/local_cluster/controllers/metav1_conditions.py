"""``metav1.Condition`` lists as apimachinery's ``meta.SetStatusCondition`` keeps them (CRDs built with
controller-runtime: JobSet, TrainJob).

Why a module of its own: both the JobSet and the TrainJob controllers keep ``metav1.Condition`` lists, and
the rule for ``lastTransitionTime`` (it moves only when the status flips) must be the same in both.
"""

from __future__ import annotations

from typing import Any

from ..meta import rfc3339

Obj = dict[str, Any]


def condition(type_: str, status: str, reason: str, message: str, now: float) -> Obj:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": rfc3339(now),
    }


def find(conditions: list[Obj] | None, type_: str) -> Obj | None:
    return next((c for c in conditions or [] if c.get("type") == type_), None)


def is_true(conditions: list[Obj] | None, type_: str) -> bool:
    found = find(conditions, type_)
    return found is not None and found.get("status") == "True"


def set_status_condition(conditions: list[Obj], new: Obj) -> bool:
    """``meta.SetStatusCondition``: add, or update in place keeping the transition time unless the status
    changed. Returns whether anything changed."""
    current = find(conditions, new["type"])
    if current is None:
        conditions.append(dict(new))
        return True
    changed = False
    if current.get("status") != new["status"]:
        current["status"] = new["status"]
        current["lastTransitionTime"] = new["lastTransitionTime"]
        changed = True
    for key in ("reason", "message"):
        if current.get(key) != new.get(key):
            current[key] = new.get(key)
            changed = True
    return changed
