"""CronJob schedules and time zones checked at DAG parse time, with the API server's messages.

Why not just croniter: the API server parses ``spec.schedule`` with robfig/cron v3 ``ParseStandard`` and
rejects anything else with robfig's message, while croniter accepts more (seconds and year fields, ``L``,
``#``, ``W``, ``H``). The grammar, the time-zone rules and the fire times are the shared core's
(:mod:`airflow_k8s_ml.k8s.cron`, also what the local cluster validates and runs); this module only names the
operator argument in the error.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow_k8s_ml.k8s.cron import (
    TZ_IN_SCHEDULE_MESSAGE,
    Schedule,
    ScheduleError,
    load_location,
    parse_standard,
    time_zone_error,
)
from airflow_k8s_ml.manifests.validation import fail

__all__ = [
    "TZ_IN_SCHEDULE_MESSAGE",
    "next_schedule_time",
    "parse_schedule",
    "validate_schedule",
    "validate_time_zone",
]


def parse_schedule(schedule: Any, field: str = "schedule") -> Schedule:
    """Parse like the API server; ``ValidationError(field, <robfig's message>)`` on any problem."""
    if not isinstance(schedule, str):
        raise fail(field, f"must be a string, got {schedule!r}")
    if "TZ" in schedule:  # the API server's exact check (strings.Contains(schedule, "TZ"))
        raise fail(field, TZ_IN_SCHEDULE_MESSAGE)
    try:
        return parse_standard(schedule)
    except ScheduleError as exc:
        raise fail(field, str(exc)) from None


def validate_time_zone(time_zone: Any, field: str = "time_zone") -> str | None:
    """``None`` or an IANA zone name, with the API server's rules (no ``Local``, no empty string)."""
    if time_zone is None:
        return None
    if not isinstance(time_zone, str):
        raise fail(field, f"must be a string, got {time_zone!r}")
    problem = time_zone_error(time_zone)
    if problem is not None:
        raise fail(field, problem)
    return time_zone


def validate_schedule(schedule: Any, time_zone: Any = None) -> None:
    """Validate a CronJob's schedule and time zone before any API call (fields schedule, time_zone)."""
    parse_schedule(schedule, "schedule")
    validate_time_zone(time_zone, "time_zone")


def next_schedule_time(schedule: str, time_zone: str | None, after: datetime) -> datetime | None:
    """The first fire time strictly after ``after`` (aware; returned in UTC), or None if it never fires.

    The CronJob controller's first run is the first schedule time after creation; pass the creation time (or
    ``lastScheduleTime``) as ``after``. ``@every`` schedules fire ``after + interval``.
    """
    parsed = parse_schedule(schedule)
    zone = validate_time_zone(time_zone)
    if after.tzinfo is None:
        raise fail("after", "must be timezone-aware")
    fire = parsed.next(after.astimezone(load_location(zone or "UTC")))
    return None if fire is None else fire.astimezone(UTC)
