"""A reply shown growing in place on a platform that can edit messages.

`ReplyStream` turns the turn's text deltas into at most one message edit per
`min_edit_interval` seconds (the adapter's own limit; platforms rate-limit edits), timed by
the runner's clock, and finishes the message with the final text. An adapter without the
streaming methods never gets a `ReplyStream`: it is sent the final text, as before.

When the agent's model call is retried (`StreamRetry`), the text shown so far is void: the
turn's pieces start over, so the next edit replaces the message's text with the new attempt's
(edits always carry the whole text, never an addition). An adapter with the optional
`restart_stream(source, handle, *, attempt)` is told at once (a terminal, which can only
append, marks the abandoned line); others simply get the next edit. An adapter's optional
`stream_after` (seconds) holds the first post until the reply has been generating that long,
so a quick reply is one message with no edits.

The streamed message is a view, not the delivery: the reply is journalled `delivered` only
after `finish` succeeds, and a reply whose stream broke is sent whole instead, so a failed
edit never loses the reply (at worst the chat shows a stale partial above it).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sessiongate.core.clock import Clock
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.adapter import StreamingAdapter

__all__ = ["ReplyStream"]

log = logging.getLogger(__name__)


class ReplyStream:
    """One reply being streamed to one chat."""

    __slots__ = (
        "_adapter",
        "_broken",
        "_clock",
        "_handle",
        "_last_edit",
        "_opened",
        "_source",
        "_stream_after",
        "_timeout",
        "_turn_id",
    )

    def __init__(
        self,
        adapter: StreamingAdapter,
        source: SessionSource,
        *,
        turn_id: int,
        clock: Clock,
        timeout: float,
    ) -> None:
        self._adapter = adapter
        self._source = source
        self._turn_id = turn_id
        self._clock = clock
        self._timeout = timeout
        self._handle: str | None = None
        self._last_edit = 0.0
        self._broken = False
        self._opened = clock.monotonic()
        self._stream_after: float = getattr(adapter, "stream_after", 0.0)

    async def update(self, pieces: Sequence[str]) -> None:
        """The reply so far (its pieces): starts the message, or edits it when the interval
        has passed."""
        if self._broken:
            return
        now = self._clock.monotonic()
        if self._handle is None:
            if now - self._opened < self._stream_after:
                return  # a quick reply goes out whole: no preview, no edits
        elif now - self._last_edit < self._adapter.min_edit_interval:
            return  # the next delta past the interval, or `finish`, shows this text
        text = "".join(pieces)  # only when shown: a long reply is not joined per delta
        if not text:
            return
        try:
            async with asyncio.timeout(self._timeout):
                if self._handle is None:
                    self._handle = await self._adapter.start_stream(
                        self._source, text, turn_id=self._turn_id
                    )
                else:
                    await self._adapter.edit_stream(self._source, self._handle, text)
        except Exception:
            # The platform refused an edit: stop editing; `finish` still settles the reply.
            self._broken = True
            log.warning(
                "streamed reply edit failed",
                extra={"platform": str(self._source.platform), "turn_id": self._turn_id},
                exc_info=True,
            )
            return
        self._last_edit = now

    async def restart(self, attempt: int) -> None:
        """The reply being generated starts over (attempt number `attempt`): what the message
        shows is void, and the next `update` replaces it."""
        restart = getattr(self._adapter, "restart_stream", None)
        if self._broken or self._handle is None or restart is None:
            return
        try:
            async with asyncio.timeout(self._timeout):
                await restart(self._source, self._handle, attempt=attempt)
        except Exception:
            self._broken = True
            log.warning(
                "streamed reply restart failed",
                extra={"platform": str(self._source.platform), "turn_id": self._turn_id},
                exc_info=True,
            )

    @property
    def handle(self) -> str | None:
        """The platform's id of the streamed message (None before it was started)."""
        return self._handle

    async def finish(self, text: str) -> bool:
        """Show the final text in the streamed message; False when there is none to finish
        (never started) or the platform refused (the caller sends the reply whole)."""
        if self._handle is None:
            return False
        try:
            async with asyncio.timeout(self._timeout):
                await self._adapter.finish_stream(
                    self._source, self._handle, text, turn_id=self._turn_id
                )
        except Exception:
            log.warning(
                "streamed reply could not be finished; sending it whole",
                extra={"platform": str(self._source.platform), "turn_id": self._turn_id},
                exc_info=True,
            )
            return False
        return True
