"""`SignalAdapter`: Signal on the kit, through a signal-cli daemon in HTTP mode.

Receiving: the daemon's SSE stream (`/api/v1/events`). Each receive event is parsed
(`payloads.py`; a malformed one is logged with its field and starts nothing) and handed to the
kit's `admit` in the adapter's task group, in arrival order (what one network read brought is
one batch, with one claim transaction): the claim of the event id
(`<sender>:<timestamp>`, the envelope's own identity) commits before anything else is done
with it, so a replay (a reconnect, the daemon's `Last-Event-ID` resend, a second delivery) is
no second turn. The stream's position (its last event id) advances only past events whose
`admit` returned (claimed and durably accepted) and is saved in the store, so a restart resumes
after them: signal-cli never re-emits an envelope it delivered once, and the events it still
holds (1,000) are asked for again instead of lost (the crash window of O PR #109907).

Liveness: the stream is read under the watchdog; nothing for `stream_stall_seconds` (events
and the daemon's keep-alive comments both count) probes `/api/v1/check` and reopens the
stream; a stream that breaks or is refused is reopened with backoff and jitter (2 s to 60 s),
and after `Backoff.max_attempts` failures in a row the adapter reports itself degraded (still
retrying).

Sending: `send` over JSON-RPC with the reply's Markdown as plain text plus `textStyle` ranges
(`styles.py`), split at 8,000 UTF-16 units into numbered chunks (`(1/3)`); the first chunk
quotes the message it answers. Signal cannot stream a reply by editing it, so this adapter is
not a `StreamingAdapter`: the gateway sends the final text only. Typing is refreshed every 8 s
from admission to the reply; the inbound message gets `ack_reaction` once it is accepted.
Files go as data-URI attachments (no shared filesystem with the daemon needed).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from sessiongate.adapters.kit.adapter import HandoffError, KitAdapter
from sessiongate.adapters.kit.backoff import Backoff
from sessiongate.adapters.kit.errors import CredentialsError, PlatformError
from sessiongate.adapters.kit.formatting import defuse_mass_mentions, to_plain_text
from sessiongate.adapters.kit.outbound import Outbox, Rendering, Target
from sessiongate.adapters.kit.settings import KitSettings
from sessiongate.adapters.kit.splitting import split_text
from sessiongate.adapters.kit.watchdog import StalledError, Watchdog
from sessiongate.adapters.signal.client import SignalClient, quote_anchor
from sessiongate.adapters.signal.payloads import (
    MalformedEnvelopeError,
    SignalIdentity,
    parse_event,
)
from sessiongate.adapters.signal.styles import utf16_units
from sessiongate.core.platform import Platform
from sessiongate.gateway.messages import ReceiptStatus

if TYPE_CHECKING:
    from sessiongate.adapters.kit.events import Admission, PlatformEvent
    from sessiongate.adapters.kit.timing import Sleep
    from sessiongate.adapters.signal.sse import SseEvent
    from sessiongate.core.clock import Clock
    from sessiongate.core.config import SignalConfig
    from sessiongate.core.source import SessionSource

__all__ = ["SIGNAL_LIMIT", "SIGNAL_RENDERING", "SignalAdapter", "SignalOutbox"]

log = logging.getLogger(__name__)

# Signal's longest message (the peers split at 8,000), counted in UTF-16 units like its ranges.
SIGNAL_LIMIT = 8000
# Room kept in each chunk of a split reply for its number, "\n(999/999)".
_NUMBER_ROOM = 10
# Finished claims are kept this long: the daemon replays at most its last 1,000 events, which
# on a quiet account may be days old.
_CLAIM_HORIZON_SECONDS = 14 * 24 * 3600.0
# Events handed to `admit` and not yet settled, at most (the stream waits beyond it).
MAX_IN_FLIGHT = 64


def _markdown(text: str) -> str:
    """The reply stays Markdown up to the client, which turns it into text plus ranges."""
    return text


SIGNAL_RENDERING = Rendering(
    limit=SIGNAL_LIMIT, measure=utf16_units, render=_markdown, plain=to_plain_text
)


class SignalOutbox(Outbox):
    """The kit's outbox, numbering the chunks of a split reply `(1/3)`, `(2/3)`, ..."""

    def chunks(self, markdown: str) -> list[str]:
        r = self.rendering
        text = defuse_mass_mentions(markdown)
        if r.measure(text) <= r.limit:
            return [text]
        parts = split_text(text, r.limit - _NUMBER_ROOM, measure=r.measure)
        return [f"{part}\n({n}/{len(parts)})" for n, part in enumerate(parts, 1)]


@dataclass(slots=True)
class _Pending:
    """An event handed to `admit`, in stream order: the cursor passes it once it is done."""

    event_id: str | None
    done: bool = False


