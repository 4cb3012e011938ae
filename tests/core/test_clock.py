"""Clocks: time as an injected dependency."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from sessiongate.core.clock import FakeClock, SystemClock, ensure_utc

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
