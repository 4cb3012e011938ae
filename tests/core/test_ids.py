"""Session ids: `YYYYMMDD_HHMMSS_<8 hex>` in UTC from the clock, and id validation."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from sessiongate.core.clock import FakeClock
from sessiongate.core.ids import is_safe_id, new_session_id, validate_session_id
from sessiongate.errors import InvalidSessionIdError

ID_FORMAT = re.compile(r"\d{8}_\d{6}_[0-9a-f]{8}")


def test_session_id_has_the_spec_format_from_the_clock(clock):
    session_id = new_session_id(clock)
    assert ID_FORMAT.fullmatch(session_id)
    assert session_id.startswith("20260101_000000_")


def test_session_id_follows_the_clock(clock):
    clock.advance(3661)
    assert new_session_id(clock).startswith("20260101_010101_")


def test_session_id_is_in_utc_whatever_the_clock_zone():
    tokyo = timezone(timedelta(hours=9))
    clock = FakeClock(datetime(2026, 1, 1, 8, 30, tzinfo=tokyo))
    assert new_session_id(clock).startswith("20251231_233000_")


def test_explicit_time_overrides_the_clock(clock):
    at = datetime(2027, 6, 5, 4, 3, 2, tzinfo=UTC)
    assert new_session_id(clock, at=at).startswith("20270605_040302_")


def test_ids_made_in_the_same_second_differ(clock):
    ids = {new_session_id(clock) for _ in range(50)}
    assert len(ids) == 50


def test_generated_ids_are_safe(clock):
    assert validate_session_id(new_session_id(clock))


@pytest.mark.parametrize(
    "value", ["abc", "20260101_000000_0a1b2c3d", "legacy-id.v2", "A" * 128, "_x"]
)
def test_safe_ids_are_accepted(value):
    assert is_safe_id(value)
    assert validate_session_id(value) == value


@pytest.mark.parametrize(
    "value",
    ["", ".", "..", "../x", "a/b", "a\\b", "C:x", ".env", "a..b", "A" * 129, "a\x00", 5, None],
)
def test_unsafe_ids_are_rejected(value):
    assert not is_safe_id(value)
    with pytest.raises(InvalidSessionIdError) as info:
        validate_session_id(value)
    assert isinstance(info.value, ValueError)
