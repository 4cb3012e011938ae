"""Delivery: sending replies and notices through the adapter of the message's platform.

A reply is committed (journal `replied`) before it is sent and journalled `delivered` after;
a crash in between sends it again at the next start (at-least-once, `turn_id` included so a
platform can drop the repeat). A send that fails leaves the turn `replied`; while the gateway
runs, housekeeping tries it again (`redeliver`) after a grace period, then with a doubling delay
capped at `REDELIVERY_BACKOFF_MAX_SECONDS`, all on the runner's clock. A platform without an
adapter (the HTTP `api` channel) delivers through the receipt and the transcript, so its replies
are journalled delivered at once.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from sessiongate.core.clock import SystemClock
from sessiongate.errors import StaleWriteError
from sessiongate.gateway.adapter import StreamingAdapter
from sessiongate.gateway.reply_stream import ReplyStream
from sessiongate.gateway.tracing import traced

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from datetime import datetime

    from sessiongate.core.clock import Clock
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.adapter import PlatformAdapter
    from sessiongate.store.lanes import LaneStore, Turn

__all__ = [
    "DELIVERY_TIMEOUT_SECONDS",
    "REDELIVERY_BACKOFF_MAX_SECONDS",
    "REDELIVERY_GRACE_SECONDS",
    "Delivery",
]

log = logging.getLogger(__name__)

# An adapter that hangs must not hold a lane (and so the next turn) for ever; the reply stays
# journalled `replied` and is sent again by housekeeping (`redeliver`) or at the next start.
DELIVERY_TIMEOUT_SECONDS = 60.0

# How long a reply stays `replied` before housekeeping sends it again, and the first back-off
# step after that: a platform that refused one send is often back within a minute. (A reply
# its lane is still sending is never retried, whatever its age.)
REDELIVERY_GRACE_SECONDS = 60.0
# The longest wait between two tries of one reply: a platform down for a day is still tried
# every hour, not hammered, and a reply is never given up on while the gateway runs.
REDELIVERY_BACKOFF_MAX_SECONDS = 3600.0
# Caps the exponent of the doubling, far past the point where the cap above applies.
_MAX_DOUBLINGS = 16


class Delivery:
    def __init__(
        self,
        adapters: Sequence[PlatformAdapter],
        lane_store: LaneStore,
        *,
        clock: Clock | None = None,
    ) -> None:
        self._adapters = {str(a.platform): a for a in adapters}
        if len(self._adapters) != len(adapters):
            raise ValueError("two adapters for one platform")
        # Checked once: a protocol check per turn costs more than the rest of the lookup.
        self._streaming: dict[str, StreamingAdapter] = {
            name: a for name, a in self._adapters.items() if isinstance(a, StreamingAdapter)
        }
        self._clock: Clock = clock or SystemClock()
        self._lane_store = lane_store
        self.failures = 0
        # Turns whose reply is being sent right now: a retry must not send it a second time.
        self._sending: set[int] = set()
        # Turn id -> (failed retries, earliest time of the next one).
        self._retries: dict[int, tuple[int, datetime]] = {}
        # `quiet(turn_id, text)`: True for a reply that is journaled delivered and sent
        # nowhere (a heartbeat job's no-op token, `gateway/scheduler.py`).
        self.quiet: Callable[[int, str], bool] | None = None

    @property
    def adapters(self) -> list[PlatformAdapter]:
        return list(self._adapters.values())

    def adapter_for(self, platform: str) -> PlatformAdapter | None:
        return self._adapters.get(str(platform))

    def open_stream(self, source: SessionSource, turn_id: int) -> ReplyStream | None:
        """A streamed reply for the chat of `source`, when its adapter can edit in place."""
        adapter = self._streaming.get(str(source.platform))
        if adapter is None:
            return None
        return ReplyStream(
            adapter, source, turn_id=turn_id, clock=self._clock, timeout=DELIVERY_TIMEOUT_SECONDS
        )

    @traced(
        lambda self, source, *a, **k: f"deliver {source.platform}",
        start=lambda self, source, text, *, turn_id: {
            "messaging.system": str(source.platform),
            "sessiongate.turn_id": turn_id,
        },
        finish=lambda sent, *a, **k: {"sessiongate.delivered": sent},
    )
    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> bool:
        """Send a notice or command answer; True when sent (or there is no adapter to use)."""
        adapter = self.adapter_for(source.platform)
        if adapter is None:
            return True
        try:
            async with asyncio.timeout(DELIVERY_TIMEOUT_SECONDS):
                await adapter.send(source, text, turn_id=turn_id)
        except Exception:
            self.failures += 1
            log.exception(
                "delivery failed",
                extra={
                    "platform": str(source.platform),
                    "chat_id": source.chat_id,
                    "turn_id": turn_id,
                },
            )
            return False
        return True

    async def send_approval(self, source: SessionSource, text: str, approval_id: str) -> bool:
        """An approval prompt: with buttons where the adapter has them (`send_approval`),
        else as a notice; True when sent (or there is no adapter to use)."""
        adapter = self.adapter_for(source.platform)
        with_buttons = getattr(adapter, "send_approval", None)
        if adapter is None or with_buttons is None:
            return await self.send(source, text, turn_id=None)
        try:
            async with asyncio.timeout(DELIVERY_TIMEOUT_SECONDS):
                await with_buttons(source, text, approval_id)
        except Exception:
            log.warning(
                "approval prompt with buttons failed; sending it as text",
                exc_info=True,
                extra={"platform": str(source.platform), "chat_id": source.chat_id},
            )
            return await self.send(source, text, turn_id=None)
        return True

    async def deliver_reply(
        self,
        session_key: str,
        turn_id: int,
        source: SessionSource,
        text: str,
        *,
        stream: ReplyStream | None = None,
    ) -> bool:
        """Send a committed reply and journal it delivered; a failure leaves it `replied`.
        With the turn's `stream`, the streamed message is finished with the text instead (sent
        whole if that fails)."""
        if self.quiet is not None and self.quiet(turn_id, text):
            self._lane_store.mark_delivered(turn_id)
            log.info("no-op reply not sent", extra={"session_key": session_key, "turn_id": turn_id})
            return True
        self._sending.add(turn_id)
        try:
            finished = stream is not None and await stream.finish(text)
            if not finished and not await self.send(source, text, turn_id=turn_id):
                return False
        finally:
            self._sending.discard(turn_id)
        self._lane_store.mark_delivered(turn_id)
        log.info("turn delivered", extra={"session_key": session_key, "turn_id": turn_id})
        return True

    async def redeliver(self, replied: Sequence[Turn], *, now: datetime) -> int:
        """Send again the `replied` turns (`replied`: every one the journal holds) whose
        delivery failed, each once it is due: `REDELIVERY_GRACE_SECONDS` after its reply was
        committed, then after each failed try twice the previous wait, at most
        `REDELIVERY_BACKOFF_MAX_SECONDS`. Returns how many were delivered."""
        waiting = {turn.id for turn in replied}
        for turn_id in [t for t in self._retries if t not in waiting]:
            del self._retries[turn_id]  # delivered or gone meanwhile
        grace = timedelta(seconds=REDELIVERY_GRACE_SECONDS)
        delivered = 0
        for turn in replied:
            if turn.id in self._sending:
                continue
            committed = turn.finished_at or turn.accepted_at
            tries, due = self._retries.get(turn.id, (0, committed + grace))
            if now < due:
                continue
            try:
                sent = await self.deliver_reply(
                    turn.session_key, turn.id, turn.source, turn.reply or ""
                )
            except StaleWriteError:
                # Another path journalled it delivered meanwhile; nothing is left to do.
                log.warning("redelivered turn was no longer replied", extra={"turn_id": turn.id})
                sent = True
            if sent:
                self._retries.pop(turn.id, None)
                delivered += 1
                continue
            tries += 1
            wait = min(
                REDELIVERY_GRACE_SECONDS * 2 ** min(tries, _MAX_DOUBLINGS),
                REDELIVERY_BACKOFF_MAX_SECONDS,
            )
            self._retries[turn.id] = (tries, now + timedelta(seconds=wait))
            log.info(
                "redelivery failed; will retry",
                extra={"turn_id": turn.id, "tries": tries, "retry_in_seconds": wait},
            )
        return delivered
