"""Waiting through the injected clock.

The kit waits two ways: `sleep(seconds)` inside a flow that must go on afterwards (a backoff, a
429's `retry_after`), and `tick(seconds)` in a background loop that only repeats (a typing
refresh). Real gateways pass `asyncio.sleep` for both. Tests pass a `ClockSleep(fake_clock)`:
its `__call__` moves the fake clock forward by the wait and records it (so a retry flow runs at
once and the test reads what was waited), while its `tick` waits until the test moves time on
with `advance` (a background loop must not push time forward for everyone). No test sleeps.
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
    """`sleep` and `tick` over a `FakeClock` (see the module docstring)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.waits: list[float] = []
        self._waiters: list[tuple[float, asyncio.Future[None]]] = []

    async def __call__(self, seconds: float) -> None:
        if seconds > 0:
            self.waits.append(seconds)
            self.clock.advance(seconds)
            self._wake()
        await asyncio.sleep(0)

    async def tick(self, seconds: float) -> None:
        future = asyncio.get_running_loop().create_future()
        self._waiters.append((self.clock.monotonic() + seconds, future))
        try:
            await future
        finally:
            self._waiters = [(d, f) for d, f in self._waiters if f is not future]

    async def advance(self, seconds: float) -> None:
        """Move time on and let the loops whose tick came due run."""
        self.clock.advance(seconds)
        self._wake()
        for _ in range(5):
            await asyncio.sleep(0)

    def _wake(self) -> None:
        now = self.clock.monotonic()
        for deadline, future in self._waiters:
            if deadline <= now and not future.done():
                future.set_result(None)
