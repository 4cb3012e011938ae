"""Time as an injected dependency, so no rule reads the wall clock directly.

Everything time-dependent takes a `Clock`; tests pass a `FakeClock` and `advance()` it instead
of sleeping.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

__all__ = ["Clock", "FakeClock", "SystemClock", "ensure_utc"]


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
