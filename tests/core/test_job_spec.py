"""Jobs as data (`core/jobs.py`): the spec's validation, `every` intervals, and which missed
slots run under each `catch_up`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from sessiongate.core.jobs import JobSpec, due_slots, next_slot, parse_every

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def spec(**fields: object) -> JobSpec:
    base: dict[str, object] = {"id": "j", "every": "30m", "session_key": "k", "prompt": "p"}
    return JobSpec.model_validate({**base, **fields})


@pytest.mark.parametrize(
    ("text", "seconds"), [("30m", 1800), ("2h", 7200), ("1d", 86400), ("1h30m", 5400)]
)
def test_every_reads_units_and_sums(text, seconds):
    assert parse_every(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "30", "5x", "30s", "m30", "1h 30"])
def test_every_refuses_what_is_not_an_interval_of_a_minute_or_more(text):
    with pytest.raises(ValueError, match="every"):
        parse_every(text)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"cron": "* * * * *"}, "exactly one schedule"),
        ({"every": None}, "exactly one schedule"),
        ({"deliver_to": "telegram:1"}, "exactly one of session_key"),
        ({"session_key": None, "deliver_to": "telegram"}, "platform"),
        ({"session": "isolated"}, "isolated needs deliver_to"),
        ({"timezone": "Mars/Olympus"}, "IANA"),
        ({"every": None, "cron": "61 * * * *"}, "minute"),
        ({"id": "Bad Id"}, "job id"),
        ({"catch_up": "some"}, "catch_up"),
        ({"prompt": ""}, "prompt"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_a_bad_spec_names_what_is_wrong(fields, message):
    with pytest.raises(ValidationError, match=message):
        spec(**fields)


def test_every_slots_sit_on_a_grid_from_the_anchor_and_at_fires_once():
    every = spec()
    assert next_slot(every, T0, anchor=T0) == T0 + timedelta(minutes=30)
    assert next_slot(every, T0 + timedelta(minutes=31), anchor=T0) == T0 + timedelta(hours=1)
    once = spec(every=None, at="2026-05-01T14:00:00", timezone="Europe/Berlin")
    assert once.at_instant() == datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    assert next_slot(once, T0 - timedelta(seconds=1), anchor=T0) == once.at_instant()
    assert next_slot(once, T0, anchor=T0) is None  # not strictly after


@pytest.mark.parametrize(
    ("catch_up", "late", "run", "skipped"),
    [
        ("latest", 0, [5], 4),
        ("all", 0, [3, 4, 5], 2),
        ("none", 0, [5], 4),
        ("none", 61, [], 5),
        ("latest", 61, [5], 4),
    ],
)
def test_catch_up_chooses_among_missed_slots(catch_up, late, run, skipped):
    job = spec(catch_up=catch_up, catch_up_cap=3)
    now = T0 + timedelta(minutes=150, seconds=late)
    due = due_slots(job, cursor=T0, now=now, anchor=T0)
    assert due.run == tuple(T0 + timedelta(minutes=30 * n) for n in run)
    assert due.skipped == skipped
    assert due.cursor == T0 + timedelta(minutes=150)


def test_nothing_due_leaves_the_cursor_alone():
    due = due_slots(spec(), cursor=T0, now=T0 + timedelta(minutes=29), anchor=T0)
    assert due.run == ()
    assert due.cursor is None


def test_a_long_downtime_is_caught_up_without_walking_every_slot():
    minutely = spec(every="1m", catch_up="all", catch_up_cap=3)
    year = timedelta(days=365)
    due = due_slots(minutely, cursor=T0, now=T0 + year, anchor=T0)
    assert due.run == tuple(T0 + year - timedelta(minutes=n) for n in (2, 1, 0))
    assert due.skipped == 365 * 24 * 60 - 3
    cron = spec(every=None, cron="* * * * *", catch_up="latest")
    due = due_slots(cron, cursor=T0, now=T0 + year, anchor=T0)
    assert due.run == (T0 + year,)
    assert due.cursor == T0 + year
    assert due.skipped >= 2000  # a lower bound once the walk is cut short
