"""Typing indicators while a turn runs: started at admission, refreshed, stopped on the reply.

Platforms show "typing…" for a few seconds per call (Telegram about 5), so each chat with a
turn in progress gets one refresh task. Its first call waits `grace` seconds: a reply that
comes sooner (the echo agent, a command) needs no indicator, and skipping it halves the calls
a busy gateway makes (measured in `sessiongate bench`). `stop(chat)` ends it when the reply is
sent (or the turn fails); `max_seconds` ends it anyway, so a turn that never answers cannot
type for ever. The tasks belong to the adapter's task group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from sessiongate.adapters.kit.errors import PlatformError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

    from sessiongate.adapters.kit.outbound import Target
    from sessiongate.adapters.kit.timing import Sleep

__all__ = ["TypingIndicators"]

log = logging.getLogger(__name__)


class TypingIndicators:
    def __init__(
        self,
        send_typing: Callable[[Target], Awaitable[None]],
        *,
        spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]],
        sleep: Sleep,
        interval: float = 4.5,
        grace: float = 0.5,
        max_seconds: float = 300.0,
    ) -> None:
        self._send_typing = send_typing
        self._spawn = spawn
        self._sleep = sleep
        self._interval = interval
        self._max = max_seconds
        self._grace = grace
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self.sent = 0

    def start(self, key: str, target: Target) -> None:
        if key in self._tasks and not self._tasks[key].done():
            return
        self._tasks[key] = self._spawn(self._refresh(key, target))

    def stop(self, key: str) -> None:
        task = self._tasks.pop(key, None)
        if task is not None:
            task.cancel()

    def stop_all(self) -> None:
        for key in list(self._tasks):
            self.stop(key)

    def active(self) -> int:
        return sum(1 for t in self._tasks.values() if not t.done())

    async def _refresh(self, key: str, target: Target) -> None:
        await self._sleep(self._grace)
        elapsed = self._grace
        with contextlib.suppress(PlatformError):
            while elapsed < self._max:
                await self._send_typing(target)
                self.sent += 1
                await self._sleep(self._interval)
                elapsed += self._interval
        if self._tasks.get(key) is asyncio.current_task():
            del self._tasks[key]
