"""``report``: what a wait says and gathers for one look - the pure half of both waiting shells.

Why: :func:`~airflow_k8s_ml.status.wait.decide` answers "done, gone, late or wait?" once, but acting on the
answer was written twice - the worker's synchronous look (GETs) and the triggerer's wait (watches) each
followed the Kueue queue, asked for the queue position, logged, chose the pods to diagnose and built the
event, and the two copies drifted (on a deadline one read every pod, the other only the failed ones; the
Warning events were read with different pods and limits). Now a shell fetches what a look needs
(:class:`Look`), asks :func:`position_ask` whether to read the queue position first, and gets a
:class:`Report` from :func:`report`: the decision, the lines to log (each said once per change), the
diagnostics to gather, and what to remember for the next look (:class:`Said`). It fetches what the report
asks for and sends what it says; nothing else is decided in a shell.

A kind of line is one function of :data:`_AFTER_DECISION` (or the queue's, which the decision needs):
adding one (a stuck pod named early, a periodic "still waiting for ...") is one change here.

Standard library only, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from airflow_k8s_ml.deadlines import Deadlines
from airflow_k8s_ml.status.clock import PhaseClock
from airflow_k8s_ml.status.disruption import disruption_of
from airflow_k8s_ml.status.kueue import (
    PositionAsked,
    QueueState,
    follow,
    next_position_ask,
    queued_job_uid,
    workload_for,
)
from airflow_k8s_ml.status.pod import owned_by
from airflow_k8s_ml.status.rollout_progress import RolloutProgress, progress_line
from airflow_k8s_ml.status.wait import Decision, Observation, Target, decide, uid_of

__all__ = [
    "DIAGNOSTIC_LINES",
    "WARNING_LIMIT",
    "Diagnose",
    "Line",
    "Look",
    "Report",
    "Said",
    "position_ask",
    "report",
]

#: The most last lines of one pod an event carries (it is stored in the metadata DB: kept small).
DIAGNOSTIC_LINES = 20
#: The most Warning events an event carries.
WARNING_LIMIT = 10


@dataclass(frozen=True)
class Said:
    """What a wait carries from one look to the next: the phase clock, and what it already said or asked -
    the queue state last logged, the last position ask and its answer (None: no position known), the
    rollout counts last logged, the uids of the pods already named as disrupted."""

    clock: PhaseClock = field(default_factory=PhaseClock)
    queue: QueueState | None = None
    asked: PositionAsked | None = None
    pending: Mapping[str, Any] | None = None
    rollout: RolloutProgress | None = None
    disrupted: tuple[str, ...] = ()

    def answered(self, ask: PositionAsked, pending: Mapping[str, Any] | None) -> Said:
        """After the position ask ``ask``: its answer (None when the visibility API did not give one)."""
        return replace(self, asked=ask, pending=pending)


@dataclass(frozen=True)
class Look:
    """What a shell fetched for one look. ``obj`` None: not found, then ``tombstone`` is its last state
    seen; ``pods`` None: not read yet (a pod watch still listing); ``workloads``: the Kueue Workloads listed
    for a queued job (None: not read this look - not queued, Kueue absent, its watch not synced);
    ``gone_pods``: pods seen deleted (the trigger's pod watch keeps them), diagnosed with the others."""

    obj: Mapping[str, Any] | None
    pods: Sequence[Mapping[str, Any]] | None = ()
    tombstone: Mapping[str, Any] | None = None
    workloads: Sequence[Mapping[str, Any]] | None = None
    gone_pods: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class Line:
    """One line for the task log."""

    level: Literal["info", "warning"]
    text: str


@dataclass(frozen=True)
class Diagnose:
    """The diagnostics a final decision needs: of ``obj``, the ``pods`` to choose from (failed ones first;
    ``every_pod``: the healthy ones too - on a deadline their last lines show how far the work got), at
    most ``lines`` last lines each, and at most ``warnings`` Warning events of the object and these pods."""

    obj: Mapping[str, Any]
    pods: tuple[Mapping[str, Any], ...]
    every_pod: bool
    lines: int = DIAGNOSTIC_LINES
    warnings: int = WARNING_LIMIT

    @classmethod
    def of(
        cls, verdict: str, obj: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], lines: int
    ) -> Diagnose:
        """The diagnostics of a ``failed`` or ``deadline`` outcome (every pod on a deadline); ``lines``:
        the most the caller wants, capped at :data:`DIAGNOSTIC_LINES`."""
        return cls(obj, tuple(pods), verdict == "deadline", lines=max(0, min(lines, DIAGNOSTIC_LINES)))


@dataclass(frozen=True)
class Report:
    """What one look says: the ``decision``, the ``lines`` to log now, the diagnostics to gather before the
    event (None: none), whether to let the log relay deliver its last lines first (``drain_logs``), and
    ``said``, the state for the next look. ``admitted_at``: when Kueue admitted the job, for the event."""

    decision: Decision
    said: Said
    lines: tuple[Line, ...] = ()
    diagnose: Diagnose | None = None
    admitted_at: str | None = None

    @property
    def drain_logs(self) -> bool:
        """The workload ended by itself: its last log lines belong in the task log before the event."""
        return self.decision.verdict in ("succeeded", "failed")


