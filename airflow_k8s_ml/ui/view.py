"""What the Training tab says about one task instance: a pure function of the facts, the checkpoints, the
live status (if read) and the time.

Kept pure so every case - in progress with an uncommitted step, finished, failed mid-run, deferred with a
deadline running out, not a training task at all - is tested as data, and the page, the SVG and the JSON
all say the same thing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_k8s_ml.ui.facts import TaskFacts
from airflow_k8s_ml.ui.history import History, Point, metric_priority
from airflow_k8s_ml.ui.live import LiveStatus

__all__ = ["TRAINING_OPERATORS", "Deadline", "TrainingView", "build_view"]

#: Task types that get a Training tab (the TI's ``operator`` column holds the class name).
TRAINING_OPERATORS = frozenset(
    {"FineTuneJobOperator", "PyTorchJobOperator", "TFJobOperator", "TrainJobOperator"}
)
#: Metrics that count progress rather than measure the model: the x axis, not a curve.
COUNTERS = frozenset({"epoch", "global_step", "step"})
#: Metrics drawn and tabled, at most (losses and accuracies first, then by name); the rest are named in a
#: note. Training code chooses the metric names: 100,000 of them made one tab answer 147 MB of HTML.
MAX_DRAWN = 16
_RUNNING_STATES = frozenset({"running", "deferred", "queued", "scheduled", "up_for_retry", "restarting"})


@dataclass(frozen=True)
class Deadline:
    """One budget: its size, what is left of it now (None: not running down, or unknown), and a note."""

    name: str
    budget_seconds: float | None
    left_seconds: float | None = None
    note: str = ""


@dataclass(frozen=True)
class TrainingView:
    """Everything the tab shows; ``series`` maps a metric to its (step, value) points, oldest first."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    operator: str | None
    ti_state: str | None
    try_number: int
    is_training: bool
    progress: str  # in progress | finished | failed | not started
    workload: dict[str, Any] | None = None
    workload_state: dict[str, Any] | None = None
    state_source: str = ""
    live_phase: str | None = None
    checkpoint_uri: str | None = None
    checkpoints: tuple[Point, ...] = ()
    ignored: tuple[Point, ...] = ()
    latest: Point | None = None
    resume_from: str | None = None
    deadlines: tuple[Deadline, ...] = ()
    stopped: str | None = None
    notes: tuple[str, ...] = ()
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    #: the metrics the checkpoint table shows (at most :data:`MAX_DRAWN`)
    columns: tuple[str, ...] = ()
    #: how often the cluster took the workload's pods this attempt and the time it cost (the XCom's
    #: ``disruptions``, or a failed attempt's recorded outcome); None: not known
    disruptions: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON for ``/training/data.json`` (the browser test compares it with the manifests)."""

        def point(p: Point) -> dict[str, Any]:
            return {
                "step": p.step,
                "uri": p.uri,
                "complete": p.complete,
                "metrics": {name: _json_number(value) for name, value in p.metrics.items()},
                "created_at": p.created_at,
                "problem": p.problem,
            }

        return {
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "task_id": self.task_id,
            "map_index": self.map_index,
            "operator": self.operator,
            "ti_state": self.ti_state,
            "try_number": self.try_number,
            "is_training": self.is_training,
            "progress": self.progress,
            "workload": self.workload,
            "workload_state": self.workload_state,
            "state_source": self.state_source,
            "live_phase": self.live_phase,
            "checkpoint_uri": self.checkpoint_uri,
            "checkpoints": [point(p) for p in self.checkpoints],
            "ignored": [point(p) for p in self.ignored],
            "latest": point(self.latest) if self.latest else None,
            "resume_from": self.resume_from,
            "deadlines": [d.__dict__ for d in self.deadlines],
            "stopped": self.stopped,
            "notes": list(self.notes),
            "series": {name: [list(pair) for pair in pairs] for name, pairs in self.series.items()},
            "disruptions": self.disruptions,
        }


def _progress(state: str | None) -> str:
    if state in (None, "none", "removed"):
        return "not started"
    if state == "success":
        return "finished"
    if state in ("failed", "upstream_failed"):
        return "failed"
    if state in _RUNNING_STATES:
        return "in progress"
    return str(state)


def _json_number(value: float) -> float | str:
    """A metric for JSON: ``NaN``/``Infinity`` as strings (JSON has no such numbers; they are shown, not
    turned into a 500)."""
    return value if math.isfinite(value) else str(value)


def _columns(points: tuple[Point, ...]) -> tuple[tuple[str, ...], list[str]]:
    """(the metrics shown, by name; the ones omitted): at most :data:`MAX_DRAWN`, losses and accuracies
    chosen first."""
    names = sorted({name for p in points for name in p.metrics}, key=metric_priority)
    return tuple(sorted(names[:MAX_DRAWN])), names[MAX_DRAWN:]


def _series(points: tuple[Point, ...], columns: tuple[str, ...]) -> dict[str, list[tuple[int, float]]]:
    """Per drawn metric, its finite values (a NaN or an infinity has no place on an axis; the table shows
    it)."""
    series: dict[str, list[tuple[int, float]]] = {}
    for p in points:
        for name in columns:
            value = p.metrics.get(name)
            if name not in COUNTERS and value is not None and math.isfinite(value):
                series.setdefault(name, []).append((p.step, value))
    return dict(sorted(series.items()))


def _omitted_notes(points: tuple[Point, ...], omitted: list[str]) -> tuple[str, ...]:
    notes = []
    if omitted:
        named = ", ".join(omitted[:10]) + (", ..." if len(omitted) > 10 else "")
        notes.append(f"{len(omitted):,} more metrics not drawn (the tab draws {MAX_DRAWN}): {named}")
    cut = [p for p in points if p.metrics_omitted]
    if cut:
        most = max(p.metrics_omitted for p in cut)
        notes.append(
            f"{len(cut)} checkpoint(s) record more metrics than the tab reads (up to {most:,} more): "
            "their manifests hold them all"
        )
    return tuple(notes)


def _text(value: Any) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def build_view(
    facts: TaskFacts,
    history: History | None,
    *,
    now: float,
    live: LiveStatus | None = None,
    notes: tuple[str, ...] = (),
) -> TrainingView:
    """The tab's content; ``history`` None means the checkpoints could not be read (``notes`` say why)."""
    progress = _progress(facts.state)
    record = facts.record or {}
    result = facts.result if isinstance(facts.result, dict) else {}
    workload = _workload(record, result, facts.trigger)
    state, source = _state(facts, record, result, live)
    points = history.complete if history else ()
    latest = history.latest if history else None
    ignored = history.newer_incomplete if history else ()
    columns, omitted = _columns(points)
    return TrainingView(
        dag_id=facts.dag_id,
        run_id=facts.run_id,
        task_id=facts.task_id,
        map_index=facts.map_index,
        operator=facts.operator,
        ti_state=facts.state,
        try_number=facts.try_number,
        is_training=facts.operator in TRAINING_OPERATORS,
        progress=progress,
        workload=workload,
        workload_state=state,
        state_source=source,
        live_phase=live.phase if live else None,
        checkpoint_uri=_text(facts.rendered.get("checkpoint_uri")),
        checkpoints=points,
        ignored=ignored,
        latest=latest,
        resume_from=_text(result.get("resumed_from")) or _text(record.get("resumed_from")),
        deadlines=_deadlines(facts, live, now) if progress == "in progress" else (),
        stopped=_stopped(facts, progress, latest, ignored, _current_outcome(facts, record)),
        notes=notes + _omitted_notes(points, omitted),
        series=_series(points, columns),
        columns=columns,
        disruptions=_disruptions(result, _current_outcome(facts, record)),
    )


