"""From a metric proposal to the replica count the HPA applies (horizontal.go), pure given its history.

Without ``spec.behavior``: scale-down stabilization over the downscale window (5 min) and the legacy
scale-up limit max(2 x current, 4). With ``spec.behavior``: per-direction stabilization windows and the
Pods/Percent policies over their periods. Both set ``AbleToScale`` and ``ScalingLimited`` with upstream's
reasons and messages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ...meta import rfc3339

Obj = dict[str, Any]
Sample = tuple[int, float]  # (replicas or change, timestamp)

DOWNSCALE_WINDOW = 300.0  # --horizontal-pod-autoscaler-downscale-stabilization


@dataclass
class History:
    """What upstream keeps in memory per HPA: recent recommendations and scale events."""

    recommendations: list[Sample] = field(default_factory=list)
    up_events: list[Sample] = field(default_factory=list)
    down_events: list[Sample] = field(default_factory=list)


def set_condition(
    conditions: list[Obj], type_: str, status: str, reason: str, message: str, now: float
) -> None:
    """``setConditionInList``: update in place (order kept); lastTransitionTime moves only with status."""
    existing = next((c for c in conditions if c.get("type") == type_), None)
    if existing is None:
        existing = {"type": type_}
        conditions.append(existing)
    if existing.get("status") != status:
        existing["lastTransitionTime"] = rfc3339(now)
    existing["status"] = status
    existing["reason"] = reason
    existing["message"] = message
    for key in ("type", "status", "lastTransitionTime", "reason", "message"):  # Go field order
        if key in existing:
            existing[key] = existing.pop(key)


# -- without behavior ----------------------------------------------------------------------------------
def _stabilize_legacy(history: History, proposed: int, now: float, window: float) -> int:
    highest = proposed
    old_index = None
    for i, (replicas, stamp) in enumerate(history.recommendations):
        if stamp < now - window:
            old_index = i
        elif replicas > highest:
            highest = replicas
    if old_index is not None:
        history.recommendations[old_index] = (proposed, now)
    else:
        history.recommendations.append((proposed, now))
    return highest


def _limit_with_rules(current: int, desired: int, minimum: int, maximum: int) -> tuple[int, str, str]:
    """``convertDesiredReplicasWithRules``."""
    scale_up_limit = max(2 * current, 4)
    if maximum > scale_up_limit:
        allowed_max = scale_up_limit
        reason, message = (
            "ScaleUpLimit",
            "the desired replica count is increasing faster than the maximum scale rate",
        )
    else:
        allowed_max = maximum
        reason, message = (
            "TooManyReplicas",
            "the desired replica count is more than the maximum replica count",
        )
    if desired < minimum:
        return minimum, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
    if desired > allowed_max:
        return allowed_max, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def normalize_legacy(
    conditions: list[Obj],
    history: History,
    current: int,
    proposed: int,
    minimum: int,
    maximum: int,
    now: float,
    window: float = DOWNSCALE_WINDOW,
) -> int:
    stabilized = _stabilize_legacy(history, proposed, now, window)
    if stabilized != proposed:
        set_condition(
            conditions,
            "AbleToScale",
            "True",
            "ScaleDownStabilized",
            "recent recommendations were higher than current one, applying the highest recent recommendation",
            now,
        )
    else:
        set_condition(
            conditions,
            "AbleToScale",
            "True",
            "ReadyForNewScale",
            "recommended size matches current size",
            now,
        )
    desired, reason, message = _limit_with_rules(current, stabilized, minimum, maximum)
    set_condition(
        conditions, "ScalingLimited", "False" if desired == stabilized else "True", reason, message, now
    )
    return desired


# -- with behavior -------------------------------------------------------------------------------------
def _stabilize_with_behavior(
    history: History, behavior: Obj, current: int, proposed: int, now: float
) -> tuple[int, str, str]:
    up_window = float((behavior.get("scaleUp") or {}).get("stabilizationWindowSeconds") or 0)
    down_window = (behavior.get("scaleDown") or {}).get("stabilizationWindowSeconds")
    down_window = DOWNSCALE_WINDOW if down_window is None else float(down_window)
    up_rec, down_rec = proposed, proposed
    old_index = None
    for i, (replicas, stamp) in enumerate(history.recommendations):
        if stamp > now - up_window:
            up_rec = min(replicas, up_rec)
        if stamp > now - down_window:
            down_rec = max(replicas, down_rec)
        if stamp < now - up_window and stamp < now - down_window:
            old_index = i
    recommendation = min(max(current, up_rec), down_rec)
    if old_index is not None:
        history.recommendations[old_index] = (proposed, now)
    else:
        history.recommendations.append((proposed, now))
    if proposed >= current:
        return (
            recommendation,
            "ScaleUpStabilized",
            "recent recommendations were lower than current one, applying the lowest recent recommendation",
        )
    return (
        recommendation,
        "ScaleDownStabilized",
        "recent recommendations were higher than current one, applying the highest recent recommendation",
    )


def _change_in_period(events: list[Sample], period: float, now: float) -> int:
    return sum(change for change, stamp in events if stamp > now - period)


def _policy_limit(rules: Obj, history: History, current: int, up: bool, now: float) -> int:
    """``calculateScaleUpLimitWithScalingRules`` / ``calculateScaleDownLimitWithBehaviors``."""
    select = rules.get("selectPolicy") or "Max"
    if select == "Disabled":
        return current
    pick_min = (select == "Min") == up  # scaling up: Min picks the smallest limit; down: the largest
    result: int | None = None
    for policy in rules.get("policies") or []:
        period = float(policy.get("periodSeconds") or 0)
        start = (
            current
            - _change_in_period(history.up_events, period, now)
            + _change_in_period(history.down_events, period, now)
        )
        value = int(policy.get("value") or 0)
        if policy.get("type") == "Pods":
            proposed = start + value if up else start - value
        elif up:
            proposed = math.ceil(start * (1 + value / 100))
        else:
            proposed = int(start * (1 - value / 100))
        if result is None:
            result = proposed
        else:
            result = min(result, proposed) if pick_min else max(result, proposed)
    return current if result is None else result


def _limit_with_behavior(
    behavior: Obj, history: History, current: int, desired: int, minimum: int, maximum: int, now: float
) -> tuple[int, str, str]:
    """``convertDesiredReplicasWithBehaviorRate``."""
    if desired > current:
        limit = max(_policy_limit(behavior.get("scaleUp") or {}, history, current, True, now), current)
        if maximum > limit:
            allowed, reason, message = (
                limit,
                "ScaleUpLimit",
                "the desired replica count is increasing faster than the maximum scale rate",
            )
        else:
            allowed, reason, message = (
                maximum,
                "TooManyReplicas",
                "the desired replica count is more than the maximum replica count",
            )
        if desired > allowed:
            return allowed, reason, message
    elif desired < current:
        limit = min(_policy_limit(behavior.get("scaleDown") or {}, history, current, False, now), current)
        if minimum < limit:
            allowed, reason, message = (
                limit,
                "ScaleDownLimit",
                "the desired replica count is decreasing faster than the maximum scale rate",
            )
        else:
            allowed, reason, message = (
                minimum,
                "TooFewReplicas",
                "the desired replica count is less than the minimum replica count",
            )
        if desired < allowed:
            return allowed, reason, message
    return desired, "DesiredWithinRange", "the desired count is within the acceptable range"


def normalize_with_behavior(
    conditions: list[Obj],
    history: History,
    behavior: Obj,
    current: int,
    proposed: int,
    minimum: int,
    maximum: int,
    now: float,
) -> int:
    stabilized, reason, message = _stabilize_with_behavior(history, behavior, current, proposed, now)
    if stabilized != proposed:
        set_condition(conditions, "AbleToScale", "True", reason, message, now)
    else:
        set_condition(
            conditions,
            "AbleToScale",
            "True",
            "ReadyForNewScale",
            "recommended size matches current size",
            now,
        )
    desired, reason, message = _limit_with_behavior(
        behavior, history, current, stabilized, minimum, maximum, now
    )
    set_condition(
        conditions, "ScalingLimited", "False" if desired == stabilized else "True", reason, message, now
    )
    return desired


def record_scale_event(history: History, behavior: Obj | None, before: int, after: int, now: float) -> None:
    """``storeScaleEvent``: only behaviors read these; events older than the longest period are dropped."""
    if behavior is None:
        return
    up = after > before
    rules = behavior.get("scaleUp" if up else "scaleDown") or {}
    longest = max((float(p.get("periodSeconds") or 0) for p in rules.get("policies") or []), default=0.0)
    events = history.up_events if up else history.down_events
    events[:] = [e for e in events if e[1] > now - longest]
    events.append((abs(after - before), now))
