"""Deadlines: parsed once from the arguments, carried as a payload, the earliest expiry, messages, and the
phase clock (pure; time is a number)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_k8s_ml.deadlines import Deadlines, Expiry, format_limit, to_timedelta
from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.status import WorkloadState
from airflow_k8s_ml.status.clock import PhaseClock, phase_hints, phase_reason
from tests.unit.pod_objects import GPU_MESSAGE, unschedulable_pod

T0 = 1_700_000_000.0


def clock(phase: str, since: float, running_since: float | None = None) -> PhaseClock:
    return PhaseClock(phase, since, running_since)


def expired(deadlines: Deadlines, now: float, phase: str, since: float, **kw: float) -> Expiry | None:
    return deadlines.expired(now=now, started_at=T0, clock=clock(phase, since, **kw))


def test_parse_takes_the_arguments_users_write() -> None:
    at = datetime(2024, 5, 1, 6, 0, tzinfo=UTC)
    parsed = Deadlines.parse(admission_timeout=1800, startup_timeout="90", run_timeout=timedelta(hours=6))
    assert parsed == Deadlines(timedelta(minutes=30), timedelta(seconds=90), timedelta(hours=6))
    assert Deadlines.parse(deadline=3600).deadline == timedelta(hours=1)
    assert Deadlines.parse(deadline="7200").deadline == timedelta(hours=2)  # a rendered template
    assert Deadlines.parse(deadline=at).deadline == at
    assert Deadlines.parse(deadline=datetime(2024, 5, 1, 6)).deadline == at  # naive = UTC
    assert Deadlines.parse(deadline="2024-05-01T06:00:00Z").deadline == at
    assert Deadlines.parse(deadline="").is_empty() and Deadlines().is_empty()


def test_payload_round_trip_keeps_the_argument_names() -> None:
    at = datetime(2024, 5, 1, 6, 0, tzinfo=UTC)
    deadlines = Deadlines(
        admission_timeout=timedelta(minutes=30), run_timeout=timedelta(hours=6), deadline=at
    )
    payload = deadlines.to_payload()
    assert payload == {
        "admission_timeout": 1800.0,
        "startup_timeout": None,
        "run_timeout": 21600.0,
        "deadline": "2024-05-01T06:00:00+00:00",
    }
    assert Deadlines.from_payload(payload) == deadlines
    relative = Deadlines(deadline=timedelta(hours=6))
    assert Deadlines.from_payload(relative.to_payload()) == relative
    assert Deadlines.from_payload(None).is_empty()


def test_a_payload_of_the_previous_version_still_reads() -> None:
    """A trigger deferred before the budgets took their argument names, resumed after an upgrade."""
    old = {"admission": 1800, "startup": None, "run": 60, "overall": None, "overall_at": "2024-05-01T06:00Z"}
    assert Deadlines.from_payload(old) == Deadlines(
        admission_timeout=timedelta(minutes=30),
        run_timeout=timedelta(minutes=1),
        deadline=datetime(2024, 5, 1, 6, 0, tzinfo=UTC),
    )


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"run_timeout": -1}, "run_timeout"),
        ({"admission_timeout": "soon"}, "admission_timeout"),
        ({"startup_timeout": True}, "startup_timeout"),
        ({"deadline": "tomorrow"}, "deadline"),
        ({"deadline": 0}, "deadline"),
        ({"queue": 5}, "deadlines"),
    ],
)
def test_invalid_budgets_name_the_argument(payload: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Deadlines.from_payload(payload)
    assert info.value.field == field


def test_to_timedelta_is_the_one_duration_converter() -> None:
    assert to_timedelta(None, "x") is None
    assert to_timedelta(" 2.5 ", "x") == timedelta(seconds=2.5)
    with pytest.raises(ValidationError, match="must be positive"):
        to_timedelta(timedelta(0), "x")


def test_admission_expires_under_its_argument_name() -> None:
    deadlines = Deadlines(admission_timeout=timedelta(minutes=30))
    assert expired(deadlines, T0 + 1799, "admission", T0) is None
    expiry = expired(deadlines, T0 + 1800, "admission", T0)
    assert expiry == Expiry("admission_timeout", timedelta(minutes=30), "admission_timeout 30m exceeded")


def test_a_phase_budget_only_applies_in_its_phase() -> None:
    deadlines = Deadlines(admission_timeout=timedelta(seconds=10), startup_timeout=timedelta(seconds=20))
    assert expired(deadlines, T0 + 15, "startup", T0) is None
    expiry = expired(deadlines, T0 + 25, "startup", T0)
    assert expiry is not None and expiry.name == "startup_timeout"


def test_run_timeout_counts_from_first_running_through_restarts() -> None:
    deadlines = Deadlines(run_timeout=timedelta(seconds=60))
    # Back in startup (a pod restarting) 70 s after the first pod ran: the run budget is still spent.
    expiry = expired(deadlines, T0 + 70, "startup", T0 + 65, running_since=T0)
    assert expiry is not None and expiry.name == "run_timeout"
    assert expired(deadlines, T0 + 59, "running", T0) is None


def test_deadline_relative_or_absolute() -> None:
    absolute = datetime.fromtimestamp(T0 + 100, tz=UTC)
    expiry = expired(Deadlines(deadline=absolute), T0 + 100, "running", T0)
    assert expiry is not None and expiry.name == "deadline" and expiry.limit == absolute
    assert expiry.message == f"deadline {absolute.isoformat()} exceeded"
    expiry = expired(Deadlines(deadline=timedelta(seconds=50)), T0 + 60, "admission", T0)
    assert expiry is not None and expiry.message == "deadline 50s exceeded"


def test_the_earliest_expiry_wins() -> None:
    deadlines = Deadlines(admission_timeout=timedelta(seconds=10), deadline=timedelta(seconds=30))
    expiry = expired(deadlines, T0 + 100, "admission", T0 + 5)
    assert expiry is not None and expiry.name == "admission_timeout"
    expiry = expired(deadlines, T0 + 100, "admission", T0 + 25)
    assert expiry is not None and expiry.name == "deadline"


def test_next_expiry_is_the_waiters_timer() -> None:
    deadlines = Deadlines(startup_timeout=timedelta(seconds=20), deadline=timedelta(seconds=60))
    assert deadlines.next_expiry_at(started_at=T0, clock=clock("startup", T0 + 5)) == T0 + 25
    assert Deadlines().next_expiry_at(started_at=T0, clock=clock("running", T0)) is None


@pytest.mark.parametrize(
    ("limit", "text"),
    [
        (timedelta(minutes=30), "30m"),
        (timedelta(hours=1, minutes=30), "1h30m"),
        (timedelta(seconds=45), "45s"),
        (timedelta(seconds=2.5), "2.5s"),
        (timedelta(hours=6), "6h"),
    ],
)
def test_format_limit(limit: timedelta, text: str) -> None:
    assert format_limit(limit) == text


def test_phase_reasons() -> None:
    assert (
        phase_reason("admission", WorkloadState("pending", "Created"), [unschedulable_pod()]) == GPU_MESSAGE
    )
    pod = {
        "metadata": {"name": "p"},
        "spec": {"nodeName": "n", "containers": [{"name": "main"}]},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [
                {"name": "main", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "denied"}}}
            ],
        },
    }
    assert (
        phase_reason("startup", WorkloadState("running"), [pod]) == "container main: ImagePullBackOff: denied"
    )


def test_phase_clock_times_live_transitions_by_observation() -> None:
    c = PhaseClock().observe("admission", T0, hint_since=T0 - 100)
    assert c.since == T0 - 100  # first sight: the objects' timestamps (a restarted trigger)
    c = c.observe("admission", T0 + 5)
    assert c.since == T0 - 100
    assert PhaseClock().observe("admission", T0, hint_since=T0 + 0.5).since == T0  # never later than now
    c = c.observe("startup", T0 + 10, hint_since=T0 - 50)
    assert c.since == T0 + 10  # seen live: the observation
    c = c.observe("running", T0 + 20)
    assert c.running_since == T0 + 20
    c = c.observe("startup", T0 + 30)
    assert c.running_since == T0 + 20 and c.since == T0 + 30


def test_phase_hints_read_pod_timestamps() -> None:
    running_pod = {
        "metadata": {"name": "p", "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"nodeName": "n"},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "main", "state": {"running": {"startedAt": "2023-11-14T22:13:30Z"}}}
            ],
        },
    }
    # Whole-second stamps stand for the latest instant they may mean: budgets never start early.
    assert phase_hints("running", {}, [running_pod]) == (T0 + 11, T0 + 11)
    since, running = phase_hints("admission", {}, [unschedulable_pod()])
    assert since == T0 + 1 and running is None
    running_pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"] = "2023-11-14T22:13:30.25Z"
    assert phase_hints("running", {}, [running_pod])[1] == T0 + 10.25