class SignalAdapter(KitAdapter):
    platform = Platform.SIGNAL
    watchdog: Watchdog
    # Signal clients show "typing..." for about 15 seconds per call.
    typing_interval: ClassVar[float] = 8.0
    # Signal takes attachments up to 100 MB.
    upload_limit_mb: ClassVar[float] = 100.0
    # Signal has no edit-in-place for a growing reply: not a `StreamingAdapter` (the protocol
    # check sees a method set to None as absent), so the gateway sends the final text only.
    start_stream = None  # type: ignore[assignment]
    # One event stream per account in this process (a second one delivers everything twice).
    _streaming_accounts: ClassVar[set[str]] = set()

    def __init__(
        self,
        config: SignalConfig,
        *,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        tick: Sleep | None = None,
        client: SignalClient | None = None,
    ) -> None:
        if not config.account:
            raise CredentialsError("platforms.signal.account is not set")
        self.config = config
        self.account = config.account
        self.client = client or SignalClient(config.url, config.account)
        super().__init__(
            KitSettings.from_config(config),
            sender=self.client,
            rendering=SIGNAL_RENDERING,
            clock=clock,
            sleep=sleep,
            tick=tick,
        )
        self.outbox = SignalOutbox(
            self.client,
            SIGNAL_RENDERING,
            self.limiter,
            sleep=self.sleep,
            reply_all=self.settings.reply_to_mode == "all",
        )
        self.watchdog = Watchdog(
            stall_seconds=config.stream_stall_seconds,
            backoff=Backoff(base=2.0, cap=60.0, max_attempts=10),
        )
        self.me: SignalIdentity | None = None
        self.last_event_id: str | None = None
        self.malformed = 0
        self.acks = 0
        self._order: deque[_Pending] = deque()
        self._batch: list[tuple[PlatformEvent, _Pending]] = []
        self._flush_due = False
        self._in_flight = 0
        self._room = asyncio.Event()
        self._holds_account = False

    # ------------------------------------------------------------------ the platform's part

    async def connect(self) -> None:
        if self.account in self._streaming_accounts:
            raise PlatformError("this Signal account already has an event stream in this process")
        self.me = await self.client.open()
        self._streaming_accounts.add(self.account)
        self._holds_account = True
        state = self._state()
        state.prune_events(older_than_seconds=_CLAIM_HORIZON_SECONDS)
        self.last_event_id = state.get_cursor(str(self.platform), self.account)
        log.info("signal connected", extra={"has_uuid": self.me.uuid is not None})

    async def disconnect(self) -> None:
        if self._holds_account:
            self._streaming_accounts.discard(self.account)
            self._holds_account = False
        await self.client.close()

    def target_for(self, source: SessionSource) -> Target:
        return Target(chat_id=source.chat_id)

    def reply_target(self, source: SessionSource) -> Target:
        """A quote names the message's timestamp and its author (`client.quote_anchor`)."""
        target = self.target_for(source)
        author = source.user_id_alt or source.user_id
        if self.settings.reply_to_mode == "off" or not source.message_id or not author:
            return target
        return Target(chat_id=target.chat_id, reply_to=quote_anchor(source.message_id, author))

    def singular_connection(self) -> str | None:
        return "signal:events"

    async def resolve_media(self, file_id: str) -> str:
        """Where an attachment reference's file is: a path in signal-cli's attachments folder
        (`attachments_dir`, when the daemon runs on this host)."""
        folder = self.config.attachments_dir
        if folder is None:
            raise PlatformError("platforms.signal.attachments_dir is not set; use fetch_media")
        found = await asyncio.to_thread(_in_folder, folder, file_id)
        if found is None:
            raise PlatformError(f"attachment {file_id!r} is not in {folder}")
        return str(found)

    async def fetch_media(self, file_id: str) -> bytes:
        """An attachment's bytes, from the daemon (getAttachment)."""
        return await self.client.fetch_attachment(file_id)

    # ------------------------------------------------------------------ the event stream

    async def run_receiver(self) -> None:
        while True:
            await self.check_lead()
            try:
                await self._read_stream()
                reason = "closed by the daemon"
            except StalledError:
                self.counters.stalls += 1
                self.receiving = False
                alive = await self.client.check()
                log.warning("signal event stream silent; reopening", extra={"daemon_alive": alive})
                if alive:
                    self.counters.reconnects += 1
                    continue
                reason = "the daemon does not answer its liveness probe"
            except CredentialsError:
                self.receiving = False
                log.exception("signal-cli refused the account; receiver stopped")
                return
            except PlatformError as exc:
                reason = str(exc)
            self.receiving = False
            self.counters.reconnects += 1
            delay = self.watchdog.failed()
            log.warning(
                "signal event stream lost; reconnecting",
                extra={"reason": reason, "delay": round(delay, 2),
                       "failures": self.watchdog.failures, "degraded": self.watchdog.degraded},
            )  # fmt: skip
            await self.sleep(delay)

    async def _read_stream(self) -> None:
        async with self.client.events(self.last_event_id) as events:
            self.watchdog.beat()
            self.receiving = True
            while True:
                try:
                    sse = await self.watchdog.guard(anext(events))
                except StopAsyncIteration:
                    return
                if not sse.comment:
                    await self._take(sse)

    async def _take(self, sse: SseEvent) -> None:
        """One stream event, parsed and queued for `admit`. The events read from one network
        read are admitted as one batch (one claim transaction), in the adapter's task group, so
        a message held for the rest of a split paste does not hold the stream."""
        if not self.leads():
            return  # this instance lost the lead: the successor reads from the saved cursor
        event = self._parse(sse)
        pending = _Pending(sse.id)
        self._order.append(pending)
        if event is None:
            self._settle([pending])
            return
        while self._in_flight >= MAX_IN_FLIGHT:
            self._room.clear()
            await self._room.wait()
        self._in_flight += 1
        self._batch.append((event, pending))
        if not self._flush_due:
            # Runs once the reader waits for the network: what it read meanwhile is one batch.
            self._flush_due = True
            asyncio.get_running_loop().call_soon(self._flush_batch)

    def _flush_batch(self) -> None:
        self._flush_due = False
        batch, self._batch = self._batch, []
        if not batch:
            return
        try:
            self.spawn(self._admit_batch(batch))
        except RuntimeError:
            # Stopping: the events stay before the cursor and come again at the next start.
            self._in_flight -= len(batch)
            self._room.set()

    def _parse(self, sse: SseEvent) -> PlatformEvent | None:
        assert self.me is not None
        if sse.event != "receive":
            return None
        try:
            return parse_event(json.loads(sse.data), self.me)
        except (ValueError, MalformedEnvelopeError) as exc:
            # A shape this mapping does not know: logged with the field and skipped (the
            # cursor passes it: it would be just as wrong the next time).
            self.malformed += 1
            log.warning(
                "signal event not understood; skipped",
                extra={"event_id": sse.id, "error": str(exc),
                       "field": exc.field if isinstance(exc, MalformedEnvelopeError) else "data"},
            )  # fmt: skip
            return None

    async def _admit_batch(self, batch: list[tuple[PlatformEvent, _Pending]]) -> None:
        try:
            admitted = await self.admit_batch([event for event, _ in batch])
        except HandoffError:
            admitted = []
        finally:
            self._in_flight -= len(batch)
            self._room.set()
        if len(admitted) < len(batch):
            # Not accepted (the gateway is stopping): the cursor stays before them.
            log.info("signal events not accepted; they are read again at the next start")
        self._settle([pending for _, pending in batch[: len(admitted)]])
        if self.config.ack_reaction:
            acks = [self._ack(event) for (event, _), admission in zip(batch, admitted, strict=False)
                    if self._is_new_turn(admission)]  # fmt: skip
            await asyncio.gather(*acks)

    def _settle(self, done: list[_Pending]) -> None:
        """Mark `done` and move the saved cursor past every done event, in stream order."""
        for pending in done:
            pending.done = True
        moved: str | None = None
        while self._order and self._order[0].done:
            head = self._order.popleft()
            if head.event_id is not None:
                moved = head.event_id
        if moved is not None and moved != self.last_event_id:
            self.last_event_id = moved
            self._state().set_cursor(str(self.platform), self.account, moved)

    @staticmethod
    def _is_new_turn(admission: Admission) -> bool:
        receipt = admission.receipt
        return (
            admission.status == "accepted"
            and receipt is not None
            and receipt.status != ReceiptStatus.DUPLICATE
        )

    async def _ack(self, event: PlatformEvent) -> None:
        """React to the accepted message (the acknowledgement); a refusal is only logged."""
        source = event.source
        author = source.user_id_alt or source.user_id if source is not None else None
        if source is None or author is None or event.message_id is None:
            return
        try:
            await self.client.send_reaction(
                self.target_for(source),
                self.config.ack_reaction,
                author=author,
                at=event.message_id,
            )
            self.acks += 1
        except PlatformError as exc:
            log.info("signal acknowledgement reaction not sent", extra={"error": str(exc)})


def _in_folder(folder: str, file_id: str) -> Path | None:
    """signal-cli's file for an attachment id, never a path outside the folder."""
    root = Path(folder).expanduser().resolve()
    path = (root / file_id).resolve()
    return path if path.is_relative_to(root) and path.is_file() else None
