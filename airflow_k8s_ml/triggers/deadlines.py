"""Phased deadlines (pure): which budget a wait is spending, and whether one ran out.

Why phases: "the job took too long" is not actionable; "it waited 30 minutes for a GPU" (admission),
"its image never pulled" (startup) and "training ran past 6 h" (run) are. Each phase has its own budget,
plus an overall one (relative to the task's start, or absolute such as logical date + 6 h; the earlier
wins). The trigger calls :func:`check_deadlines` on every change and on a timer set by
:func:`next_expiry_at`, so an expiry is noticed within milliseconds, not at the next poll.

Everything here is a function of explicit times (``now``, ``task_started_at``, ``phase_since``): tests
move time by passing numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_k8s_ml.errors import ValidationError

if TYPE_CHECKING:  # the classifiers are imported where used: the trigger module imports Deadlines on the
    # triggerer's event loop, the status package costs ~15 ms to import
    from airflow_k8s_ml.status import WorkloadState

__all__ = [
    "Deadlines",
    "Expiry",
    "PhaseClock",
    "check_deadlines",
    "format_limit",
    "next_expiry_at",
    "phase_hints",
    "phase_reason",
]

#: Phases as the trigger tracks them (status.deadline_phase) and as an Expiry names them.
TRACKED_PHASES = ("admission", "startup", "running")
_FIELDS = ("admission", "startup", "run", "overall")


def _seconds(value: Any, field: str) -> timedelta | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        delta = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        delta = timedelta(seconds=float(value))
    else:
        raise ValidationError(field, f"must be a timedelta or seconds, got {value!r}")
    if delta.total_seconds() <= 0:
        raise ValidationError(field, f"must be positive, got {delta}")
    return delta


def _instant(value: Any, field: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValidationError(field, f"not an ISO 8601 time: {value!r}") from exc
    if not isinstance(value, datetime):
        raise ValidationError(field, f"must be a datetime, got {value!r}")
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Deadlines:
    """Budgets per phase; None means no limit. See the module docstring for the phases."""

    admission: timedelta | None = None  # suspended by a queue, or pods Unschedulable
    startup: timedelta | None = None  # pods Pending / ContainerCreating / ImagePullBackOff
    run: timedelta | None = None  # from the first running pod
    overall: timedelta | None = None  # from the task's start
    overall_at: datetime | None = None  # absolute; the earlier of overall/overall_at wins

    def __post_init__(self) -> None:
        for name in _FIELDS:
            object.__setattr__(self, name, _seconds(getattr(self, name), name))
        object.__setattr__(self, "overall_at", _instant(self.overall_at, "overall_at"))

    def is_empty(self) -> bool:
        return all(getattr(self, name) is None for name in (*_FIELDS, "overall_at"))

    def to_payload(self) -> dict[str, Any]:
        """JSON-safe: durations in seconds, the absolute time in ISO 8601 (trigger kwargs)."""
        payload: dict[str, Any] = {}
        for name in _FIELDS:
            value = getattr(self, name)
            payload[name] = value.total_seconds() if value is not None else None
        payload["overall_at"] = self.overall_at.isoformat() if self.overall_at is not None else None
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any] | None) -> Deadlines:
        payload = payload or {}
        unknown = set(payload) - {*_FIELDS, "overall_at"}
        if unknown:
            raise ValidationError("deadlines", f"unknown deadline(s): {', '.join(sorted(unknown))}")
        return cls(**{k: v for k, v in payload.items() if v is not None})

    def overall_deadline(self, task_started_at: float) -> tuple[float, timedelta | datetime] | None:
        """(epoch seconds, the limit that set it): the earlier of ``overall`` and ``overall_at``."""
        options: list[tuple[float, timedelta | datetime]] = []
        if self.overall is not None:
            options.append((task_started_at + self.overall.total_seconds(), self.overall))
        if self.overall_at is not None:
            options.append((self.overall_at.timestamp(), self.overall_at))
        return min(options, key=lambda option: option[0]) if options else None


@dataclass(frozen=True)
class Expiry:
    """A deadline that ran out: ``phase`` admission | startup | run | overall; the message to fail with."""

    phase: str
    limit: timedelta | datetime
    message: str


def format_limit(limit: timedelta | datetime) -> str:
    """``30m``, ``1h30m``, ``45s``, ``2.5s`` for budgets; ISO 8601 for an absolute time."""
    if isinstance(limit, datetime):
        return limit.isoformat()
    total = limit.total_seconds()
    if total < 60 and total != int(total):
        return f"{total:g}s"
    seconds = int(total)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts) or "0s"


def _candidates(
    deadlines: Deadlines, task_started_at: float, phase: str, phase_since: float, running_since: float | None
) -> list[tuple[float, str, timedelta | datetime]]:
    """(expires at, expiry phase, limit) for every budget that applies now."""
    out: list[tuple[float, str, timedelta | datetime]] = []
    overall = deadlines.overall_deadline(task_started_at)
    if overall is not None:
        out.append((overall[0], "overall", overall[1]))
    if phase == "admission" and deadlines.admission is not None:
        out.append((phase_since + deadlines.admission.total_seconds(), "admission", deadlines.admission))
    if phase == "startup" and deadlines.startup is not None:
        out.append((phase_since + deadlines.startup.total_seconds(), "startup", deadlines.startup))
    run_start = running_since if running_since is not None else (phase_since if phase == "running" else None)
    if run_start is not None and deadlines.run is not None and phase in TRACKED_PHASES:
        out.append((run_start + deadlines.run.total_seconds(), "run", deadlines.run))
    return out


def check_deadlines(
    deadlines: Deadlines,
    *,
    now: float,
    task_started_at: float,
    phase: str,
    phase_since: float,
    running_since: float | None = None,
    reason: str = "",
) -> Expiry | None:
    """The deadline that expired first, or None.

    ``phase`` is admission | startup | running (anything else, e.g. done, only checks overall);
    ``phase_since`` is when the current phase began; ``running_since`` when the first pod ran (the run
    budget keeps counting through restarts); ``reason`` is the "why" appended to the message (the
    scheduler's words, the image pull error...; see :func:`phase_reason`).
    """
    candidates = _candidates(deadlines, task_started_at, phase, phase_since, running_since)
    expired = [c for c in candidates if c[0] <= now]
    if not expired:
        return None
    _, which, limit = min(expired, key=lambda c: c[0])
    message = f"{which} deadline {format_limit(limit)} exceeded"
    return Expiry(which, limit, f"{message}: {reason}" if reason else message)


def next_expiry_at(
    deadlines: Deadlines,
    *,
    task_started_at: float,
    phase: str,
    phase_since: float,
    running_since: float | None = None,
) -> float | None:
    """When the next applicable budget runs out (epoch seconds), for the trigger's timer."""
    candidates = _candidates(deadlines, task_started_at, phase, phase_since, running_since)
    return min(c[0] for c in candidates) if candidates else None


def phase_reason(phase: str, state: WorkloadState, pods: Iterable[Mapping[str, Any]]) -> str:
    """Why the workload is still in ``phase``: what a human would look for in ``kubectl describe``.

    admission: the scheduler's message (``0/1 nodes are available: 1 Insufficient nvidia.com/gpu.``) or
    the queue's (Job suspended); startup: the stuck container (``ImagePullBackOff: ...``) or "pods are
    starting"; running/other: the workload's own state.
    """
    from airflow_k8s_ml.status import pod_phase_kind, pod_problem, scheduling_message

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


@dataclass
class PhaseClock:
    """When the current phase began, and when the workload first ran, as observed by one trigger.

    A transition seen live is timed by the observation; the phase current when the trigger (re)started is
    timed by the objects' own timestamps when they tell (``hint_since``), so a triggerer restart does not
    hand a stuck workload a fresh budget.
    """

    phase: str | None = None
    since: float = 0.0
    running_since: float | None = None

    def observe(
        self, phase: str, now: float, *, hint_since: float | None = None, hint_running: float | None = None
    ) -> None:
        first = self.phase is None
        if phase != self.phase:
            self.since = min(hint_since, now) if first and hint_since is not None else now
            self.phase = phase
        if phase == "running" and self.running_since is None:
            self.running_since = min(hint_running, now) if first and hint_running is not None else self.since
        elif first and hint_running is not None and self.running_since is None:
            self.running_since = min(hint_running, now)


def _epoch(value: Any) -> float | None:
    """The *latest* instant an API timestamp may stand for: ``metav1.Time`` has whole seconds, so
    ``10:00:01Z`` means [10:00:01, 10:00:02). Budgets then never start early (a deadline never fires before
    its time); at worst they start up to a second late, and only for a phase the trigger did not see begin."""
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
    from airflow_k8s_ml.status import pod_phase_kind

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
