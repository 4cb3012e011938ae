"""Per-chat pacing: one operation at a time per chat, a minimum gap per kind, and 429s.

A `retry_after` from the platform blocks the whole chat, sends and edits alike (a streaming
edit storm that ignores it is what turns a 2-second penalty into a 230-second one). Waits go
through the injected `sleep`, against the injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from sessiongate.adapters.kit.timing import Sleep
    from sessiongate.core.clock import Clock

__all__ = ["ChatRateLimiter"]


class ChatRateLimiter:
    def __init__(
        self, *, clock: Clock, sleep: Sleep, min_interval: Mapping[str, float] | None = None
    ) -> None:
        self._clock = clock
        self._sleep = sleep
        # Kind ("send", "edit") -> the least time between two of that kind in one chat.
        self._interval = dict(min_interval or {})
        self._blocked_until: dict[str, float] = {}
        self._last: dict[tuple[str, str], float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.waited = 0.0  # total seconds waited, for statistics

    def ready_in(self, chat: str, kind: str) -> float:
        """Seconds until an operation of `kind` may go to `chat` (0 when it may now)."""
        now = self._clock.monotonic()
        ready = self._blocked_until.get(chat, 0.0)
        last = self._last.get((chat, kind))
        if last is not None:
            ready = max(ready, last + self._interval.get(kind, 0.0))
        return max(0.0, ready - now)

    def penalise(self, chat: str, retry_after: float) -> None:
        until = self._clock.monotonic() + max(0.0, retry_after)
        self._blocked_until[chat] = max(self._blocked_until.get(chat, 0.0), until)

    @contextlib.asynccontextmanager
    async def slot(self, chat: str, kind: str) -> AsyncIterator[None]:
        """Hold the chat for one operation, once its gap and any penalty have passed."""
        lock = self._locks.setdefault(chat, asyncio.Lock())
        async with lock:
            while (wait := self.ready_in(chat, kind)) > 0:
                self.waited += wait
                await self._sleep(wait)
            try:
                yield
            finally:
                self._last[(chat, kind)] = self._clock.monotonic()
