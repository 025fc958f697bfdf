"""Phased deadlines: budgets, the earliest expiry, messages, and the phase clock (pure; time is a number)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_k8s_ml.errors import ValidationError
from airflow_k8s_ml.status import WorkloadState
from airflow_k8s_ml.triggers.deadlines import (
    Deadlines,
    PhaseClock,
    check_deadlines,
    format_limit,
    next_expiry_at,
    phase_hints,
    phase_reason,
)

T0 = 1_700_000_000.0
GPU_MESSAGE = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def unschedulable_pod() -> dict:
    return {
        "metadata": {"name": "ft-abc", "creationTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"containers": [{"name": "main"}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": GPU_MESSAGE}
            ],
        },
    }


def check(deadlines: Deadlines, now: float, phase: str, since: float, **kw) -> object:
    return check_deadlines(deadlines, now=now, task_started_at=T0, phase=phase, phase_since=since, **kw)


def test_payload_round_trip_and_emptiness() -> None:
    at = datetime(2024, 5, 1, 6, 0, tzinfo=UTC)
    deadlines = Deadlines(admission=timedelta(minutes=30), run=timedelta(hours=6), overall_at=at)
    payload = deadlines.to_payload()
    assert payload == {
        "admission": 1800.0,
        "startup": None,
        "run": 21600.0,
        "overall": None,
        "overall_at": "2024-05-01T06:00:00+00:00",
    }
    assert Deadlines.from_payload(payload) == deadlines
    assert Deadlines().is_empty() and Deadlines.from_payload(None).is_empty()
    assert not deadlines.is_empty()


def test_seconds_and_naive_times_are_accepted() -> None:
    deadlines = Deadlines(startup=90, overall_at=datetime(2024, 5, 1, 6, 0))  # type: ignore[arg-type]
    assert deadlines.startup == timedelta(seconds=90)
    assert deadlines.overall_at is not None and deadlines.overall_at.tzinfo is UTC


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"run": -1}, "run"),
        ({"admission": "soon"}, "admission"),
        ({"overall_at": "tomorrow"}, "overall_at"),
        ({"queue": 5}, "deadlines"),
    ],
)
def test_invalid_budgets_name_the_field(payload: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        Deadlines.from_payload(payload)
    assert info.value.field == field


def test_admission_expires_with_the_schedulers_words() -> None:
    deadlines = Deadlines(admission=timedelta(minutes=30))
    assert check(deadlines, T0 + 1799, "admission", T0) is None
    reason = phase_reason("admission", WorkloadState("pending", "Created"), [unschedulable_pod()])
    expiry = check(deadlines, T0 + 1800, "admission", T0, reason=reason)
    assert expiry is not None and expiry.phase == "admission"
    assert expiry.message == f"admission deadline 30m exceeded: {GPU_MESSAGE}"


def test_a_phase_budget_only_applies_in_its_phase() -> None:
    deadlines = Deadlines(admission=timedelta(seconds=10), startup=timedelta(seconds=20))
    assert check(deadlines, T0 + 15, "startup", T0) is None
    expiry = check(deadlines, T0 + 25, "startup", T0)
    assert expiry is not None and expiry.phase == "startup"


def test_run_budget_counts_from_first_running_through_restarts() -> None:
    deadlines = Deadlines(run=timedelta(seconds=60))
    # Back in startup (a pod restarting) 70 s after the first pod ran: the run budget is still spent.
    expiry = check(deadlines, T0 + 70, "startup", T0 + 65, running_since=T0)
    assert expiry is not None and expiry.phase == "run"
    assert check(deadlines, T0 + 59, "running", T0) is None


def test_overall_earlier_of_relative_and_absolute() -> None:
    absolute = datetime.fromtimestamp(T0 + 100, tz=UTC)
    deadlines = Deadlines(overall=timedelta(seconds=500), overall_at=absolute)
    expiry = check(deadlines, T0 + 100, "running", T0)
    assert expiry is not None and expiry.phase == "overall" and expiry.limit == absolute
    assert expiry.message.startswith(f"overall deadline {absolute.isoformat()} exceeded")
    relative = Deadlines(overall=timedelta(seconds=50), overall_at=absolute)
    expiry = check(relative, T0 + 60, "admission", T0)
    assert expiry is not None and expiry.limit == timedelta(seconds=50)


def test_the_earliest_expiry_wins() -> None:
    deadlines = Deadlines(admission=timedelta(seconds=10), overall=timedelta(seconds=30))
    expiry = check(deadlines, T0 + 100, "admission", T0 + 5)
    assert expiry is not None and expiry.phase == "admission"
    expiry = check(deadlines, T0 + 100, "admission", T0 + 25)
    assert expiry is not None and expiry.phase == "overall"


def test_next_expiry_is_the_timer_for_the_trigger() -> None:
    deadlines = Deadlines(startup=timedelta(seconds=20), overall=timedelta(seconds=60))
    at = next_expiry_at(deadlines, task_started_at=T0, phase="startup", phase_since=T0 + 5)
    assert at == T0 + 25
    assert next_expiry_at(Deadlines(), task_started_at=T0, phase="running", phase_since=T0) is None


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


def test_startup_reason_names_the_stuck_container() -> None:
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
    clock = PhaseClock()
    clock.observe("admission", T0, hint_since=T0 - 100)
    assert clock.since == T0 - 100  # first sight: the objects' timestamps (a restarted trigger)
    clock.observe("admission", T0 + 5)
    assert clock.since == T0 - 100
    assert PhaseClock().observe("admission", T0, hint_since=T0 + 0.5) is None  # never later than now
    clock.observe("startup", T0 + 10, hint_since=T0 - 50)
    assert clock.since == T0 + 10  # seen live: the observation
    clock.observe("running", T0 + 20)
    assert clock.running_since == T0 + 20
    clock.observe("startup", T0 + 30)
    assert clock.running_since == T0 + 20 and clock.since == T0 + 30


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