def _disruptions(result: dict[str, Any], outcome: dict[str, Any] | None) -> dict[str, Any] | None:
    """The count and the lost time, from a success's XCom or a failed attempt's outcome (the
    ``max_disruptions`` failure is one); a malformed value (the XCom is the user's to push) is not shown."""
    for source in (result, outcome or {}):
        figures = source.get("disruptions")
        if isinstance(figures, dict) and isinstance(figures.get("count"), int):
            lost = figures.get("lost_seconds")
            pods = [p for p in figures.get("pods") or [] if isinstance(p, dict)]
            return {
                "count": figures["count"],
                "lost_seconds": lost if isinstance(lost, int | float) else None,
                "pods": pods,
            }
    return None


def _workload(
    record: dict[str, Any], result: dict[str, Any], trigger: dict[str, Any] | None
) -> dict[str, Any] | None:
    source = record or result or trigger or {}
    if not source.get("name"):
        return None
    return {
        "kind": source.get("kind"),
        "api_version": source.get("api_version") or (trigger or {}).get("api_version"),
        "name": source.get("name"),
        "namespace": source.get("namespace"),
        "uid": source.get("uid"),
        "attempt": record.get("attempt") or result.get("attempts"),
    }


def _current_outcome(facts: TaskFacts, record: dict[str, Any]) -> dict[str, Any] | None:
    """The failure outcome of the current attempt (a stale one from an attempt a retry replaced is not)."""
    outcome = facts.outcome
    if not outcome or facts.state == "success":
        return None
    if record.get("attempt") is not None and outcome.get("attempt") != record.get("attempt"):
        return None
    return outcome


