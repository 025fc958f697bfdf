"""Which admitted workloads to evict for a pending one (upstream's ``preemption`` with
``withinClusterQueue: LowerPriority``, no cohorts): pure."""

from __future__ import annotations

from typing import Any

from ..metav1_conditions import find
from .api import QUOTA_RESERVED
from .quota import Usage, add_usage, assign_flavors, workload_usage
from .workloads import priority

Obj = dict[str, Any]


def preemption_victims(
    wl: Obj, cq: Obj, candidates: list[Obj], evicting: list[Obj], used: Usage
) -> list[Obj] | None:
    """Lower-priority admitted workloads to evict so that ``wl`` fits, or None when even all would not do.
    Quota of workloads already being evicted counts as free."""
    free = used
    for w in evicting:
        free = add_usage(free, workload_usage(w), -1)
    lower = [w for w in candidates if priority(w) < priority(wl)]
    chosen: list[Obj] = []
    if assign_flavors(wl, cq, free).fits:
        return chosen
    for victim in _newest_first_within_priority(lower):
        chosen.append(victim)
        free = add_usage(free, workload_usage(victim), -1)
        if assign_flavors(wl, cq, free).fits:
            return chosen
    return None


def _admitted_at(wl: Obj) -> str:
    cond = find((wl.get("status") or {}).get("conditions"), QUOTA_RESERVED) or {}
    return str(cond.get("lastTransitionTime", ""))


def _newest_first_within_priority(workloads: list[Obj]) -> list[Obj]:
    """Lowest priority first; among equals the most recently admitted first (it lost the least work)."""
    return sorted(workloads, key=lambda w: (priority(w), _neg(_admitted_at(w))))


def _neg(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)
