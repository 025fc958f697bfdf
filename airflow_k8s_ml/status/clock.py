"""``PhaseClock``: when the current deadline phase began and when the workload first ran (pure).

Why a value with hints: a budget counts from its phase's start. A transition seen live is timed by the
observation; the phase current when a waiter (re)starts is timed by the objects' own timestamps when they
tell (:func:`phase_hints`), so a triggerer restart or a sensor poking a workload stuck for an hour does not
hand it a fresh budget. :func:`phase_reason` says why a workload is still in its phase, for the message of
an expired budget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from airflow_k8s_ml.status.pod import pod_phase_kind, pod_problem, scheduling_message
from airflow_k8s_ml.status.state import WorkloadState

__all__ = ["PhaseClock", "phase_hints", "phase_reason"]


@dataclass(frozen=True, slots=True)
class PhaseClock:
    """The current phase (None before the first look), since when, and when the first pod ran."""

    phase: str | None = None
    since: float = 0.0
    running_since: float | None = None

    def observe(
        self, phase: str, now: float, *, hint_since: float | None = None, hint_running: float | None = None
    ) -> PhaseClock:
        """The clock after seeing ``phase`` at ``now``; hints count only on the first look (never later
        than ``now``)."""
        first = self.phase is None
        since, running = self.since, self.running_since
        if phase != self.phase:
            since = min(hint_since, now) if first and hint_since is not None else now
        if phase == "running" and running is None:
            running = min(hint_running, now) if first and hint_running is not None else since
        elif first and hint_running is not None and running is None:
            running = min(hint_running, now)
        return replace(self, phase=phase, since=since, running_since=running)


def phase_reason(phase: str, state: WorkloadState, pods: Iterable[Mapping[str, Any]]) -> str:
    """Why the workload is still in ``phase``: what a human would look for in ``kubectl describe``.

    admission: the scheduler's message (``0/1 nodes are available: 1 Insufficient nvidia.com/gpu.``) or
    the queue's (Job suspended); startup: the stuck container (``ImagePullBackOff: ...``) or "pods are
    starting"; running/other: the workload's own state.
    """
    pods = list(pods)
    if phase == "admission":
        for pod in pods:
            message = scheduling_message(pod)
            if message:
                return message
        return state.message or state.summary()
    if phase == "startup":
        problems = [p for p in (pod_problem(pod) for pod in pods if pod_phase_kind(pod) == "startup") if p]
        if problems:
            return "; ".join(problems)
        waiting = sum(1 for pod in pods if pod_phase_kind(pod) == "startup")
        return f"{waiting} pod(s) still starting" if waiting else (state.message or state.summary())
    return state.summary()


def _epoch(value: Any) -> float | None:
    """The *latest* instant an API timestamp may stand for: ``metav1.Time`` has whole seconds, so
    ``10:00:01Z`` means [10:00:01, 10:00:02). Budgets then never start early (a deadline never fires before
    its time); at worst they start up to a second late, and only for a phase the waiter did not see begin."""
    if not isinstance(value, str) or not value:
        return None
    try:
        seconds = datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return seconds if "." in value else seconds + 1.0


def _earliest(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _started_at(pod: Mapping[str, Any]) -> float | None:
    """When the pod's first container instance started running (current or previous instance)."""
    status = pod.get("status") or {}
    times: list[float | None] = []
    for container in status.get("containerStatuses") or []:
        for holder in ("state", "lastState"):
            for state in ("running", "terminated"):
                times.append(_epoch(((container.get(holder) or {}).get(state) or {}).get("startedAt")))
    return _earliest(times)


def _condition_time(obj: Mapping[str, Any], condition_type: str, status: str = "True") -> float | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == condition_type and condition.get("status") == status:
            return _epoch(condition.get("lastTransitionTime"))
    return None


def _created(obj: Mapping[str, Any]) -> float | None:
    return _epoch((obj.get("metadata") or {}).get("creationTimestamp"))


def phase_hints(
    phase: str, workload: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]
) -> tuple[float | None, float | None]:
    """(when ``phase`` began, when the first pod ran) from the objects' timestamps, when they tell.

    admission: the oldest waiting pod's creation, else the Suspended condition, else the workload's
    creation; startup: when the starting pods were scheduled; running: the first container start.
    """
    pods = list(pods)
    running = _earliest(_started_at(pod) for pod in pods)
    in_phase = [pod for pod in pods if pod_phase_kind(pod) == phase]
    if phase == "admission":
        since = _earliest(_created(pod) for pod in in_phase)
        if since is None:
            since = _condition_time(workload, "Suspended") or _created(workload)
        return since, running
    if phase == "startup":
        since = _earliest(_condition_time(pod, "PodScheduled") or _created(pod) for pod in in_phase)
        return since, running
    if phase == "running":
        return running, running
    return None, running