def _state(
    facts: TaskFacts, record: dict[str, Any], result: dict[str, Any], live: LiveStatus | None
) -> tuple[dict[str, Any] | None, str]:
    if live is not None:
        return live.state, "live (Kubernetes)"
    if isinstance(result.get("state"), dict):
        return dict(result["state"]), "task result (XCom)"
    outcome = _current_outcome(facts, record)
    if outcome:
        state = {k: outcome.get(k) for k in ("phase", "reason", "message")}
        return state, "recorded outcome (task_state_store)"
    if isinstance(record.get("result"), dict) and isinstance(record["result"].get("state"), dict):
        return dict(record["result"]["state"]), "cached result (task_state_store)"
    return None, ""


def _deadlines(facts: TaskFacts, live: LiveStatus | None, now: float) -> tuple[Deadline, ...]:
    """Budgets from the trigger's kwargs; the overall one counts from the attempt's submission, the current
    phase's from when the phase began (known only from a live read)."""
    trigger = facts.trigger
    if not trigger:
        return ()
    from airflow_k8s_ml.deadlines import PHASE_BUDGETS, Deadlines

    try:
        deadlines = Deadlines.from_payload(trigger.get("deadlines") or {})
    except Exception:  # kwargs of another version: show nothing rather than a wrong number
        return ()
    started = float(trigger.get("task_started_at") or 0.0)
    out: list[Deadline] = []
    for phase, name in PHASE_BUDGETS.items():
        budget = getattr(deadlines, name)
        if budget is None:
            continue
        seconds = budget.total_seconds()
        since = None
        if live is not None and live.phase == phase:
            since = live.running_since if phase == "running" else live.phase_since
        if since is not None:
            # at most the whole budget: the phase's start is the cluster's clock, ``now`` Airflow's, and a
            # skew between them (or a clock step) must not show more time left than the budget has
            left = min(seconds, since + seconds - now)
            out.append(Deadline(name, seconds, left, f"{phase} since {_iso(since)}"))
        else:
            note = (
                f"counts from the {phase} phase's start (unknown without a live read)"
                if live is None
                else (f"not in {phase} now")
            )
            out.append(Deadline(name, seconds, None, note))
    at = deadlines.deadline_at(started) if started else None
    if at is not None:
        limit = deadlines.deadline
        budget_seconds = limit.total_seconds() if isinstance(limit, timedelta) else at - started
        out.append(Deadline("deadline", budget_seconds, at - now, f"until {_iso(at)}"))
    return tuple(out)


def _stopped(
    facts: TaskFacts,
    progress: str,
    latest: Point | None,
    ignored: tuple[Point, ...],
    outcome: dict[str, Any] | None,
) -> str | None:
    """For a failed run: the last committed step, what came after it, and why the workload ended."""
    if progress != "failed":
        return None
    if latest is None:
        text = "training stopped before its first checkpoint was committed"
    else:
        epoch = latest.metrics.get("epoch")
        at = f" (epoch {epoch:g})" if epoch is not None else ""
        when = latest.created_at or "at an unknown time"
        text = f"training stopped after step {latest.step}{at}, committed {when}"
    if ignored:
        text += "; " + ", ".join(f"step {p.step} never completed ({p.problem})" for p in ignored)
    if outcome:
        reason = outcome.get("reason") or outcome.get("outcome")
        expired = outcome.get("expired_deadline") or outcome.get("deadline_phase")  # or a former record
        ending = f"the workload {outcome.get('phase')}: {reason}"
        if expired == "max_disruptions":  # a count, not a time: the disruption figures say how many
            ending = "disrupted more often than max_disruptions allows"
        elif expired:
            ending = f"{expired} expired"
        message = outcome.get("message")
        text += f"; {ending}" + (f" ({message})" if message else "")
    if facts.end_date is not None:
        text += f"; task ended {facts.end_date.astimezone(UTC).isoformat(timespec='seconds')}"
    return text


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
