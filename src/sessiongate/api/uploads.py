"""How long a request body may take to arrive, and what happens to slow ones at shutdown.

A client that sends its headers and part of its body, then nothing, would otherwise hold its
request open for as long as the connection lives: at SIGTERM the server's graceful wait runs to
its end for it and then cancels it into a plain-text 500. So every body is read inside an
`UploadGate.deadline()` scope: `api.body_timeout_seconds` after reading starts, the client gets
a JSON 408. When the server starts to stop, `close()` expires every scope at once (and every
later one as it opens), so stalled uploads end with a 503 right away while running turns go on
draining.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["UploadGate"]


class UploadGate:
    """The deadlines of the bodies being read now; owned by one app."""

    def __init__(self, timeout_seconds: float) -> None:
        self.timeout_seconds = timeout_seconds
        self._scopes: set[asyncio.Timeout] = set()
        self._closed = False

    @property
    def is_closed(self) -> bool:
        """True once the server has begun to stop: a read cut short now was not the client's
        fault alone, so it is answered 503 rather than 408."""
        return self._closed

    @contextlib.asynccontextmanager
    async def deadline(self) -> AsyncIterator[None]:
        """A scope that raises `TimeoutError` when the body takes too long or the gate closes."""
        loop = asyncio.get_running_loop()
        when = loop.time() if self._closed else loop.time() + self.timeout_seconds
        async with asyncio.timeout_at(when) as scope:
            self._scopes.add(scope)
            try:
                yield
            finally:
                self._scopes.discard(scope)

    def close(self) -> None:
        """Expire every body read in progress now, and every later one as it starts. Call it
        on the loop that serves the app."""
        self._closed = True
        now = asyncio.get_running_loop().time()
        for scope in list(self._scopes):
            if not scope.expired():
                scope.reschedule(now)
