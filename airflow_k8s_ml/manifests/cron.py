"""CronJob schedules and time zones, validated the way the Kubernetes API server does.

Why our own field parser: the API server parses ``spec.schedule`` with robfig/cron v3 ``ParseStandard`` (5
fields, names, ranges, steps, ``?``, ``@descriptors``, ``@every <duration>``) and rejects anything else with
robfig's message. croniter accepts more (seconds and year fields, ``L``, ``#``, ``W``, ``H``), so a schedule
croniter likes can still be a 422. We parse the robfig grammar here (same messages), then hand an equivalent
expression to croniter, which also validates it and computes next fire times.
"""

from __future__ import annotations

import re
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_k8s_ml.manifests.validation import fail

__all__ = ["CronSchedule", "next_schedule_time", "parse_schedule", "validate_schedule", "validate_time_zone"]

TZ_IN_SCHEDULE_MESSAGE = "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"

_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}
_DAYS = {d: i for i, d in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}


@dataclass(frozen=True)
class _Bounds:
    minimum: int
    maximum: int
    names: dict[str, int] | None = None


_FIELDS = (
    _Bounds(0, 59),
    _Bounds(0, 23),
    _Bounds(1, 31),
    _Bounds(1, 12, _MONTHS),
    _Bounds(0, 6, _DAYS),
)
_GO_DURATION = re.compile(r"^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$")
_GO_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}


@dataclass(frozen=True)
class CronSchedule:
    """A parsed schedule: five fields or an ``@every`` interval.

    ``values[i]`` are the allowed numbers of field i; ``star[i]`` whether it was ``*``/``?`` without a step,
    which decides robfig's day-of-month/day-of-week rule (AND if either is a star, else OR).
    """

    values: tuple[frozenset[int], ...] = ()
    star: tuple[bool, ...] = ()
    every: timedelta | None = None

    def croniter_expression(self) -> str:
        """Equivalent croniter expression (``*`` kept where robfig keeps its star bit: day OR/AND agrees)."""
        parts = []
        for allowed, star in zip(self.values, self.star, strict=True):
            parts.append("*" if star else ",".join(str(v) for v in sorted(allowed)))
        return " ".join(parts)


def _atoi(expr: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", expr):
        raise ValueError(f'failed to parse int from {expr}: strconv.Atoi: parsing "{expr}": invalid syntax')
    number = int(expr)
    if number < 0:
        raise ValueError(f"negative number ({number}) not allowed: {expr}")
    return number


def _int_or_name(expr: str, bounds: _Bounds) -> int:
    if bounds.names and expr.lower() in bounds.names:
        return bounds.names[expr.lower()]
    return _atoi(expr)


def _range(expr: str, bounds: _Bounds) -> tuple[set[int], bool]:
    """robfig ``getRange``: one ``a``, ``a-b``, ``*``, ``?`` optionally with ``/step``."""
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    star = False
    if low_high[0] in ("*", "?"):
        start, end, star = bounds.minimum, bounds.maximum, True
    else:
        start = _int_or_name(low_high[0], bounds)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _int_or_name(low_high[1], bounds)
        else:
            raise ValueError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _atoi(range_and_step[1])
        if len(low_high) == 1:  # "N/step" means "N-max/step"
            end = bounds.maximum
        if step > 1:
            star = False
    else:
        raise ValueError(f"too many slashes: {expr}")
    if start < bounds.minimum:
        raise ValueError(f"beginning of range ({start}) below minimum ({bounds.minimum}): {expr}")
    if end > bounds.maximum:
        raise ValueError(f"end of range ({end}) above maximum ({bounds.maximum}): {expr}")
    if start > end:
        raise ValueError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ValueError(f"step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step)), star


def _go_duration(text: str) -> timedelta:
    if text == "0":
        return timedelta(0)
    if not _GO_DURATION.match(text):
        raise ValueError(f'failed to parse duration {text}: time: invalid duration "{text}"')
    sign = -1 if text.startswith("-") else 1
    seconds = sum(float(number) * _GO_UNITS[unit] for number, unit in _GO_DURATION_PART.findall(text))
    return timedelta(seconds=sign * seconds)


def _parse(schedule: str) -> CronSchedule:
    if not schedule:
        raise ValueError("empty spec string")
    if schedule.startswith("@"):
        if schedule.startswith("@every "):
            delay = _go_duration(schedule[len("@every ") :])
            # robfig: Every() rounds to whole seconds with a floor of one second.
            return CronSchedule(
                every=max(timedelta(seconds=int(delay.total_seconds())), timedelta(seconds=1))
            )
        if schedule not in _DESCRIPTORS:
            raise ValueError(f"unrecognized descriptor: {schedule}")
        schedule = _DESCRIPTORS[schedule]
    fields = schedule.split()
    if len(fields) != 5:
        raise ValueError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    values: list[frozenset[int]] = []
    stars: list[bool] = []
    for text, bounds in zip(fields, _FIELDS, strict=True):
        allowed: set[int] = set()
        star = False
        for part in (p for p in text.split(",") if p):  # Go's FieldsFunc drops empty parts
            bits, part_star = _range(part, bounds)
            allowed |= bits
            star = star or part_star
        values.append(frozenset(allowed))
        stars.append(star)
    return CronSchedule(values=tuple(values), star=tuple(stars))


def parse_schedule(schedule: Any, field: str = "schedule") -> CronSchedule:
    """Parse like the API server; ``ValidationError(field, <robfig's message>)`` on any problem."""
    if not isinstance(schedule, str):
        raise fail(field, f"must be a string, got {schedule!r}")
    if "TZ" in schedule:  # the API server's exact check (strings.Contains(schedule, "TZ"))
        raise fail(field, TZ_IN_SCHEDULE_MESSAGE)
    try:
        parsed = _parse(schedule)
    except ValueError as exc:
        raise fail(field, str(exc)) from None
    if parsed.every is None and all(parsed.values):
        _croniter_check(parsed.croniter_expression(), field)
    return parsed


def _croniter_check(expression: str, field: str) -> None:
    from croniter import croniter  # imported lazily: DAG parsing does not need it

    if not croniter.is_valid(expression):
        raise fail(field, f"invalid schedule (croniter rejected {expression!r})")


_TZ_PART = re.compile(r"^[A-Za-z.\-_0-9+]{1,14}$")


def validate_time_zone(time_zone: Any, field: str = "time_zone") -> str | None:
    """``None`` or an IANA zone name, with the API server's rules (no ``Local``, no empty string)."""
    if time_zone is None:
        return None
    if not isinstance(time_zone, str):
        raise fail(field, f"must be a string, got {time_zone!r}")
    if time_zone == "":
        raise fail(field, "timeZone must be nil or non-empty string")
    for part in time_zone.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.match(part):
            raise fail(field, f"unknown time zone {time_zone}")
    if time_zone.lower() == "local":
        raise fail(
            field, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
        )
    try:
        zoneinfo.ZoneInfo(time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise fail(field, f"unknown time zone {time_zone}") from None
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
    zone = zoneinfo.ZoneInfo(validate_time_zone(time_zone) or "UTC")
    if after.tzinfo is None:
        raise fail("after", "must be timezone-aware")
    if parsed.every is not None:
        return (after + parsed.every).astimezone(UTC)
    if not all(parsed.values):
        return None
    from croniter import CroniterBadDateError, croniter

    try:
        fire = croniter(parsed.croniter_expression(), after.astimezone(zone)).get_next(datetime)
    except CroniterBadDateError:  # e.g. "0 0 31 2 *": valid but never fires
        return None
    return fire.astimezone(UTC)
