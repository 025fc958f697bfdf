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
a stuck pod named as soon as it is seen (:func:`_stuck`, causes from :mod:`~airflow_k8s_ml.status.stuck`)
and a "still waiting for ... since ..." line when nothing was said for a while (:func:`_still`) are two of
them. The one extra read they need - Warning events of a pod whose status cannot say why it does not start
(a volume that cannot be mounted) - is asked like the queue position: :func:`events_ask` before the report.

Standard library only, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from airflow_k8s_ml.deadlines import Deadlines, format_limit
from airflow_k8s_ml.status.clock import PhaseClock, phase_reason
from airflow_k8s_ml.status.disruption import Disruption, count_text, disrupted_pods
from airflow_k8s_ml.status.kueue import (
    PositionAsked,
    QueueState,
    admission_reason,
    follow,
    next_position_ask,
    queued_job_uid,
    workload_for,
)
from airflow_k8s_ml.status.pod import owned_by
from airflow_k8s_ml.status.rollout_progress import RolloutProgress, progress_line
from airflow_k8s_ml.status.stuck import DEFAULT_RULES, StuckRules, needs_events, stuck_causes
from airflow_k8s_ml.status.wait import Decision, Observation, Target, decide, uid_of

__all__ = [
    "DIAGNOSTIC_LINES",
    "STUCK_TAIL_LINES",
    "WARNING_LIMIT",
    "Diagnose",
    "Line",
    "Look",
    "Pace",
    "Report",
    "Said",
    "events_ask",
    "over_limit",
    "position_ask",
    "report",
]

#: The most last lines of one pod an event carries (it is stored in the metadata DB: kept small).
DIAGNOSTIC_LINES = 20
#: The most Warning events an event carries.
WARNING_LIMIT = 10
#: The last lines of a crash-looping container logged under its stuck line.
STUCK_TAIL_LINES = 5


@dataclass(frozen=True)
class Pace:
    """How often a wait speaks and reads beyond its decision: a "still waiting" line after ``still_every``
    seconds without a line, the Warning events of a pod stuck creating its containers at most every
    ``events_every`` seconds, and the early-failure rules (:class:`~airflow_k8s_ml.status.stuck.StuckRules`).
    The provider's options (``[airflow_k8s_ml]``) fill it: :meth:`airflow_k8s_ml.config.WaitTimings.pace`."""

    still_every: float = 300.0
    events_every: float = 10.0
    stuck: StuckRules = DEFAULT_RULES


@dataclass(frozen=True)
class Said:
    """What a wait carries from one look to the next: the phase clock, and what it already said or asked -
    the queue state last logged, the last position ask and its answer (None: no position known), the
    rollout counts last logged, the pods already named as disrupted (each once, oldest first: the count
    ``max_disruptions`` limits, and the XCom's)."""

    clock: PhaseClock = field(default_factory=PhaseClock)
    queue: QueueState | None = None
    asked: PositionAsked | None = None
    pending: Mapping[str, Any] | None = None
    rollout: RolloutProgress | None = None
    disrupted: tuple[Disruption, ...] = ()
    #: ``pod/cause`` of every stuck cause already named (each is said once per pod).
    stuck: frozenset[str] = frozenset()
    #: The pods' Warning events last read (:func:`events_ask`), and when.
    events: tuple[Mapping[str, Any], ...] = ()
    events_at: float | None = None
    #: When the wait last said something (or first looked): the "still waiting" line counts from it.
    spoke_at: float | None = None

    def answered(self, ask: PositionAsked, pending: Mapping[str, Any] | None) -> Said:
        """After the position ask ``ask``: its answer (None when the visibility API did not give one)."""
        return replace(self, asked=ask, pending=pending)


