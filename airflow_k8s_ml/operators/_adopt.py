"""Submit-or-adopt: one pure decision from what we remember and what the cluster shows.

Why pure: a retry after a worker crash, after a succeeded workload and after a failed one must each do the
right thing, and "never two active workloads for one task instance" must hold whatever order the facts
arrive in. Keeping the decision a function of data (the record from ``task_state_store`` plus the objects
found by the task-instance label selector, already classified) lets the unit tests walk every case without
a cluster, and leaves the operator with only the I/O: read, decide, act.

The rules, in order:

1. any workload of this task instance still active -> :class:`Adopt` the newest (no new launch, ever);
2. the record caches a successful result (the object may be gone: TTL, ``on_finish="delete..."``) ->
   :class:`ReturnResult` from the cache;
3. the newest workload found succeeded -> :class:`ReturnResult` from it;
4. otherwise -> :class:`Launch` the attempt after the highest one seen (1 when nothing is known).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_k8s_ml.manifests.naming import ATTEMPT_LABEL
from airflow_k8s_ml.operators.annotations import RESUMED_FROM_ANNOTATION
from airflow_k8s_ml.operators.record import WorkloadRecord
from airflow_k8s_ml.status import WorkloadState, classify
from airflow_k8s_ml.task_state_keys import STATE_KEY

__all__ = [
    "RESUMED_FROM_ANNOTATION",
    "STATE_KEY",
    "Adopt",
    "Decision",
    "Launch",
    "Observed",
    "ReturnResult",
    "WorkloadRecord",
    "decide",
    "observe",
]


@dataclass(frozen=True)
class Observed:
    """One workload of this task instance as found on the cluster, already classified."""

    name: str
    uid: str
    attempt: int
    state: WorkloadState
    obj: Mapping[str, Any] = field(repr=False, compare=False, default_factory=dict)

    @property
    def resumed_from(self) -> str | None:
        annotations = (self.obj.get("metadata") or {}).get("annotations") or {}
        return annotations.get(RESUMED_FROM_ANNOTATION) or None


def observe(obj: Mapping[str, Any], kind: str) -> Observed:
    """Classify a listed object (list items carry no ``kind``) and read its attempt label."""
    metadata = obj.get("metadata") or {}
    try:
        attempt = int((metadata.get("labels") or {}).get(ATTEMPT_LABEL, "0"))
    except ValueError:
        attempt = 0
    return Observed(
        name=str(metadata.get("name", "")),
        uid=str(metadata.get("uid", "")),
        attempt=attempt,
        state=classify(obj, kind=kind),
        obj=obj,
    )


@dataclass(frozen=True)
class Adopt:
    """Re-attach to a running workload; ``others`` lists further active ones (should never happen)."""

    workload: Observed
    others: tuple[Observed, ...] = ()


@dataclass(frozen=True)
class ReturnResult:
    """The task instance already succeeded: return without launching (from the object or the cache)."""

    workload: Observed | None = None
    cached: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Launch:
    """Create attempt ``attempt``; ``previous`` is the failed attempt it follows, if any was found."""

    attempt: int
    previous: Observed | None = None


Decision = Adopt | ReturnResult | Launch


def _newest(found: Sequence[Observed]) -> Observed | None:
    return max(found, key=lambda item: item.attempt, default=None)


def decide(stored: WorkloadRecord | None, found: Sequence[Observed]) -> Decision:
    """Apply the module's four rules; see the module docstring for why they come in this order."""
    active = sorted((f for f in found if not f.state.terminal), key=lambda f: f.attempt, reverse=True)
    if active:
        return Adopt(active[0], tuple(active[1:]))
    if stored is not None and stored.result is not None:
        return ReturnResult(cached=stored.result)
    newest = _newest(found)
    if newest is not None and newest.state.succeeded:
        return ReturnResult(workload=newest)
    highest = max([f.attempt for f in found] + [stored.attempt if stored else 0])
    return Launch(attempt=highest + 1, previous=newest)
