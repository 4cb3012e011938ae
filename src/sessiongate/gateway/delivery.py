"""Delivery: sending replies and notices through the adapter of the message's platform.

Every message sent is a delivery row first (`store/deliveries.py`, DESIGN decision 19): a reply
is committed (journal `replied`), written `pending`, sent, and marked `sent` with the platform's
message id, which journals its turn `delivered` in the same transaction. A crash in between
sends it again at the next start (at-least-once, `turn_id` included so a platform can drop the
repeat), unless it is older than `delivery.max_age_seconds`: then it is `dead` (`stale`),
reported and never sent. A send that fails makes the row `failed` with the platform's reason;
while the gateway runs, housekeeping tries it again (`redeliver`) after the back-off
(`delivery.retry_backoff_seconds`, doubled each time up to `delivery.retry_backoff_max_seconds`,
on the runner's clock), and after `delivery.max_attempts` tries it is `dead`: the dead-letter
list, emptied by the operator's retry. A platform without an adapter (the HTTP `api` channel)
delivers through the receipt and the transcript, so its replies are journalled delivered at
once and keep no row; nor do incognito lanes (nothing of theirs reaches the disk).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from sessiongate.core.clock import SystemClock
from sessiongate.core.config import DeliveryConfig
from sessiongate.errors import StaleWriteError
from sessiongate.gateway.adapter import SendRefusedError, StreamingAdapter
from sessiongate.gateway.reply_stream import ReplyStream
from sessiongate.gateway.store_calls import InlineCalls
from sessiongate.gateway.tracing import traced
from sessiongate.store.deliveries import STALE_REASON, DeliveryKind, platform_reason
from sessiongate.store.lanes import TurnState
from sessiongate.store.records import DeliveryStatus

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from datetime import datetime

    from sessiongate.core.clock import Clock
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.adapter import PlatformAdapter
    from sessiongate.gateway.store_calls import StoreCalls
    from sessiongate.store.deliveries import DeliveryRecord, DeliveryStore
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

# The defaults of `delivery.retry_backoff_seconds` (how long a message stays unconfirmed
# before housekeeping sends it again, and the first back-off step after a failure: a platform
# that refused one send is often back within a minute; a message its sender is still sending
# is never retried, whatever its age) and `delivery.retry_backoff_max_seconds`.
REDELIVERY_GRACE_SECONDS = DeliveryConfig().retry_backoff_seconds
REDELIVERY_BACKOFF_MAX_SECONDS = DeliveryConfig().retry_backoff_max_seconds
# Marks a reason from `SendRefusedError`: the delivery is dead at once.
_FINAL = "final:"


class Delivery:
    def __init__(
        self,
        adapters: Sequence[PlatformAdapter],
        lane_store: LaneStore,
        *,
        clock: Clock | None = None,
        deliveries: DeliveryStore | None = None,
        config: DeliveryConfig | None = None,
        calls: StoreCalls | None = None,
    ) -> None:
        # How the store is called: on the loop (SQLite) or off it (PostgreSQL).
        self._calls: StoreCalls = calls or InlineCalls()
        self._adapters = {str(a.platform): a for a in adapters}
        if len(self._adapters) != len(adapters):
            raise ValueError("two adapters for one platform")
        # Checked once: a protocol check per turn costs more than the rest of the lookup.
        self._streaming: dict[str, StreamingAdapter] = {
            name: a for name, a in self._adapters.items() if isinstance(a, StreamingAdapter)
        }
        self._clock: Clock = clock or SystemClock()
        self._lane_store = lane_store
        self._rows = deliveries
        self.config = config or DeliveryConfig()
        self.failures = 0
        # Outcomes of tries since the start, by status (`sent`, `failed`, `dead`): the
        # `sessiongate_deliveries_total` counter.
        self.outcomes: dict[str, int] = {}
        # Deliveries (and turns without a row) being sent right now: a retry must not send one
        # a second time.
        self._sending: set[int] = set()
        self._sending_turns: set[int] = set()
        # `quiet(turn_id, text)`: True for a reply that is journaled delivered and sent
        # nowhere (a heartbeat job's no-op token, `gateway/scheduler.py`).
        self.quiet: Callable[[int, str], Awaitable[bool]] | None = None

    @property
    def adapters(self) -> list[PlatformAdapter]:
        return list(self._adapters.values())

    @property
    def rows(self) -> DeliveryStore | None:
        """The deliveries table (None for a runner built without one)."""
        return self._rows

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

    def _count(self, status: str) -> None:
        self.outcomes[status] = self.outcomes.get(status, 0) + 1

    def _keeps_row(self, turn_id: int | None) -> bool:
        return self._rows is not None and (turn_id is None or self._rows.keeps_turn(turn_id))

    # One span per try of a send, whatever path it comes by (a reply, a notice, a retry).
    @traced(
        lambda self, adapter, source, *a, **k: f"deliver {source.platform}",
        start=lambda self, adapter, source, text, turn_id: {
            "messaging.system": str(source.platform),
            "sessiongate.turn_id": turn_id,
        },
        finish=lambda result, *a, **k: {"sessiongate.delivered": result[0]},
    )
    async def _push(
        self, adapter: PlatformAdapter, source: SessionSource, text: str, turn_id: int | None
    ) -> tuple[bool, str | None, str | None]:
        """One send: (sent, the platform's message id, the reason it failed; a reason
        starting `final:` when trying again cannot help)."""
        try:
            async with asyncio.timeout(DELIVERY_TIMEOUT_SECONDS):
                sent = await adapter.send(source, text, turn_id=turn_id)
        except SendRefusedError as exc:
            self.failures += 1
            log.warning(
                "the platform refused a message for good",
                extra={"platform": str(source.platform), "turn_id": turn_id, "error": str(exc)},
            )
            return False, None, _FINAL + platform_reason(exc)
        except Exception as exc:
            self.failures += 1
            log.exception(
                "delivery failed",
                extra={
                    "platform": str(source.platform),
                    "chat_id": source.chat_id,
                    "turn_id": turn_id,
                },
            )
            reason = "timeout" if isinstance(exc, TimeoutError) else platform_reason(exc)
            return False, None, reason
        return True, sent if isinstance(sent, str) else None, None

    async def _try(self, record: DeliveryRecord) -> bool:
        """Send one delivery and write its outcome; True when the platform confirmed it."""
        assert self._rows is not None  # only called with rows
        adapter = self.adapter_for(record.source.platform)
        if adapter is None:
            ok, message_id, reason = True, None, None
        else:
            ok, message_id, reason = await self._push(
                adapter, record.source, record.text, record.turn_id
            )
        if ok:
            await self._calls.run(self._rows.mark_sent, record, message_id)
            self._count(str(DeliveryStatus.SENT))
            return True
        if reason is not None and reason.startswith(_FINAL):
            await self._calls.run(self._rows.mark_dead, record, reason.removeprefix(_FINAL))
            self._count(str(DeliveryStatus.DEAD))
            return False
        settled = await self._calls.run(
            self._rows.mark_failed,
            record,
            reason or "unknown",
            max_attempts=self.config.max_attempts,
            backoff=self.config.retry_backoff_seconds,
            backoff_max=self.config.retry_backoff_max_seconds,
        )
        self._count(str(settled.status))
        return False

    async def send(
        self,
        source: SessionSource,
        text: str,
        *,
        turn_id: int | None,
        session_key: str | None = None,
        kind: str = DeliveryKind.NOTICE,
    ) -> bool:
        """Send a notice, command answer or job output; True when sent (or there is no
        adapter to use). It is a delivery row first: a refused one is retried later."""
        adapter = self.adapter_for(source.platform)
        if adapter is None:
            return True
        if self._rows is None or not self._keeps_row(turn_id):
            sent, _, _ = await self._push(adapter, source, text, turn_id)
            return sent
        record = await self._calls.run(
            self._rows.open,
            kind,
            source,
            text,
            turn_id=turn_id,
            session_key=session_key,
            first_try_after=self.config.retry_backoff_seconds,
        )
        self._sending.add(record.id)
        try:
            return await self._try(record)
        finally:
            self._sending.discard(record.id)

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

    async def settle_approval(self, source: SessionSource, approval_id: str, outcome: str) -> None:
        """Show an approval's outcome on its prompt, where the adapter can (`settle_approval`:
        the buttons give way to the outcome); nothing otherwise (the command's answer, or the
        agent's next words, already say it)."""
        adapter = self.adapter_for(source.platform)
        settle = getattr(adapter, "settle_approval", None)
        if settle is None:
            return
        async with asyncio.timeout(DELIVERY_TIMEOUT_SECONDS):
            await settle(source, approval_id, outcome)

    async def deliver_reply(
        self,
        session_key: str,
        turn_id: int,
        source: SessionSource,
        text: str,
        *,
        stream: ReplyStream | None = None,
        force: bool = False,
    ) -> bool:
        """Send a committed reply and journal it delivered; a failure leaves it `replied`
        (its delivery `failed`). With the turn's `stream`, the streamed message is finished
        with the text instead (sent whole if that fails). A delivery given up (`dead`) is
        left alone unless `force` (the operator's retry)."""
        if self.quiet is not None and await self.quiet(turn_id, text):
            await self._calls.run(self._lane_store.mark_delivered, turn_id)
            log.info("no-op reply not sent", extra={"session_key": session_key, "turn_id": turn_id})
            return True
        if self.adapter_for(source.platform) is None or not self._keeps_row(turn_id):
            return await self._deliver_without_row(session_key, turn_id, source, text, stream)
        assert self._rows is not None  # `_keeps_row`
        record = await self._calls.run(
            self._rows.open,
            DeliveryKind.REPLY,
            source,
            text,
            turn_id=turn_id,
            session_key=session_key,
            first_try_after=self.config.retry_backoff_seconds,
        )
        if record.id in self._sending:
            return False
        self._sending.add(record.id)
        try:
            if record.status is DeliveryStatus.SENT:
                # Its turn, if left behind.
                await self._calls.run(self._rows.mark_sent, record, record.message_id)
                return True
            if record.status is DeliveryStatus.DEAD and not force:
                return False
            if stream is not None and await stream.finish(text):
                await self._calls.run(self._rows.mark_sent, record, stream.handle)
                self._count(str(DeliveryStatus.SENT))
                sent = True
            else:
                sent = await self._try(record)
        finally:
            self._sending.discard(record.id)
        if sent:
            log.info("turn delivered", extra={"session_key": session_key, "turn_id": turn_id})
        return sent

    async def _deliver_without_row(
        self,
        session_key: str,
        turn_id: int,
        source: SessionSource,
        text: str,
        stream: ReplyStream | None,
    ) -> bool:
        self._sending_turns.add(turn_id)
        try:
            finished = stream is not None and await stream.finish(text)
            if not finished and not await self.send(source, text, turn_id=turn_id):
                return False
        finally:
            self._sending_turns.discard(turn_id)
        await self._calls.run(self._lane_store.mark_delivered, turn_id)
        log.info("turn delivered", extra={"session_key": session_key, "turn_id": turn_id})
        return True

    def stale(self, written: datetime, now: datetime) -> bool:
        """Whether a message written at `written` is too old to send now."""
        return now - written > timedelta(seconds=self.config.max_age_seconds)

    async def recover(self, replied: Sequence[Turn], *, now: datetime) -> int:
        """At the start: send the replies the last run committed but never had confirmed,
        except those older than `delivery.max_age_seconds`, which are reported `dead`
        (`stale`) and not sent. Returns how many were sent."""
        delivered = 0
        for turn in replied:
            committed = turn.finished_at or turn.accepted_at
            if (
                self._rows is not None
                and self._keeps_row(turn.id)
                and self.stale(committed, now)
                and self.adapter_for(turn.source.platform) is not None
            ):
                if await self._calls.run(self._give_up_stale, turn, committed):
                    self._count(str(DeliveryStatus.DEAD))
                    log.warning(
                        "stale reply not sent",
                        extra={"session_key": turn.session_key, "turn_id": turn.id},
                    )
                continue
            if await self.deliver_reply(turn.session_key, turn.id, turn.source, turn.reply or ""):
                delivered += 1
        return delivered

    def _give_up_stale(self, turn: Turn, committed: datetime) -> bool:
        """Report a stale reply `dead` (a store call); True unless it was settled already."""
        assert self._rows is not None
        record = self._rows.open(
            DeliveryKind.REPLY,
            turn.source,
            turn.reply or "",
            turn_id=turn.id,
            session_key=turn.session_key,
            at=committed,
        )
        if record.status not in (DeliveryStatus.PENDING, DeliveryStatus.FAILED):
            return False
        self._rows.mark_dead(record, STALE_REASON)
        return True

    async def redeliver(
        self,
        replied: Sequence[Turn],
        *,
        now: datetime,
        may_send: Callable[[str | None], bool] | None = None,
    ) -> int:
        """Housekeeping's retries: every `replied` turn (`replied`: those this instance may
        deliver) gets its delivery row if it has none, then each `pending` or `failed`
        delivery that is due is sent again, unless it is stale (then `dead`). `may_send`
        tells whether this instance may send for a lane (by key; None: a notice with no
        lane). Returns how many were delivered."""
        if self._rows is None:
            return await self._redeliver_without_rows(replied, now=now)
        grace = timedelta(seconds=self.config.retry_backoff_seconds)
        for turn in replied:
            if not self._keeps_row(turn.id) or turn.id in self._sending_turns:
                continue
            if await self._calls.run(self._rows.of_turn, turn.id) is None:
                committed = turn.finished_at or turn.accepted_at
                await self._calls.run(
                    self._rows.open,
                    DeliveryKind.REPLY,
                    turn.source,
                    turn.reply or "",
                    turn_id=turn.id,
                    session_key=turn.session_key,
                    at=committed,
                    first_try_after=grace.total_seconds(),
                )
        delivered = 0
        for record in await self._calls.run(self._rows.due, now):
            if record.id in self._sending:
                continue
            if may_send is not None and not may_send(record.session_key):
                continue
            if self.stale(record.created_at, now):
                await self._calls.run(self._rows.mark_dead, record, STALE_REASON)
                self._count(str(DeliveryStatus.DEAD))
                continue
            self._sending.add(record.id)
            try:
                sent = await self._try(record)
            except StaleWriteError:
                log.warning("redelivered turn was no longer replied", extra={"id": record.id})
                sent = True
            finally:
                self._sending.discard(record.id)
            if sent:
                delivered += 1
        return delivered

    async def _redeliver_without_rows(self, replied: Sequence[Turn], *, now: datetime) -> int:
        delivered = 0
        grace = timedelta(seconds=self.config.retry_backoff_seconds)
        for turn in replied:
            if turn.id in self._sending_turns:
                continue
            if now < (turn.finished_at or turn.accepted_at) + grace:
                continue
            try:
                sent = await self.deliver_reply(
                    turn.session_key, turn.id, turn.source, turn.reply or ""
                )
            except StaleWriteError:
                sent = True
            delivered += sent
        return delivered

    async def retry_reply(self, turn_id: int) -> bool:
        """Send one undelivered (`replied`) reply now, as the operator asks; False when it is
        not waiting for delivery or the send failed again."""
        turn = await self._calls.run(self._lane_store.get_turn, turn_id)
        if turn is None or turn.state is not TurnState.REPLIED:
            return False
        return await self.deliver_reply(
            turn.session_key, turn.id, turn.source, turn.reply or "", force=True
        )

    async def retry(self, delivery_id: int) -> DeliveryRecord | None:
        """The operator's retry: a `failed` or `dead` delivery (stale ones too: the operator
        chose to send it) goes back to `pending` and is sent now. Returns its row afterwards;
        None when there is no such delivery, it was sent already, or it is being sent."""
        if self._rows is None or delivery_id in self._sending:
            return None
        record = await self._calls.run(self._rows.reopen, delivery_id)
        if record is None:
            return None
        self._sending.add(record.id)
        try:
            await self._try(record)
        finally:
            self._sending.discard(record.id)
        return await self._calls.run(self._rows.get, delivery_id)
