"""Five-field cron (`core/cron.py`): parsing, matching, and the next firing in a time zone,
DST-correct, with properties checked against a brute-force minute-by-minute walk."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings, strategies as st

from sessiongate.core.cron import CronError, CronExpr

NY = ZoneInfo("America/New_York")


def test_fields_take_ranges_lists_steps_and_names():
    expr = CronExpr.parse("*/15 9-17/4 1,15 jan-mar MON-fri")
    assert expr.minutes == {0, 15, 30, 45}
    assert expr.hours == {9, 13, 17}
    assert expr.days == {1, 15}
    assert expr.months == {1, 2, 3}
    assert expr.weekdays == {1, 2, 3, 4, 5}
    assert CronExpr.parse("0 0 * * 7").weekdays == {0}
    assert CronExpr.parse("5/20 * * * *").minutes == {5, 25, 45}
    daily, plain = CronExpr.parse("@daily"), CronExpr.parse("0 0 * * *")
    assert (daily.minutes, daily.hours, daily.days) == (plain.minutes, plain.hours, plain.days)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("* * * *", "5"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* 24 * * *", "hour"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "backwards"),
        ("* * * foo *", "month"),
        ("@often", "unknown macro"),
        ("0 0 30 2 *", "no chosen month"),
        ("1,,2 * * * *", "empty"),
    ],
)
def test_bad_expressions_are_refused_with_the_field_named(text, message):
    with pytest.raises(CronError, match=message):
        CronExpr.parse(text)


def test_day_of_month_or_day_of_week_when_both_are_restricted():
    expr = CronExpr.parse("0 12 13 * fri")  # the 13th, and every Friday
    after = datetime(2026, 3, 1, tzinfo=UTC)
    firings = []
    for _ in range(4):
        after = expr.next_after(after, ZoneInfo("UTC"))
        firings.append(after.day)
    assert firings == [6, 13, 20, 27]  # Fridays, and the 13th (also a Friday)


def test_a_wall_time_skipped_by_spring_forward_fires_at_the_gaps_end_once():
    expr = CronExpr.parse("30 2 * * *")
    # 8 March 2026: New York jumps from 02:00 to 03:00.
    fired = expr.next_after(datetime(2026, 3, 8, 5, 0, tzinfo=UTC), NY)
    assert fired is not None
    assert fired.astimezone(NY).replace(tzinfo=None) == datetime(2026, 3, 8, 3, 0)  # noqa: DTZ001
    nxt = expr.next_after(fired, NY)
    assert nxt is not None
    assert nxt.astimezone(NY).replace(tzinfo=None) == datetime(2026, 3, 9, 2, 30)  # noqa: DTZ001


def test_a_wall_time_repeated_by_fall_back_fires_once():
    expr = CronExpr.parse("30 1 * * *")
    # 1 November 2026: New York's 01:00-02:00 happens twice.
    first = expr.next_after(datetime(2026, 11, 1, 4, 0, tzinfo=UTC), NY)
    assert first == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT
    nxt = expr.next_after(first, NY)
    assert nxt == datetime(2026, 11, 2, 6, 30, tzinfo=UTC)  # not 01:30 EST the same night


def _brute(expr: CronExpr, after: datetime, tz: ZoneInfo) -> datetime:
    """An independent oracle, walked minute by minute in UTC: an instant fires when its wall
    time matches and is that wall time's first occurrence, or when the clock just jumped
    forward over a matching wall time (a gap's times fire at its end)."""
    t = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while True:
        local = t.astimezone(tz)
        wall = local.replace(tzinfo=None)
        before = (t - timedelta(minutes=1)).astimezone(tz).replace(tzinfo=None)
        if _matches(expr, wall) and local.fold == 0:
            return t
        skipped = before + timedelta(minutes=1)
        while skipped < wall:  # a jump forward: the wall times it skipped
            if _matches(expr, skipped):
                return t
            skipped += timedelta(minutes=1)
        t += timedelta(minutes=1)


def _matches(expr: CronExpr, wall: datetime) -> bool:
    return expr.matches_day(wall.date()) and wall.hour in expr.hours and wall.minute in expr.minutes


_field = st.sampled_from(["*", "*/7", "0", "5,35", "10-20", "3-50/9"])
_hour = st.sampled_from(["*", "*/5", "1", "2", "0-3", "22,23"])
_dom = st.sampled_from(["*", "1", "8-14", "*/10"])
_dow = st.sampled_from(["*", "0", "mon-wed", "6"])
_zones = st.sampled_from(["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"])


def test_several_times_of_one_gap_fire_once_and_before_the_times_after_it():
    expr = CronExpr.parse("15,45 2,3 * * *")
    after = datetime(2026, 3, 8, 6, 0, tzinfo=UTC)  # 01:00 EST
    fired = []
    for _ in range(3):
        after = expr.next_after(after, NY)
        fired.append(after.astimezone(NY).strftime("%H:%M"))
    assert fired == ["03:00", "03:15", "03:45"]


@settings(max_examples=60, deadline=None)
@given(
    minute=_field,
    hour=_hour,
    dom=_dom,
    dow=_dow,
    zone=_zones,
    start=st.datetimes(
        min_value=datetime(2025, 1, 1),  # noqa: DTZ001  # hypothesis wants naive bounds
        max_value=datetime(2027, 12, 31),  # noqa: DTZ001
        timezones=st.just(UTC),
    ),
)
def test_next_after_is_the_first_matching_instant_after(minute, hour, dom, dow, zone, start):
    expr = CronExpr.parse(f"{minute} {hour} {dom} * {dow}")
    tz = ZoneInfo(zone)
    fired = expr.next_after(start, tz)
    assert fired is not None
    assert fired > start
    assert fired == _brute(expr, start, tz)
    # Firings never repeat and never go back.
    again = expr.next_after(fired, tz)
    assert again is not None
    assert again > fired


_TRANSITIONS = [
    ("America/New_York", datetime(2026, 3, 8, 7, 0, tzinfo=UTC)),
    ("America/New_York", datetime(2026, 11, 1, 6, 0, tzinfo=UTC)),
    ("Europe/Berlin", datetime(2026, 3, 29, 1, 0, tzinfo=UTC)),
    ("Europe/Berlin", datetime(2026, 10, 25, 1, 0, tzinfo=UTC)),
    ("Australia/Lord_Howe", datetime(2026, 4, 4, 15, 0, tzinfo=UTC)),  # a 30-minute change
    ("Australia/Lord_Howe", datetime(2026, 10, 3, 15, 30, tzinfo=UTC)),
]


@settings(max_examples=80, deadline=None)
@given(
    minute=_field,
    hour=_hour,
    transition=st.sampled_from(_TRANSITIONS),
    offset=st.integers(min_value=-300, max_value=300),
)
def test_next_after_is_right_around_every_change_of_offset(minute, hour, transition, offset):
    zone, at = transition
    expr = CronExpr.parse(f"{minute} {hour} * * *")
    tz = ZoneInfo(zone)
    start = at + timedelta(minutes=offset)
    fired = expr.next_after(start, tz)
    assert fired == _brute(expr, start, tz)