@dataclass(frozen=True)
class Look:
    """What a shell fetched for one look. ``obj`` None: not found, then ``tombstone`` is its last state
    seen; ``pods`` None: not read yet (a pod watch still listing); ``workloads``: the Kueue Workloads listed
    for a queued job (None: not read this look - not queued, Kueue absent, its watch not synced);
    ``gone_pods``: pods seen deleted (the trigger's pod watch keeps them), diagnosed with the others;
    ``events``: the Warning events of the namespace's pods when :func:`events_ask` asked for them (None:
    not read this look)."""

    obj: Mapping[str, Any] | None
    pods: Sequence[Mapping[str, Any]] | None = ()
    tombstone: Mapping[str, Any] | None = None
    workloads: Sequence[Mapping[str, Any]] | None = None
    gone_pods: Sequence[Mapping[str, Any]] = ()
    events: Sequence[Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class Line:
    """One line for the task log; ``tail`` (pod, container): log that container's last
    :data:`STUCK_TAIL_LINES` lines under it (a crash loop's)."""

    level: Literal["info", "warning"]
    text: str
    tail: tuple[str, str] | None = None


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
    #: When to look again even if nothing changes (a budget, a "still waiting" line, an events read).
    next_look_at: float | None = None

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


def events_ask(look: Look, said: Said, *, now: float, every: float) -> bool:
    """Whether to read the pods' Warning events before :func:`report`: a pod is scheduled but creating its
    containers with nothing in its status to say why (only a ``FailedMount`` event can), and the last read
    is ``every`` seconds old. Its answer goes into :attr:`Look.events`."""
    if look.obj is None or not look.pods or not any(needs_events(pod) for pod in look.pods):
        return False
    return said.events_at is None or now - said.events_at >= every


def _stuck(target: Target, look: Look, decision: Decision, said: Said) -> tuple[Said, tuple[Line, ...]]:
    """Each stuck cause of each pod, in the cluster's words, once per pod and cause."""
    if look.obj is None or decision.vanished or _replaced(target, look.obj):
        return said, ()
    lines: list[Line] = []
    known = set(said.stuck)
    for pod in look.pods or ():
        for cause in stuck_causes(pod, said.events):
            key = f"{cause.pod}/{cause.key}"
            if key in known:
                continue
            known.add(key)
            tail = (cause.pod, cause.container) if cause.crash_loop else None
            lines.append(Line("warning", f"{target.what}: pod {cause.pod} is stuck: {cause.text}", tail))
    return replace(said, stuck=frozenset(known)), tuple(lines)


def _since(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_WAITS_FOR = {"admission": "admission", "startup": "its pods to start", "running": "it to finish"}


def still_line(target: Target, look: Look, decision: Decision, said: Said, now: float) -> str:
    """``Job ns/x: still waiting for its pods to start since 2025-01-01T10:00:00Z (5m): <why>``."""
    clock = said.clock
    phase = clock.phase or "admission"
    queue = said.queue
    if phase == "admission" and queue is not None and queue.waiting:
        why = admission_reason(queue)
    else:
        why = phase_reason(phase, decision.state, look.pods or ())
    waited = format_limit(timedelta(seconds=max(0, round(now - clock.since))))
    what = _WAITS_FOR.get(phase, phase)
    return f"{target.what}: still waiting for {what} since {_since(clock.since)} ({waited}): {why}"


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
    uid, known = uid_of(obj), {d.uid for d in said.disrupted}
    mine = [pod for pod in [*(look.pods or ()), *look.gone_pods] if owned_by(pod, uid)]
    new = [d for d in disrupted_pods(mine) if d.uid not in known]
    if not new:
        return said, None
    seen = (*said.disrupted, *new)
    texts = [f"pod {d.pod} disrupted: {d.reason}: {d.message}" for d in new]
    text = f"{target.what}: {'; '.join(texts)} (disruption {len(seen)}; not counted as a failure, the " + (
        "replacement resumes from the newest complete checkpoint)"
    )
    return replace(said, disrupted=seen), Line("warning", text)


def over_limit(target: Target, decision: Decision, said: Said, deadlines: Deadlines) -> Decision:
    """The decision once the disruptions seen pass ``max_disruptions``: a ``deadline`` outcome (the
    operator deletes the workload and fails the task) whose message counts them - ``evicted 3 times`` or
    ``disrupted 3 times (2 evicted, 1 preempted)``. A finished workload stays finished: the limit ends a
    wait, it does not undo a success."""
    limit = deadlines.max_disruptions
    if decision.done or limit is None or len(said.disrupted) <= limit:
        return decision
    pods = ", ".join(f"{d.pod} ({d.reason})" for d in said.disrupted)
    message = (
        f"{target.what} {count_text(said.disrupted)} in this attempt, over max_disruptions {limit}: {pods}. "
        "Each was replaced and resumed from its newest checkpoint; the workload was deleted. Find out why "
        "its pods keep being taken (drains, preemption, spot interruptions) or raise max_disruptions."
    )
    return replace(decision, verdict="deadline", message=message, expired="max_disruptions")


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
    pace: Pace | None = None,
) -> Report:
    """One look, decided and reported: the queue followed (its state feeds the decision), then
    :func:`~airflow_k8s_ml.status.wait.decide`, then the lines that changed and the diagnostics a final
    decision needs (``lines``: the most last lines per pod the caller wants, capped at
    :data:`DIAGNOSTIC_LINES`)."""
    pace = pace or Pace()
    queue, queue_line = _queue(target, look, said)
    observed = Observation(look.obj, look.pods, tombstone=look.tombstone, queue=queue)
    decision = decide(target, observed, now=now, deadlines=deadlines, clock=said.clock, stuck=pace.stuck)
    said = replace(said, clock=decision.clock, queue=queue)
    if look.events is not None:
        said = replace(said, events=tuple(look.events), events_at=now)
    said_lines = [queue_line] if queue_line is not None else []
    said, stuck_lines = _stuck(target, look, decision, said)
    said_lines += stuck_lines
    for say in _AFTER_DECISION:
        said, line = say(target, look, decision, said)
        if line is not None:
            said_lines.append(line)
    limited = over_limit(target, decision, said, deadlines)
    if limited is not decision:
        decision = limited
        said_lines.append(Line("warning", f"{target.what}: {decision.message}"))
    said = _spoken(target, look, decision, said, said_lines, now, pace)
    admitted_at = queue.admitted_at if queue is not None else None
    return Report(
        decision,
        said,
        tuple(said_lines),
        _diagnose(decision, look, lines),
        admitted_at,
        next_look_at=_next_look_at(look, decision, said, pace),
    )


def _spoken(
    target: Target, look: Look, decision: Decision, said: Said, lines: list[Line], now: float, pace: Pace
) -> Said:
    """Never silent: a "still waiting" line when the wait said nothing for ``pace.still_every`` seconds
    (appended to ``lines``); the time of the last line carried on."""
    if lines:
        return replace(said, spoke_at=now)
    if said.spoke_at is None or decision.done or look.obj is None:
        return replace(said, spoke_at=said.spoke_at if said.spoke_at is not None else now)
    if now - said.spoke_at < pace.still_every:
        return said
    lines.append(Line("info", still_line(target, look, decision, said, now)))
    return replace(said, spoke_at=now)


def _next_look_at(look: Look, decision: Decision, said: Said, pace: Pace) -> float | None:
    """The earliest of the decision's next budget, the next "still waiting" line and the next events
    read: the shells sleep until then when nothing changes."""
    if decision.done:
        return None
    times = [decision.next_look_at]
    if said.spoke_at is not None:
        times.append(said.spoke_at + pace.still_every)
    if look.pods and any(needs_events(pod) for pod in look.pods) and said.events_at is not None:
        times.append(said.events_at + pace.events_every)
    present = [t for t in times if t is not None]
    return min(present) if present else None
