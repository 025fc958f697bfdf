"""Completion indexes of Indexed Jobs as ordered intervals (indexed_job_utils.go), rendered like
``status.completedIndexes``: "0-2,4" (two neighbours are written "5,6", not "5-6")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .pods import completion_index, has_tracking_finalizer, is_active, phase, removal_order_key

Interval = tuple[int, int]  # inclusive


def parse_indexes(text: str | None, completions: int) -> list[Interval]:
    """Parse "0-2,4"; indexes outside [0, completions) and malformed parts are dropped (as upstream)."""
    intervals: list[Interval] = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            continue
        lo, hi = int(first), int(last) if last else int(first)
        hi = min(hi, completions - 1)
        if lo <= hi:
            intervals.append((lo, hi))
    return to_intervals(i for lo, hi in intervals for i in range(lo, hi + 1))


def to_intervals(indexes: Iterable[int]) -> list[Interval]:
    result: list[Interval] = []
    for ix in sorted(set(indexes)):
        if result and ix == result[-1][1] + 1:
            result[-1] = (result[-1][0], ix)
        else:
            result.append((ix, ix))
    return result


def with_indexes(intervals: Sequence[Interval], indexes: Iterable[int]) -> list[Interval]:
    return to_intervals([*members(intervals), *indexes])


def members(intervals: Sequence[Interval]) -> list[int]:
    return [i for lo, hi in intervals for i in range(lo, hi + 1)]


def total(intervals: Sequence[Interval]) -> int:
    return sum(hi - lo + 1 for lo, hi in intervals)


def format_indexes(intervals: Sequence[Interval]) -> str:
    parts = []
    for lo, hi in intervals:
        if hi == lo:
            parts.append(str(lo))
        elif hi == lo + 1:
            parts.append(f"{lo},{hi}")
        else:
            parts.append(f"{lo}-{hi}")
    return ",".join(parts)


def succeeded_indexes(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> tuple[list[Interval], list[Interval]]:
    """``calculateSucceededIndexes``: (already recorded, recorded + newly succeeded uncounted pods)."""
    completions = int(job["spec"]["completions"])
    previous = parse_indexes((job.get("status") or {}).get("completedIndexes"), completions)
    new = [
        ix
        for p in pods
        if phase(p) == "Succeeded"
        and has_tracking_finalizer(p)
        and (ix := completion_index(p)) is not None
        and ix < completions
    ]
    return previous, with_indexes(previous, new)


def first_pending_indexes(
    pods: Sequence[Mapping[str, Any]], succeeded: Sequence[Interval], count: int, completions: int
) -> list[int]:
    """The lowest ``count`` indexes that neither succeeded nor have an active pod."""
    taken = set(members(succeeded))
    taken.update(ix for p in pods if is_active(p) and (ix := completion_index(p)) is not None)
    pending: list[int] = []
    for ix in range(completions):
        if len(pending) >= count:
            break
        if ix not in taken:
            pending.append(ix)
    return pending


def duplicated_index_pods(active: Sequence[Mapping[str, Any]], completions: int) -> list[Mapping[str, Any]]:
    """``appendDuplicatedIndexPodsForRemoval``: active pods without a valid index, and all but the most
    advanced pod of each index held by several."""
    remove: list[Mapping[str, Any]] = []
    by_index: dict[int, list[Mapping[str, Any]]] = {}
    for pod in active:
        ix = completion_index(pod)
        if ix is None or ix >= completions:
            remove.append(pod)
        else:
            by_index.setdefault(ix, []).append(pod)
    for group in by_index.values():
        remove.extend(sorted(group, key=removal_order_key)[:-1])
    return remove
