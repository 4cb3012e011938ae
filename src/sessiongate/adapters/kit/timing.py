"""Waiting through the injected clock: every kit wait is `await sleep(seconds)`.

Real gateways pass `asyncio.sleep`; tests pass `ClockSleep(fake_clock)`, which moves the fake
clock instead of waiting and records each wait, so backoff, rate limits, typing refreshes and
edit throttling are checked without a test ever sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessiongate.core.clock import FakeClock

__all__ = ["ClockSleep", "Sleep"]

Sleep = Callable[[float], Awaitable[None]]


class ClockSleep:
    """A `Sleep` that advances a `FakeClock` by the requested time and yields once."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        if seconds > 0:
            self.waits.append(seconds)
            self.clock.advance(seconds)
        await asyncio.sleep(0)
