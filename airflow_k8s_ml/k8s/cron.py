"""CronJob schedules the way kube-apiserver validates them and the cronjob controller runs them.

One grammar for both sides: the operators refuse a bad ``schedule``/``time_zone`` at DAG parse time
(``manifests.cron``), the local cluster answers 422 and runs CronJobs with it. Both upstream components call
robfig/cron v3 ``ParseStandard``: an optional ``TZ=``/``CRON_TZ=`` prefix, the descriptors
(``@yearly`` ... ``@hourly``, ``@every <duration>``) or exactly 5 fields with names, ranges, steps and ``?``.
Fire times are computed by croniter (a maintained cron library); what is parsed here is only what croniter
cannot tell us: robfig's grammar and error messages (the apiserver's 422 quotes them, and croniter accepts
extensions such as ``L``, ``#`` or a seconds field that robfig rejects), and robfig's "star bit", which
decides whether day-of-month and day-of-week are ANDed or ORed. Each field is handed to croniter as ``*``
when robfig saw a star, else as the explicit list of values, so both libraries apply the same day rule.

The controller's time arithmetic built on :meth:`Schedule.next` lives with the local cluster's CronJob
controller. Pure: stdlib and croniter (imported only when a fire time is computed).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, tzinfo

from airflow_k8s_ml.k8s.record import Record

__all__ = [
    "TZ_IN_SCHEDULE_MESSAGE",
    "Schedule",
    "ScheduleError",
    "format_schedule",
    "load_location",
    "parse_standard",
    "time_zone_error",
]

#: The apiserver's message for a schedule that carries its own zone (``validateScheduleFormat``).
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
# (minimum, maximum, names) of minute, hour, day of month, month, day of week.
_BOUNDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, _MONTHS),
    (0, 6, _DAYS),
)
# Patterns as strings, compiled (and cached by ``re``) on first use: this module is imported on every DAG
# parse, in a fresh dag-processor fork, and a schedule rarely needs them.
_GO_DURATION_PART = r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)"
_GO_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
# validTimeZoneCharacters: one IANA file name component.
_TZ_PART_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz.-_0123456789+")


class ScheduleError(ValueError):
    """A schedule robfig would not parse; ``str()`` is robfig's message."""


class Schedule(Record):
    """A parsed schedule: a croniter expression or a constant ``@every`` delay, in ``zone`` when the
    schedule carried a TZ prefix (otherwise in the zone of the time passed to :meth:`next`, as robfig).
    A :class:`~airflow_k8s_ml.k8s.record.Record`, not a frozen dataclass (generated code on every parse)."""

    expression: str | None = None
    every: timedelta | None = None
    zone: tzinfo | None = None
    never: bool = False  # a field that allows no value ("," alone): robfig's Next returns the zero time

    def next(self, after: datetime) -> datetime | None:
        """robfig ``Schedule.Next``: the first fire time strictly after ``after`` (aware), None if none."""
        if self.every is not None:
            return after.replace(microsecond=0) + self.every
        if self.never or self.expression is None:
            return None
        from croniter import CroniterBadDateError, croniter  # imported here: only the controller needs it

        zone = self.zone or after.tzinfo or UTC
        try:
            fire: datetime = croniter(self.expression, after.astimezone(zone)).get_next(datetime)
        except CroniterBadDateError:  # valid but never fires, e.g. "0 0 31 2 *"
            return None
        return fire.astimezone(after.tzinfo or UTC)


def load_location(name: str) -> tzinfo:
    """Go's ``time.LoadLocation``: "" and "UTC" are UTC; unknown names give Go's message."""
    if name in ("", "UTC"):
        return UTC
    if name == "Local":
        return UTC  # the local cluster's controller runs in UTC
    import zoneinfo  # here: most parses never load a zone

    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(f"unknown time zone {name}") from None


def time_zone_error(time_zone: str) -> str | None:
    """``validateTimeZone`` for a non-nil ``spec.timeZone``: an explicit IANA zone that loads, else the
    apiserver's message."""
    if time_zone == "":
        return "timeZone must be nil or non-empty string"
    for part in time_zone.split("/"):
        if part in (".", "..") or part.startswith("-") or not _is_tz_part(part):
            return f"unknown time zone {time_zone}"
    if time_zone.lower() == "local":
        return "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
    try:
        load_location(time_zone)
    except ScheduleError as exc:
        return str(exc)
    return None


def _is_tz_part(part: str) -> bool:
    r"""validTimeZoneCharacters, ``^[A-Za-z.\-_0-9+]{1,14}$``, without compiling it."""
    return 1 <= len(part) <= 14 and all(char in _TZ_PART_CHARS for char in part)


def format_schedule(schedule: str, time_zone: str | None) -> str:
    """The controller's ``formatSchedule``: a TZ inside the schedule wins, else ``timeZone`` is prefixed
    (when it loads), else the bare schedule runs in the controller's zone."""
    if "TZ" in schedule or time_zone is None:
        return schedule
    try:
        load_location(time_zone)
    except ScheduleError:
        return schedule
    return f"TZ={time_zone} {schedule}"


