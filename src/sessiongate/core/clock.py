"""Time as an injected dependency, so no rule reads the wall clock directly.

Everything time-dependent takes a `Clock`; tests pass a `FakeClock` and `advance()` it instead
of sleeping.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock", "ensure_utc", "isoformat"]


class Clock(Protocol):
    """A source of aware UTC wall time and of monotonic seconds."""

    def now(self) -> datetime: ...

    def monotonic(self) -> float: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class FakeClock:
    """A clock that only moves when told to: `FakeClock(start).advance(seconds)`."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = ensure_utc(start or datetime(2026, 1, 1, tzinfo=UTC))
        self._mono = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a FakeClock cannot go backwards")
        self._now += timedelta(seconds=seconds)
        self._mono += seconds

    def set(self, when: datetime) -> None:
        """Jump to `when` (forward only, like real time)."""
        when = ensure_utc(when)
        self.advance((when - self._now).total_seconds())


def ensure_utc(value: datetime) -> datetime:
    """Aware UTC from any datetime; a naive value is taken to be UTC already."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


# `datetime.isoformat` costs about 2 µs (it formats through C's printf machinery), and a turn
# formats the same few instants many times over: a routing row's `created_at` at every write,
# the turn's `now` in several fields. Kept by identity, with the instant itself, so an id is
# never reused while it is here and two equal instants in different zones never share text.
_ISO: dict[int, tuple[datetime, str]] = {}
_ISO_MAX = 4096


def isoformat(value: datetime) -> str:
    """`value.isoformat()`, remembered for the same object."""
    hit = _ISO.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    text = value.isoformat()
    if len(_ISO) >= _ISO_MAX:
        _ISO.clear()
    _ISO[id(value)] = (value, text)
    return text
