"""``Deadlines``: the Airflow-side budgets of one wait, as one pure value parsed once.

Why one value: the budgets travel from the DAG (operator or sensor arguments, rendered) to the triggerer
(trigger kwargs, JSON) and back to the worker, and each hop used to convert and rename them again. They
are parsed once, by :meth:`Deadlines.parse`, from the arguments the user wrote; :meth:`to_payload` and
:meth:`from_payload` carry that value through the trigger's kwargs. A budget has one name everywhere -
argument, payload key, expiry, log line, error message, docs:

| name | counts | from |
|---|---|---|
| ``admission_timeout`` | queued (suspended by Kueue) or pods unschedulable | the phase's start |
| ``startup_timeout`` | pods scheduled but not running (images, containers) | the phase's start |
| ``run_timeout`` | from the first running pod, through restarts | the first container start |
| ``deadline`` | the whole wait: a duration, or an absolute time | the attempt's submission |
| ``max_disruptions`` | pods the cluster took away (``DisruptionTarget``), not a time | the wait's start |

``max_disruptions`` is a count, not a time, but it is a budget of the same wait and ends it the same way
(the workload deleted, the task failed with what ran out): it travels here so both waits read it where they
read the others. None: no limit (sensors, and operators given None); the operators default to
:data:`DEFAULT_MAX_DISRUPTIONS`.

With no argument, ``admission_timeout`` and ``startup_timeout`` still apply: :data:`DEFAULT_ADMISSION_TIMEOUT`
(6 hours: a busy queue, a GPU node being added by an autoscaler) and :data:`DEFAULT_STARTUP_TIMEOUT`
(30 minutes: a cold pull of a multi-gigabyte CUDA image on a slow link), filled in by
:meth:`Deadlines.with_defaults` when the task runs, so a pipeline written with the defaults cannot wait
forever on a pod that will never start. The provider's options ``default_admission_timeout`` and
``default_startup_timeout`` change them (``0``: no default). ``run_timeout`` and ``deadline`` have none: how
long a training may run is the user's to say.

Standard library only; every function takes the times it needs (tests move time by passing numbers).
Outside :mod:`airflow_k8s_ml.status` (which uses it) and made of named tuples rather than dataclasses on
purpose: it is imported when a DAG file is parsed (the parse-time check of the arguments), where neither the
classifiers nor a frozen dataclass (six times a named tuple's cost to define) are wanted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Protocol

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.k8s.record import Record

__all__ = [
    "DEADLINE_NAMES",
    "DEFAULT_ADMISSION_TIMEOUT",
    "DEFAULT_MAX_DISRUPTIONS",
    "DEFAULT_STARTUP_TIMEOUT",
    "DISRUPTION_LIMIT",
    "PHASE_BUDGETS",
    "Deadlines",
    "Expiry",
    "PhaseTimes",
    "format_limit",
    "to_timedelta",
]

#: Every deadline, by the argument name users write.
DEADLINE_NAMES = ("admission_timeout", "startup_timeout", "run_timeout", "deadline")
#: The budgets a task gets when it sets none (see the module docstring for why these values).
DEFAULT_ADMISSION_TIMEOUT = timedelta(hours=6)
DEFAULT_STARTUP_TIMEOUT = timedelta(minutes=30)
#: The budget of disruptions (evictions, preemptions) one attempt survives, by its argument name.
DISRUPTION_LIMIT = "max_disruptions"
#: Its default on the operators: a spot night sees one to three interruptions; more than five in one
#: attempt means the pods are being taken again and again (a node drained in a loop, a priority class
#: preempted on every admission), each costing up to a checkpoint interval, and failing with the count says
#: so where waiting on would only burn the budget of the night (docs/checkpoints.md).
DEFAULT_MAX_DISRUPTIONS = 5
#: Tracked phase (``status.deadline_phase``) -> the budget spent in it.
PHASE_BUDGETS: Mapping[str, str] = {
    "admission": "admission_timeout",
    "startup": "startup_timeout",
    "running": "run_timeout",
}
#: Payload keys of trigger kwargs serialised before the budgets took their argument names (a trigger
#: deferred by the previous version and resumed by this one).
_LEGACY_KEYS: Mapping[str, str] = {
    "admission": "admission_timeout",
    "startup": "startup_timeout",
    "run": "run_timeout",
    "overall": "deadline",
    "overall_at": "deadline",
}

Limit = timedelta | datetime


class PhaseTimes(Protocol):
    """When the current deadline phase began and when the first pod ran: what a budget counts from.

    A protocol rather than :class:`airflow_k8s_ml.status.clock.PhaseClock` itself, because ``status`` (the
    wait decision) imports this module: the budgets read the clock's three times without importing it.
    """

    @property
    def phase(self) -> str | None: ...
    @property
    def since(self) -> float: ...
    @property
    def running_since(self) -> float | None: ...


def to_timedelta(value: object, field: str) -> timedelta | None:
    """A positive budget: a ``timedelta``, a number of seconds, or the text of one (a rendered template
    such as ``"{{ params.run_timeout_minutes * 60 }}"``); None means "no such budget"."""
    if value is None:
        return None
    written = value
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValidationError(
                field, f"must be a timedelta or a number of seconds, got {value!r}"
            ) from None
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        shown = repr(value) if isinstance(value, bool) else type(value).__name__
        raise ValidationError(field, f"must be a timedelta or a number of seconds, got {shown}")
    delta = value if isinstance(value, timedelta) else timedelta(seconds=value)
    if delta <= timedelta(0):
        shown = f"{delta.total_seconds():g} seconds" if isinstance(written, timedelta) else repr(written)
        raise ValidationError(field, f"must be positive, got {shown}")
    return delta


def _aware(moment: datetime) -> datetime:
    """Naive datetimes are taken as UTC (Airflow's own convention for logical dates)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _count(value: object, field: str) -> int | None:
    """A whole number of at least 0 (None: no limit); anything else is an error naming ``field``."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(field, f"must be a whole number >= 0 (or None: no limit), got {value!r}")
    return value


def _deadline(value: object, field: str = "deadline") -> Limit | None:
    """``deadline``: a duration (timedelta or seconds) or an absolute time (datetime or ISO 8601 text, what
    ``{{ (logical_date + macros.timedelta(hours=6)).isoformat() }}`` renders to)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return _aware(value)
    if isinstance(value, str):
        if _is_number(value):
            return to_timedelta(value, field)
        try:
            return _aware(datetime.fromisoformat(value.strip().replace("Z", "+00:00")))
        except ValueError:
            raise ValidationError(
                field, f"must be a timedelta, a datetime or an ISO 8601 time, got {value!r}"
            ) from None
    return to_timedelta(value, field)


def format_limit(limit: Limit) -> str:
    """``30m``, ``1h30m``, ``45s``, ``2.5s`` for budgets; ISO 8601 for an absolute time."""
    if isinstance(limit, datetime):
        return limit.isoformat()
    total = limit.total_seconds()
    if total < 60 and total != int(total):
        return f"{total:g}s"
    hours, rest = divmod(int(total), 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


class Expiry(Record):
    """A budget that ran out: ``name`` is one of :data:`DEADLINE_NAMES`; the message to fail with."""

    name: str
    limit: Limit
    message: str


class Deadlines(Record):
    """The budgets of one wait (None: no limit), typed; build it with :meth:`parse` from raw arguments."""

    admission_timeout: timedelta | None = None
    startup_timeout: timedelta | None = None
    run_timeout: timedelta | None = None
    deadline: Limit | None = None
    max_disruptions: int | None = None

    @classmethod
    def parse(
        cls,
        *,
        admission_timeout: object = None,
        startup_timeout: object = None,
        run_timeout: object = None,
        deadline: object = None,
        max_disruptions: object = None,
    ) -> Deadlines:
        """The one converter from what a DAG (or a payload) holds; errors name the argument."""
        return cls(
            admission_timeout=to_timedelta(admission_timeout, "admission_timeout"),
            startup_timeout=to_timedelta(startup_timeout, "startup_timeout"),
            run_timeout=to_timedelta(run_timeout, "run_timeout"),
            deadline=_deadline(deadline),
            max_disruptions=_count(max_disruptions, DISRUPTION_LIMIT),
        )

    def with_defaults(self, *, admission_timeout: float | None, startup_timeout: float | None) -> Deadlines:
        """These budgets, with ``admission_timeout`` and ``startup_timeout`` (seconds; None: none) for the
        ones the task did not set."""
        return Deadlines(
            admission_timeout=self.admission_timeout or to_timedelta(admission_timeout, "admission_timeout"),
            startup_timeout=self.startup_timeout or to_timedelta(startup_timeout, "startup_timeout"),
            run_timeout=self.run_timeout,
            deadline=self.deadline,
            max_disruptions=self.max_disruptions,
        )

    def is_empty(self) -> bool:
        return all(value is None for value in self)

    def to_payload(self) -> dict[str, float | str | None]:
        """JSON-safe (trigger kwargs): durations in seconds, an absolute ``deadline`` in ISO 8601."""
        payload: dict[str, float | str | None] = {}
        for name in DEADLINE_NAMES:
            value = getattr(self, name)
            if isinstance(value, datetime):
                payload[name] = value.isoformat()
            else:
                payload[name] = value.total_seconds() if value is not None else None
        if self.max_disruptions is not None:  # absent when unset: an older triggerer reads the payload
            payload[DISRUPTION_LIMIT] = self.max_disruptions
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, object] | None) -> Deadlines:
        """Back from :meth:`to_payload` (also reads the keys of the previous version's payloads)."""
        values: dict[str, object] = {}
        for key, value in (payload or {}).items():
            name = key if key in (*DEADLINE_NAMES, DISRUPTION_LIMIT) else _LEGACY_KEYS.get(key)
            if name is None:
                known = ", ".join(DEADLINE_NAMES)
                raise ValidationError("deadlines", f"unknown deadline {key!r}; known: {known}")
            if value is not None:
                values[name] = value
        return cls.parse(**values)

    def deadline_at(self, started_at: float) -> float | None:
        """When ``deadline`` runs out (epoch seconds): ``started_at`` plus a duration, or the absolute
        time."""
        if isinstance(self.deadline, datetime):
            return self.deadline.timestamp()
        return started_at + self.deadline.total_seconds() if self.deadline is not None else None

    def _running(self, started_at: float, clock: PhaseTimes) -> list[tuple[float, str, Limit]]:
        """(expires at, name, limit) of every budget that is being spent now."""
        out: list[tuple[float, str, Limit]] = []
        at = self.deadline_at(started_at)
        if at is not None and self.deadline is not None:
            out.append((at, "deadline", self.deadline))
        for phase, name in (("admission", "admission_timeout"), ("startup", "startup_timeout")):
            budget: timedelta | None = getattr(self, name)
            if clock.phase == phase and budget is not None:
                out.append((clock.since + budget.total_seconds(), name, budget))
        run_start = clock.running_since
        if run_start is None and clock.phase == "running":
            run_start = clock.since
        if run_start is not None and self.run_timeout is not None and clock.phase in PHASE_BUDGETS:
            out.append((run_start + self.run_timeout.total_seconds(), "run_timeout", self.run_timeout))
        return out

    def expired(self, *, now: float, started_at: float, clock: PhaseTimes) -> Expiry | None:
        """The budget that ran out first by ``now``, or None. Its message ``<name> <limit> exceeded`` gets
        the phase's reason appended by the caller that knows it (:func:`~.clock.phase_reason`)."""
        expired = [item for item in self._running(started_at, clock) if item[0] <= now]
        if not expired:
            return None
        _, name, limit = min(expired, key=lambda item: item[0])
        return Expiry(name, limit, f"{name} {format_limit(limit)} exceeded")

    def next_expiry_at(self, *, started_at: float, clock: PhaseTimes) -> float | None:
        """When the next budget being spent runs out (epoch seconds): the waiter's timer."""
        running = self._running(started_at, clock)
        return min(item[0] for item in running) if running else None