def parse_standard(spec: str) -> Schedule:
    """robfig ``ParseStandard``; raises :class:`ScheduleError` with robfig's message."""
    if not spec:
        raise ScheduleError("empty spec string")
    zone: tzinfo | None = None
    if spec.startswith(("TZ=", "CRON_TZ=")):
        space = spec.find(" ")
        name = spec[spec.find("=") + 1 : space if space >= 0 else len(spec)]
        try:
            zone = load_location(name)
        except ScheduleError as exc:
            raise ScheduleError(f"provided bad location {name}: {exc}") from None
        spec = spec[space:].strip() if space >= 0 else ""
    if spec.startswith("@"):
        return _parse_descriptor(spec, zone)
    fields = spec.split()
    if len(fields) != 5:
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    parts: list[str] = []
    never = False
    for text, bounds in zip(fields, _BOUNDS, strict=True):
        values, star = _field(text, bounds)
        never = never or not values
        parts.append("*" if star else ",".join(str(v) for v in sorted(values)))
    return Schedule(expression=" ".join(parts), zone=zone, never=never)


def _parse_descriptor(descriptor: str, zone: tzinfo | None) -> Schedule:
    if descriptor in _DESCRIPTORS:
        return Schedule(expression=_DESCRIPTORS[descriptor], zone=zone)
    if descriptor.startswith("@every "):
        try:
            seconds = _go_duration(descriptor[len("@every ") :])
        except ScheduleError as exc:
            raise ScheduleError(f"failed to parse duration {descriptor}: {exc}") from None
        # robfig Every(): whole seconds, at least one.
        return Schedule(every=timedelta(seconds=max(1, math.trunc(seconds))), zone=zone)
    raise ScheduleError(f"unrecognized descriptor: {descriptor}")


def _field(text: str, bounds: tuple[int, int, dict[str, int]]) -> tuple[set[int], bool]:
    """robfig ``getField``: comma-separated ranges (empty parts dropped, like Go's FieldsFunc)."""
    values: set[int] = set()
    star = False
    for expr in (part for part in text.split(",") if part):
        bits, expr_star = _range(expr, bounds)
        values |= bits
        star = star or expr_star
    return values, star


def _range(expr: str, bounds: tuple[int, int, dict[str, int]]) -> tuple[set[int], bool]:
    """robfig ``getRange``: ``*``/``?``, ``a`` or ``a-b``, optionally ``/step``."""
    minimum, maximum, names = bounds
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    star = low_high[0] in ("*", "?")
    if star:
        start, end = minimum, maximum
    else:
        start = _int_or_name(low_high[0], names)
        if len(low_high) > 2:
            raise ScheduleError(f"too many hyphens: {expr}")
        end = _int_or_name(low_high[1], names) if len(low_high) == 2 else start
    if len(range_and_step) > 2:
        raise ScheduleError(f"too many slashes: {expr}")
    step = 1
    if len(range_and_step) == 2:
        step = _atoi(range_and_step[1])
        if len(low_high) == 1:  # "N/step" means "N-max/step"
            end = maximum
        star = star and step <= 1
    if start < minimum:
        raise ScheduleError(f"beginning of range ({start}) below minimum ({minimum}): {expr}")
    if end > maximum:
        raise ScheduleError(f"end of range ({end}) above maximum ({maximum}): {expr}")
    if start > end:
        raise ScheduleError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ScheduleError(f"step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step)), star


def _int_or_name(expr: str, names: dict[str, int]) -> int:
    return names[expr.lower()] if expr.lower() in names else _atoi(expr)


def _atoi(expr: str) -> int:
    """robfig ``mustParseInt`` (Go's ``strconv.Atoi`` messages)."""
    digits = expr[1:] if expr[:1] in ("+", "-") else expr
    if not digits or not all(char in "0123456789" for char in digits):  # [+-]?[0-9]+, no regex to compile
        detail = f'strconv.Atoi: parsing "{expr}": invalid syntax'
        raise ScheduleError(f"failed to parse int from {expr}: {detail}")
    number = int(expr)
    if number < 0:
        raise ScheduleError(f"negative number ({number}) not allowed: {expr}")
    return number


def _go_duration(text: str) -> float:
    """Go's ``time.ParseDuration`` in seconds, with its error messages."""
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    if not body:
        raise ScheduleError(f'time: invalid duration "{text}"')
    seconds, pos = 0.0, 0
    for match in re.finditer(_GO_DURATION_PART, body):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * _GO_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(body):
        rest = body[pos:]
        if re.match(r"(\d+\.?\d*|\.\d+)$", rest):
            raise ScheduleError(f'time: missing unit in duration "{text}"')
        unit = re.match(r"(?:\d+\.?\d*|\.\d+)([^0-9.]+)", rest)
        if unit:
            raise ScheduleError(f'time: unknown unit "{unit.group(1)}" in duration "{text}"')
        raise ScheduleError(f'time: invalid duration "{text}"')
    return -seconds if text.startswith("-") else seconds
