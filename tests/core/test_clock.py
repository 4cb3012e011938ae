"""Clocks: time as an injected dependency."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from sessiongate.core import clock as clock_module
from sessiongate.core.clock import FakeClock, SystemClock, ensure_utc, isoformat

START = datetime(2026, 1, 1, tzinfo=UTC)


def test_fixture_clock_starts_at_new_year_2026(clock):
    assert clock.now() == START
    assert clock.monotonic() == 0.0


def test_advance_moves_wall_and_monotonic_time_together(clock):
    clock.advance(90.5)
    assert clock.now() == START + timedelta(seconds=90.5)
    assert clock.monotonic() == 90.5


def test_fake_clock_does_not_move_by_itself(clock):
    assert clock.now() == clock.now() == START


def test_advance_cannot_go_backwards(clock):
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)
    assert clock.now() == START


def test_set_jumps_forward(clock):
    clock.set(START + timedelta(days=2))
    assert clock.now() == START + timedelta(days=2)
    assert clock.monotonic() == 2 * 86400


def test_set_cannot_go_backwards(clock):
    clock.advance(10)
    with pytest.raises(ValueError, match="backwards"):
        clock.set(START)
    assert clock.now() == START + timedelta(seconds=10)


def test_set_to_now_is_allowed(clock):
    clock.set(START)
    assert clock.now() == START


def test_naive_start_is_taken_as_utc():
    assert FakeClock(datetime(2026, 1, 1)).now() == START  # noqa: DTZ001 - the case under test


def test_non_utc_start_is_converted_to_utc():
    clock = FakeClock(datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))))
    assert clock.now() == START
    assert clock.now().tzinfo is UTC


def test_system_clock_gives_aware_utc():
    clock = SystemClock()
    assert clock.now().tzinfo is UTC
    assert isinstance(clock.monotonic(), float)


def test_ensure_utc():
    assert ensure_utc(datetime(2026, 1, 1)).tzinfo is UTC  # noqa: DTZ001 - the case under test
    assert ensure_utc(datetime(2025, 12, 31, 19, tzinfo=timezone(timedelta(hours=-5)))) == START


def test_isoformat_is_the_instant_s_own_text_even_for_equal_instants_in_other_zones():
    utc = datetime(2026, 12, 2, 12, 0, 0, 5, tzinfo=UTC)
    paris = utc.astimezone(timezone(timedelta(hours=1)))
    assert utc == paris
    assert isoformat(utc) == isoformat(utc) == "2026-12-02T12:00:00.000005+00:00"
    assert isoformat(paris) == "2026-12-02T13:00:00.000005+01:00"


def test_isoformat_remembers_a_bounded_number_of_instants():
    start = datetime(2026, 1, 1, tzinfo=UTC)
    instants = [start + timedelta(seconds=n) for n in range(3 * clock_module._ISO_MAX)]
    assert [isoformat(at) for at in instants] == [at.isoformat() for at in instants]
    assert len(clock_module._ISO) <= clock_module._ISO_MAX
