"""The CronJob controller's time arithmetic (``pkg/controller/cronjob/utils.go``) over the shared schedule
grammar (:mod:`airflow_k8s_ml.k8s.cron`): ``most_recent_schedule_time`` and ``next_schedule_delay`` are
ports of ``mostRecentScheduleTime`` and ``nextScheduleTimeDuration``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from airflow_k8s_ml.k8s.cron import Schedule

__all__ = ["MANY_MISSED", "RecentSchedule", "most_recent_schedule_time", "next_schedule_delay"]

# The controller gives up listing missed start times beyond this many (utils.go: manyMissed).
MANY_MISSED = 100
# nextScheduleDelta: requeue a little after the schedule time, against clock skew.
_NEXT_SCHEDULE_DELTA = 0.1
_TOO_CLOSE = "time difference between two schedules is less than 1 second"


@dataclass(frozen=True)
class RecentSchedule:
    """``mostRecentScheduleTime``'s results: the time counted from, the most recent unmet fire time at or
    before now (None when none is due), how many fires were missed roughly, and the error upstream
    reports for schedules whose consecutive fires are less than a second apart (or that never fire)."""

    earliest: datetime
    most_recent: datetime | None
    missed: int
    error: str | None = None


def most_recent_schedule_time(
    earliest: datetime,
    now: datetime,
    schedule: Schedule,
    starting_deadline: int | None = None,
) -> RecentSchedule:
    """Port of ``mostRecentScheduleTime``. ``earliest`` is lastScheduleTime, else creationTimestamp; with
    ``starting_deadline`` (``includeStartingDeadlineSeconds``) nothing older than now - deadline counts."""
    if starting_deadline is not None:
        earliest = max(earliest, now - timedelta(seconds=starting_deadline))
    t1 = schedule.next(earliest)
    t2 = schedule.next(t1) if t1 is not None else None
    if t1 is not None and now < t1:
        return RecentSchedule(earliest, None, 0)
    if t1 is not None and t2 is not None and now < t2:
        return RecentSchedule(earliest, t1, 0)
    between = _round_seconds(t2 - t1) if t1 is not None and t2 is not None else 0
    if t1 is None or between < 1:
        return RecentSchedule(earliest, None, 0, _TOO_CLOSE)
    missed = int((now - t1).total_seconds()) // between + 1
    # Jump close to now by the interval of the first two fires, then let the schedule walk the rest (one
    # interval earlier than the estimate, for irregular schedules such as "30 6-16/4 * * 1-5").
    t: datetime | None = schedule.next(t1 + timedelta(seconds=(missed - 2) * between))
    most_recent = None
    while t is not None and t <= now:
        most_recent = t
        t = schedule.next(t)
    return RecentSchedule(earliest, most_recent, missed)


def next_schedule_delay(earliest: datetime, now: datetime, schedule: Schedule) -> float | None:
    """Port of ``nextScheduleTimeDuration``: seconds until the controller should look again (None when
    the schedule never fires again)."""
    recent = most_recent_schedule_time(earliest, now, schedule)
    if recent.error is not None:
        base = now
    elif recent.most_recent is None:
        base = recent.earliest if recent.missed == 0 else now
    else:
        base = recent.most_recent
    fire = schedule.next(base)
    if fire is None:
        return None
    return (fire - now).total_seconds() + _NEXT_SCHEDULE_DELTA


def _round_seconds(delta: timedelta) -> int:
    """Go's ``Duration.Round(time.Second)`` (halves away from zero) as whole seconds."""
    seconds = delta.total_seconds()
    return math.floor(abs(seconds) + 0.5) * (1 if seconds >= 0 else -1)
