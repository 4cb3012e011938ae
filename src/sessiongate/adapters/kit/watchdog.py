"""`Watchdog`: a receiver that looks connected but receives nothing is rebuilt.

The peers' "connected but deaf" reports (a wedged long poll, a socket that stopped delivering)
all look healthy from the outside. A receiver calls `guard(call)` around each receive: the call
must complete within `stall_seconds` (on top of its own long-poll timeout), else the watchdog
counts a stall and raises `StalledError`, and the receiver closes its transport and builds a new
one. The deadline is the event loop's: a hung socket can only be interrupted by real time.
`reconnect_delay` gives the backoff (with jitter) between failed attempts, and `failures`
counts them, so a receiver can report itself degraded after `Backoff.max_attempts`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, TypeVar

from sessiongate.adapters.kit.backoff import Backoff

if TYPE_CHECKING:
    from collections.abc import Awaitable

__all__ = ["StalledError", "Watchdog"]

_T = TypeVar("_T")


class StalledError(Exception):
    """A receive did not complete within the watchdog's deadline."""


class Watchdog:
    def __init__(self, *, stall_seconds: float, backoff: Backoff | None = None) -> None:
        self.stall_seconds = stall_seconds
        self.backoff = backoff or Backoff(base=1.0, cap=60.0, max_attempts=10)
        self.stalls = 0
        self.failures = 0

    async def guard(self, call: Awaitable[_T], *, expected_seconds: float = 0.0) -> _T:
        try:
            async with asyncio.timeout(expected_seconds + self.stall_seconds):
                result = await call
        except TimeoutError:
            self.stalls += 1
            raise StalledError(
                f"no answer within {expected_seconds + self.stall_seconds}s"
            ) from None
        self.beat()
        return result

    def beat(self) -> None:
        self.failures = 0

    def failed(self) -> float:
        """Count a failed attempt; the delay before the next one."""
        self.failures += 1
        return self.backoff.delay(self.failures)

    @property
    def degraded(self) -> bool:
        return self.failures >= self.backoff.max_attempts