def _replaced(target: Target, obj: Mapping[str, Any]) -> bool:
    return bool(target.uid) and uid_of(obj) != target.uid


def position_ask(target: Target, look: Look, said: Said, *, now: float, every: float) -> PositionAsked | None:
    """The queue position to ask Kueue's visibility API for before :func:`report`, if any (its answer goes
    into :meth:`Said.answered`): for a queued job whose Workloads were read, by
    :func:`~airflow_k8s_ml.status.kueue.next_position_ask` (on a change of the Workload, else every
    ``every`` seconds, never once admitted)."""
    obj = look.obj
    if obj is None or look.workloads is None or _replaced(target, obj):
        return None
    uid = queued_job_uid(obj)
    if uid is None:
        return None
    return next_position_ask(workload_for(look.workloads, uid), said.asked, now, every)


def _queue(target: Target, look: Look, said: Said) -> tuple[QueueState | None, Line | None]:
    """The queued job's Kueue state (the last one when not read this look) and its line, once per change."""
    obj = look.obj
    if obj is None or _replaced(target, obj):
        return said.queue, None
    uid = queued_job_uid(obj)
    if uid is None:
        return None, None
    if look.workloads is None:
        return said.queue, None
    state, text = follow(said.queue, look.workloads, uid, target.what, said.pending)
    return state, Line("info", text) if text is not None else None


def _rollout(target: Target, look: Look, decision: Decision, said: Said) -> tuple[Said, Line | None]:
    """A Deployment's rollout progress: one line per change of its replica counts."""
    obj = look.obj
    if target.kind != "Deployment" or obj is None or _replaced(target, obj):
        return said, None
    progress, text = progress_line(obj, said.rollout)
    return replace(said, rollout=progress), Line("info", text) if text is not None else None


def _deadline(target: Target, look: Look, decision: Decision, said: Said) -> tuple[Said, Line | None]:
    """An expired budget, named when it expires (the event follows with the diagnostics)."""
    if decision.verdict != "deadline":
        return said, None
    return said, Line("warning", f"{target.what}: {decision.message}")


def _disruptions(target: Target, look: Look, decision: Decision, said: Said) -> tuple[Said, Line | None]:
    """Each pod of the workload disrupted (condition ``DisruptionTarget``: evicted, preempted, node
    shutdown), named once with the cluster's reason and message: a disruption is not a failure (the Job's
    pod failure policy ignores it) and the replacement resumes from the newest complete checkpoint."""
    obj = look.obj
    if obj is None or _replaced(target, obj):
        return said, None
    uid, texts, seen = uid_of(obj), [], list(said.disrupted)
    for pod in [*(look.pods or ()), *look.gone_pods]:
        condition = disruption_of(pod)
        if condition is None or uid_of(pod) in seen or not owned_by(pod, uid):
            continue
        seen.append(uid_of(pod))
        name = (pod.get("metadata") or {}).get("name")
        texts.append(f"pod {name} disrupted: {condition.get('reason')}: {condition.get('message')}")
    if not texts:
        return said, None
    text = f"{target.what}: {'; '.join(texts)} (disruption {len(seen)}; not counted as a failure, the " + (
        "replacement resumes from the newest complete checkpoint)"
    )
    return replace(said, disrupted=tuple(seen)), Line("warning", text)


#: The lines said after the decision, in order: ``(target, look, decision, said) -> (said, line or None)``.
_AFTER_DECISION: tuple[Callable[[Target, Look, Decision, Said], tuple[Said, Line | None]], ...] = (
    _rollout,
    _disruptions,
    _deadline,
)


def _diagnose(decision: Decision, look: Look, lines: int) -> Diagnose | None:
    """For a failure or an expired budget of an object still there: its pods and the ones seen deleted."""
    obj = look.obj
    if obj is None or decision.vanished or decision.verdict not in ("failed", "deadline"):
        return None
    pods = list(look.pods or ())
    seen = {uid_of(pod) for pod in pods}
    uid = uid_of(obj)
    pods += [pod for pod in look.gone_pods if uid_of(pod) not in seen and owned_by(pod, uid)]
    return Diagnose.of(decision.verdict, obj, pods, lines)


def report(
    target: Target,
    look: Look,
    said: Said,
    *,
    now: float,
    deadlines: Deadlines,
    lines: int = DIAGNOSTIC_LINES,
) -> Report:
    """One look, decided and reported: the queue followed (its state feeds the decision), then
    :func:`~airflow_k8s_ml.status.wait.decide`, then the lines that changed and the diagnostics a final
    decision needs (``lines``: the most last lines per pod the caller wants, capped at
    :data:`DIAGNOSTIC_LINES`)."""
    queue, queue_line = _queue(target, look, said)
    observed = Observation(look.obj, look.pods, tombstone=look.tombstone, queue=queue)
    decision = decide(target, observed, now=now, deadlines=deadlines, clock=said.clock)
    said = replace(said, clock=decision.clock, queue=queue)
    said_lines = [queue_line] if queue_line is not None else []
    for say in _AFTER_DECISION:
        said, line = say(target, look, decision, said)
        if line is not None:
            said_lines.append(line)
    admitted_at = queue.admitted_at if queue is not None else None
    return Report(decision, said, tuple(said_lines), _diagnose(decision, look, lines), admitted_at)
