"""``decide``: the one wait decision - is the workload done, gone, late, or still worth waiting for?

Why one pure function: the trigger (async, from shared watches), the operator's non-deferrable wait and
the sensor (sync, from GETs) used to answer this each in their own code, and the copies drifted (the sync
one read a Job deleted right after it succeeded as an error). Now each of them only gathers an
:class:`Observation` - the object, or the *tombstone* it left (its last state seen before deletion), and its
pods - calls :func:`decide`, and acts on the :class:`Decision`: diagnose and report, or wait until
``next_look_at``. The phase clock is a value passed in and handed back, so the function keeps no state.

Standard library only, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from airflow_k8s_ml.deadlines import Deadlines
from airflow_k8s_ml.status.classify import classify
from airflow_k8s_ml.status.clock import PhaseClock, phase_hints, phase_reason
from airflow_k8s_ml.status.kueue import QueueState, admission_reason
from airflow_k8s_ml.status.phases import deadline_phase
from airflow_k8s_ml.status.state import PENDING, WorkloadState
from airflow_k8s_ml.status.stuck import DEFAULT_RULES, Stuck, StuckRules, permanent_cause

__all__ = ["Decision", "Observation", "Target", "Verdict", "decide", "uid_of"]

#: ``wait``: nothing to report yet; the others are :data:`~airflow_k8s_ml.triggers.events.OUTCOMES`.
Verdict = Literal["wait", "succeeded", "failed", "deadline", "error"]


def uid_of(obj: Mapping[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


@dataclass(frozen=True)
class Target:
    """What is waited for: ``uid`` pins the instance ("" accepts whatever object has the name, as a sensor
    does); ``started_at`` (epoch seconds) is the base of a relative ``deadline``."""

    kind: str
    name: str
    namespace: str
    uid: str
    started_at: float

    @property
    def what(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Observation:
    """One look at the cluster. ``obj`` None: not found; then ``tombstone`` is its last state seen before it
    was deleted, if the looker saw one. ``pods`` None: not read yet (a pod watch still listing) - only the
    vanished and replaced cases are decided without them. ``queue``: the job's Kueue Workload read
    (:func:`~airflow_k8s_ml.status.kueue.queue_state`) when it is queued and Kueue is installed; an expired
    admission budget then quotes Kueue's reason."""

    obj: Mapping[str, Any] | None
    pods: Sequence[Mapping[str, Any]] | None = ()
    tombstone: Mapping[str, Any] | None = None
    queue: QueueState | None = None


@dataclass(frozen=True)
class Decision:
    """The verdict, the workload state it rests on, a message to report, and the clock to carry on with.

    ``uid`` is the instance decided on ("" when none was seen); ``expired`` the deadline that ran out
    (verdict ``deadline``); ``vanished`` marks a verdict read from a tombstone (its pods are gone: nothing
    to diagnose); ``next_look_at`` (verdict ``wait``) when the next budget runs out.
    """

    verdict: Verdict
    state: WorkloadState
    message: str
    clock: PhaseClock
    uid: str = ""
    expired: str | None = None
    vanished: bool = False
    next_look_at: float | None = None

    @property
    def done(self) -> bool:
        return self.verdict != "wait"


def _vanished(target: Target, tombstone: Mapping[str, Any] | None, clock: PhaseClock) -> Decision:
    """Gone: its last state if that was terminal (deleted right after finishing, e.g. TTL 0), else an
    error."""
    if tombstone is not None and (not target.uid or uid_of(tombstone) == target.uid):
        state = classify(tombstone, target.kind)
        if state.terminal:
            verdict: Verdict = "succeeded" if state.succeeded else "failed"
            message = f"{target.what} {state.summary()} (then deleted)"
            return Decision(verdict, state, message, clock, uid_of(tombstone), vanished=True)
    message = f"{target.what} was deleted while waiting"
    return Decision("error", WorkloadState(PENDING), message, clock, target.uid, vanished=True)


def _in_progress(
    target: Target,
    obj: Mapping[str, Any],
    state: WorkloadState,
    pods: Sequence[Mapping[str, Any]],
    now: float,
    deadlines: Deadlines,
    clock: PhaseClock,
    queue: QueueState | None = None,
    stuck: StuckRules = DEFAULT_RULES,
) -> Decision:
    """Not finished: advance the clock, then either a budget ran out, or a pod is stuck on a cause waiting
    cannot heal (``startup_timeout`` cut short: :func:`~airflow_k8s_ml.status.stuck.permanent_cause`), or
    we wait until the next budget runs out (or a grace period ends)."""
    phase = deadline_phase(state, pods)
    hint_since, hint_running = phase_hints(phase, obj, pods)
    clock = clock.observe(phase, now, hint_since=hint_since, hint_running=hint_running)
    uid = uid_of(obj)
    expiry = deadlines.expired(now=now, started_at=target.started_at, clock=clock)
    if expiry is None:
        startup_since = clock.since if clock.phase == "startup" else None
        cause, grace_ends = permanent_cause(pods, now=now, startup_since=startup_since, rules=stuck)
        if cause is not None:
            return Decision("deadline", state, _cut_short(cause), clock, uid, expired="startup_timeout")
        next_at = deadlines.next_expiry_at(started_at=target.started_at, clock=clock)
        if grace_ends is not None:
            next_at = grace_ends if next_at is None else min(next_at, grace_ends)
        return Decision("wait", state, "", clock, uid, next_look_at=next_at)
    queued = phase == "admission" and queue is not None and queue.waiting
    reason = admission_reason(queue) if queued and queue is not None else phase_reason(phase, state, pods)
    message = f"{expiry.message}: {reason}"
    return Decision("deadline", state, message, clock, uid, expired=expiry.name)


def _cut_short(cause: Stuck) -> str:
    """The message of an early failure: the cause in the cluster's words, and why the wait stopped."""
    return (
        f"startup_timeout cut short: [{cause.pod}] {cause.text} (waiting cannot make this pod start; "
        "see docs/troubleshooting.md)"
    )


def decide(
    target: Target,
    observed: Observation,
    *,
    now: float,
    deadlines: Deadlines,
    clock: PhaseClock,
    stuck: StuckRules = DEFAULT_RULES,
) -> Decision:
    """Decide from one observation. In order: vanished (tombstone) -> replaced (another uid) -> pods not
    read yet (wait) -> succeeded / failed -> a budget ran out -> a cause waiting cannot heal (``stuck``:
    whether to fail early on it, and the grace of a missing Secret/ConfigMap) -> wait."""
    obj = observed.obj
    if obj is None:
        return _vanished(target, observed.tombstone, clock)
    uid = uid_of(obj)
    state = classify(obj, target.kind)
    if target.uid and uid != target.uid:
        message = f"{target.what} was replaced (uid {uid}, waited for {target.uid})"
        return Decision("error", state, message, clock, target.uid)
    if observed.pods is None:
        return Decision("wait", state, "", clock, uid)
    if state.terminal:
        verdict: Verdict = "succeeded" if state.succeeded else "failed"
        return Decision(verdict, state, f"{target.what} {state.summary()}", clock, uid)
    return _in_progress(target, obj, state, observed.pods, now, deadlines, clock, observed.queue, stuck)
