"""The local cluster's CronJob schedule module against robfig/cron v3 (grammar, messages, day rule) and the
cronjob controller's utils.go (cases ported from upstream's utils_test.go)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from airflow_k8s_ml.k8s.cron import ScheduleError, format_schedule, load_location, parse_standard
from airflow_k8s_ml.testbed.local_cluster.controllers.cronjob.schedule import (
    most_recent_schedule_time,
    next_schedule_delay,
)

TOP = datetime(2016, 5, 19, 10, 0, tzinfo=UTC)  # upstream's topOfTheHour (a Thursday)


def after_top(**delta: float) -> datetime:
    return TOP + timedelta(**delta)


def fires(schedule: str, start: datetime, count: int = 3) -> list[datetime]:
    parsed, out, t = parse_standard(schedule), [], start
    for _ in range(count):
        nxt = parsed.next(t)
        assert nxt is not None
        out.append(nxt)
        t = nxt
    return out


# -- grammar --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("schedule", "expression"),
    [
        ("*/5 * * * *", "0,5,10,15,20,25,30,35,40,45,50,55 * * * *"),
        ("0 9 ? JAN-MAR mon-fri", "0 9 * 1,2,3 1,2,3,4,5"),
        ("30 6-16/4 * * 1-5", "30 6,10,14 * * 1,2,3,4,5"),
        ("5/20 * * * *", "5,25,45 * * * *"),
        ("*/1 * 1,15 * SUN", "* * 1,15 * 0"),
        ("@weekly", "0 0 * * 0"),
        ("@annually", "0 0 1 1 *"),
        ("@midnight", "0 0 * * *"),
    ],
)
def test_parse_maps_robfig_grammar_to_croniter(schedule: str, expression: str) -> None:
    assert parse_standard(schedule).expression == expression


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
        ("0 0 * * * *", "expected exactly 5 fields, found 6: [0 0 * * * *]"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        ("5-2 * * * *", "beginning of range (5) beyond end of range (2): 5-2"),
        ("*/0 * * * *", "step of range should be a positive number: */0"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("*/2/3 * * * *", "too many slashes: */2/3"),
        ("L * * * *", 'failed to parse int from L: strconv.Atoi: parsing "L": invalid syntax'),
        (
            "* * * JANUARY *",
            'failed to parse int from JANUARY: strconv.Atoi: parsing "JANUARY": invalid syntax',
        ),
        ("@fortnightly", "unrecognized descriptor: @fortnightly"),
        ("@every 5x", 'failed to parse duration @every 5x: time: unknown unit "x" in duration "5x"'),
        ("@every 5", 'failed to parse duration @every 5: time: missing unit in duration "5"'),
        ("TZ=Mars/Base 0 * * * *", "provided bad location Mars/Base: unknown time zone Mars/Base"),
    ],
)
def test_parse_errors_quote_robfig(schedule: str, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        parse_standard(schedule)
    assert str(caught.value) == message


def test_tz_prefix_and_every_parse() -> None:
    parsed = parse_standard("CRON_TZ=Europe/Berlin 0 9 * * *")
    assert parsed.zone == ZoneInfo("Europe/Berlin") and parsed.expression == "0 9 * * *"
    assert parse_standard("@every 1h30m").every == timedelta(minutes=90)
    assert parse_standard("@every 500ms").every == timedelta(seconds=1)  # robfig: at least one second


def test_format_schedule_prefixes_the_time_zone() -> None:
    assert format_schedule("0 9 * * *", "Europe/Berlin") == "TZ=Europe/Berlin 0 9 * * *"
    assert format_schedule("0 9 * * *", None) == "0 9 * * *"
    assert format_schedule("0 9 * * *", "Mars/Base") == "0 9 * * *"
    assert format_schedule("TZ=UTC 0 9 * * *", "Europe/Berlin") == "TZ=UTC 0 9 * * *"
    assert load_location("") is UTC
    with pytest.raises(ScheduleError, match=r"^unknown time zone Mars/Base$"):
        load_location("Mars/Base")


# -- fire times ----------------------------------------------------------------------------------------
def test_next_is_strictly_after() -> None:
    assert fires("*/5 * * * *", TOP, 2) == [after_top(minutes=5), after_top(minutes=10)]
    assert fires("*/5 * * * *", after_top(seconds=30), 1) == [after_top(minutes=5)]


def test_day_of_month_and_week_are_ored_only_when_both_are_restricted() -> None:
    # TOP is Thursday 2016-05-19. Both restricted: the 1st OR any Monday.
    assert fires("0 0 1 * MON", TOP, 3) == [
        datetime(2016, 5, 23, tzinfo=UTC),
        datetime(2016, 5, 30, tzinfo=UTC),
        datetime(2016, 6, 1, tzinfo=UTC),
    ]
    # A star (even "*/1" or "?") in one field: the other alone decides.
    assert fires("0 0 * * MON", TOP, 1) == [datetime(2016, 5, 23, tzinfo=UTC)]
    assert fires("0 0 ? * MON", TOP, 1) == [datetime(2016, 5, 23, tzinfo=UTC)]
    assert fires("0 0 1 * */1", TOP, 1) == [datetime(2016, 6, 1, tzinfo=UTC)]


def test_time_zone_prefix_moves_fire_times() -> None:
    winter = datetime(2030, 1, 7, tzinfo=UTC)
    assert fires("TZ=Europe/Berlin 0 9 * * *", winter, 1) == [datetime(2030, 1, 7, 8, tzinfo=UTC)]
    summer = datetime(2030, 7, 1, tzinfo=UTC)
    assert fires("TZ=Europe/Berlin 0 9 * * *", summer, 1) == [datetime(2030, 7, 1, 7, tzinfo=UTC)]


def test_every_counts_from_the_whole_second() -> None:
    assert fires("@every 90s", after_top(seconds=0.7), 2) == [after_top(seconds=90), after_top(seconds=180)]


def test_never_firing_schedule_has_no_next_time() -> None:
    assert parse_standard("0 0 31 2 *").next(TOP) is None


# -- mostRecentScheduleTime (utils_test.go TestMostRecentScheduleTime) -----------------------------------
@pytest.mark.parametrize(
    ("schedule", "earliest", "now", "deadline", "recent", "missed"),
    [
        ("0 * * * *", TOP, after_top(seconds=30), None, None, "none"),
        ("0 * * * *", TOP, after_top(minutes=61), None, after_top(minutes=60), "none"),
        ("0 * * * *", after_top(seconds=10), after_top(minutes=301), None, after_top(minutes=300), "few"),
        (
            "30 6-16/4 * * 1-5",
            after_top(minutes=30),
            after_top(hours=24, minutes=31),
            None,
            after_top(hours=24, minutes=30),
            "few",
        ),
        ("30 10,11,12 * * 1-5", after_top(minutes=30), after_top(hours=30, minutes=30), None, None, "few"),
        (
            "30 6-16/4 * * 1-5",
            after_top(minutes=30),
            after_top(hours=96, minutes=31),
            None,
            after_top(hours=96, minutes=30),
            "few",
        ),
        (
            "30 6-16/4 * * 1-5",
            TOP,
            after_top(hours=24, minutes=31),
            None,
            after_top(hours=24, minutes=30),
            "few",
        ),
        (
            "@every 1h",
            after_top(minutes=1),
            after_top(days=7),
            None,
            after_top(days=6, hours=23, minutes=1),
            "many",
        ),
        ("0 * * * *", TOP, after_top(seconds=30), None, None, "none"),
        ("*/5 * * * *", after_top(minutes=30), after_top(minutes=31), 60, None, "none"),
        ("*/5 * * * *", after_top(minutes=30), after_top(minutes=32), 60, None, "none"),
    ],
)
def test_most_recent_schedule_time_matches_upstream(
    schedule: str,
    earliest: datetime,
    now: datetime,
    deadline: int | None,
    recent: datetime | None,
    missed: str,
) -> None:
    got = most_recent_schedule_time(earliest, now, parse_standard(schedule), deadline)
    assert got.error is None
    assert got.most_recent == recent
    assert ("none" if got.missed == 0 else "many" if got.missed > 100 else "few") == missed


def test_deadline_moves_the_earliest_time() -> None:
    got = most_recent_schedule_time(
        after_top(minutes=30), after_top(minutes=32), parse_standard("*/5 * * * *"), 60
    )
    assert got.earliest == after_top(minutes=31)


def test_rogue_schedule_is_an_error() -> None:
    got = most_recent_schedule_time(after_top(seconds=10), after_top(hours=1), parse_standard("59 23 31 2 *"))
    assert got.most_recent is None
    assert got.error == "time difference between two schedules is less than 1 second"


# -- nextScheduleTimeDuration (utils_test.go TestNextScheduleTimeDuration) -------------------------------
@pytest.mark.parametrize(
    ("schedule", "earliest", "now", "expected"),
    [
        (
            "30 6-16/4 * * 1-5",
            after_top(minutes=30),
            after_top(hours=24, minutes=31),
            timedelta(hours=3, minutes=59),
        ),
        ("30 10,11,12 * * 1-5", after_top(minutes=30), after_top(hours=30, minutes=30), timedelta(hours=66)),
        (
            "0 12 * * 4",
            after_top(hours=2),
            after_top(days=19, hours=1, minutes=30),
            timedelta(hours=48, minutes=30),
        ),
        ("0 12 * * 5", TOP, after_top(hours=6), timedelta(hours=20)),
    ],
)
def test_next_schedule_delay_matches_upstream(
    schedule: str, earliest: datetime, now: datetime, expected: timedelta
) -> None:
    delay = next_schedule_delay(earliest, now, parse_standard(schedule))
    assert delay == pytest.approx(expected.total_seconds() + 0.1)
