"""`KitAdapter`: what every platform adapter does, written once (DESIGN decision 14).

A platform package subclasses it and supplies the platform's part: `connect` (verify the
credentials, learn the bot's identity), `run_receiver` (its polling or socket loop, calling
`admit` for each event), `target_for` (where a reply to a source goes), `register_commands`,
a `PlatformSender` and a `Rendering`. Everything else lives here:

Inbound, `admit(event)`, in this order, each step logged at debug with the chat id when it
drops the event (so "the bot is silent" can be diagnosed):
1. the claim of the platform event id, one transaction, before any await (a duplicate,
   also a concurrent one, stops here);
2. gating (own and bot messages, edits, mentions in groups) and access (allow list, DM
   policy; an unknown DM sender under `pairing` gets one code);
3. oversized media is answered with a notice; a thread's first message forks its session
   from the parent chat's (the spec's automatic parent fork policy), unless the thread is
   shared and the parent lane is one person's (`core.fork_policy`): then it starts isolated,
   with only the thread's parent message;
4. the hand-off: `runner.handle_message(wait=False)` returns once the message is durably
   accepted; only then is the claim finished, and only then may the caller advance its
   offset or cursor. A hand-off that fails releases the claim, so the redelivery is processed.

Receiving is a singular connection on some platforms (a long poll, a socket): with several
instances on one database it runs under a leader lease (`gateway/leadership.py`) on one of
them only, and `check_lead` / `leads` guard its actions; webhooks take events on every instance.

Outbound, `send`: a turn is recorded `sending` before its first request leaves; a turn already
sent (the gateway's resend after a crash) is dropped, and one a crash caught mid-send is
recorded `unconfirmed` instead of being posted twice; a turn with an open
`EditStream` is finished in place; otherwise `Outbox.deliver`. A permanent refusal (the bot was
blocked or removed) is recorded `refused` and not raised, so the journal does not retry it into
a storm; a send that may have arrived is recorded `unconfirmed` and not resent.

Slightly over the ~400-line budget: inbound and outbound share the claim, the send records and
the typing state, and the order of their steps is the contract; the data lives in `events.py`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from sessiongate.adapters.kit.access import Access, decide_access
from sessiongate.adapters.kit.bursts import Burst, looks_split, merge_key, merged
from sessiongate.adapters.kit.errors import (
    FileRejectedError,
    PermanentSendError,
    PlatformError,
    UnconfirmedSendError,
)
from sessiongate.adapters.kit.events import (
    AdapterStatistics,
    Admission,
    PlatformEvent,
    gateway_commands,
)
from sessiongate.adapters.kit.gating import GateReason, decide_gate, passes
from sessiongate.adapters.kit.loop_guard import BotLoopGuard
from sessiongate.adapters.kit.media import too_large_notice
from sessiongate.adapters.kit.media_out import (
    OutboundFile,
    file_name,
    locate,
    mime_type_of,
    not_sent_notice,
    split_media,
)
from sessiongate.adapters.kit.outbound import Outbox, PlatformSender, Rendering, Target
from sessiongate.adapters.kit.ratelimit import ChatRateLimiter
from sessiongate.adapters.kit.streaming import EditStream
from sessiongate.adapters.kit.typing_indicator import TypingIndicators
from sessiongate.core.clock import SystemClock
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.gateway.adapter import SendRefusedError
from sessiongate.gateway.messages import MessageEvent, ReceiptStatus
from sessiongate.store.platform_state import PlatformState

if TYPE_CHECKING:
    from collections.abc import Coroutine, Sequence

    from sessiongate.adapters.kit.events import PlatformCommand
    from sessiongate.adapters.kit.settings import KitSettings
    from sessiongate.adapters.kit.timing import Sleep
    from sessiongate.adapters.kit.watchdog import Watchdog
    from sessiongate.core.clock import Clock
    from sessiongate.core.platform import Platform
    from sessiongate.gateway.leadership import LeaderRole, Leadership
    from sessiongate.gateway.messages import Inbox

__all__ = ["COMMAND_REFUSAL", "HandoffError", "KitAdapter"]

log = logging.getLogger(__name__)

PAIRING_NOTICE = (
    "Hi! I don't know you yet. Ask the operator of this bot to approve you with:\n"
    "sessiongate pairing approve {code}\n(the code expires in {minutes} minutes)"
)
COMMAND_REFUSAL = "You are not allowed to use this bot here."
# Command kinds the platform adapter answers itself, only to their user (Discord's interaction
# response to a command or a button press, Slack's slash command acknowledgement): the kit
# posts no refusal in the chat.
_ANSWERED_BY_THE_PLATFORM = frozenset({"interaction", "component", "slash_command"})
# More pending pairing requests than this per platform get no code (a flood of strangers
# cannot fill the operator's list).
MAX_PENDING_PAIRING = 3


class HandoffError(Exception):
    """The gateway did not accept the event (it is stopping); do not advance past it."""


@dataclass(slots=True)
class _Counters:
    events: int = 0  # every event `admit` settled, whatever became of it
    accepted: int = 0
    duplicates: int = 0
    dropped: int = 0
    pairing_codes: int = 0
    sent: int = 0
    refused: int = 0
    unconfirmed: int = 0
    reconnects: int = 0
    stalls: int = 0
    merged: int = 0  # parts of split messages merged into the part before
    files: int = 0  # files uploaded with replies


class KitAdapter:
    """Base class of platform adapters; see the module docstring for the split of work."""

    platform: Platform
    pii_safe = True
    # The kit applies the access policy itself (users and chats, pairing), so the runner's
    # user-only allow list is skipped for this adapter's messages.
    authorizes_senders: ClassVar[bool] = True
    # Telegram edits at most once a second per chat; platforms override.
    edit_interval: ClassVar[float] = 1.0
    # A reply streams (one message edited in place) only once it has been generating this
    # long: a quick reply arrives as one message, with no preview and no edit to spend.
    stream_after: ClassVar[float] = 1.0
    # Seconds between typing calls: a little under how long the platform shows one (Telegram
    # about 5 s); platforms override.
    typing_interval: ClassVar[float] = 4.5
    # The receiver's watchdog (its failures and backoff), when the platform keeps one.
    watchdog: Watchdog | None = None
    # The largest file the platform takes from a bot (Telegram's Bot API: 50 MB).
    upload_limit_mb: ClassVar[float] = 50.0

    def __init__(
        self,
        settings: KitSettings,
        *,
        sender: PlatformSender,
        rendering: Rendering,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
        tick: Sleep | None = None,
    ) -> None:
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.sleep: Sleep = sleep or asyncio.sleep
        self.tick: Sleep = tick or asyncio.sleep
        self.limiter = ChatRateLimiter(
            clock=self.clock, sleep=self.sleep, min_interval={"edit": self.edit_interval}
        )
        self.outbox = Outbox(
            sender,
            rendering,
            self.limiter,
            sleep=self.sleep,
            reply_all=settings.reply_to_mode == "all",
        )
        self.typing = TypingIndicators(
            sender.send_typing, spawn=self.spawn, sleep=self.tick, interval=self.typing_interval
        )
        self.runner: Inbox | None = None
        self.state: PlatformState | None = None
        # This process's claims: a claim under another owner was left by a dead process.
        self.owner = secrets.token_hex(8)
        self.connected = False
        self.receiving = False
        self.counters = _Counters()
        self._streams: dict[int, EditStream] = {}
        self.bot_guard = BotLoopGuard(settings.loop_guard, clock=self.clock)
        self._bursts: dict[str, Burst] = {}
        self._holding = 0
        self._merge_window = settings.merge.window
        self._merge_min_length = settings.merge.min_length or int(rendering.limit * 0.95)
        self._group: asyncio.TaskGroup | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._supervisor: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._settled = asyncio.Event()
        self._stopped = False
        self.leadership: Leadership | None = None
        self.leader: LeaderRole | None = None

    # ------------------------------------------------------------------ the platform's part

    async def connect(self) -> None:
        """Verify credentials (raise `CredentialsError` on a refusal) and learn who we are."""
        raise NotImplementedError

    async def run_receiver(self) -> None:
        """Receive events until cancelled, calling `admit` for each (webhook mode: return)."""
        raise NotImplementedError

    async def disconnect(self) -> None:
        """Close the platform client; idempotent."""

    def target_for(self, source: SessionSource) -> Target:
        return Target(chat_id=source.chat_id, thread_id=source.thread_id)

    def reply_target(self, source: SessionSource) -> Target:
        """`target_for`, quoting the message the reply answers (`source.message_id`, set at
        admission) unless `reply_to_mode` is off; `Outbox` decides which chunks quote it."""
        target = self.target_for(source)
        if self.settings.reply_to_mode == "off" or not source.message_id:
            return target
        return replace(target, reply_to=source.message_id)

    async def register_commands(self, commands: Sequence[PlatformCommand]) -> None:
        """Register the gateway's commands with the platform (failure: raise, it is logged)."""

    def singular_connection(self) -> str | None:
        """The leader lease name of a receiver only one instance may run ("telegram:polling"),
        or None when any number may (webhooks)."""
        return None

    async def close_receiver(self) -> None:
        """Close what `run_receiver` opened once it is cancelled (this instance stopped
        leading): the socket must not outlive the lead."""

    # ------------------------------------------------------------------ lifecycle

    async def start(self, runner: Inbox) -> None:
        """Verify credentials (a refusal raises and nothing is left running), register the
        commands (a failure is logged), then start receiving in the adapter's task group."""
        if self._stopped:
            raise RuntimeError("a stopped adapter cannot be started again")
        self.runner = runner
        self.state = PlatformState(runner.store, clock=self.clock)
        await self.connect()
        self.connected = True
        try:
            await self.register_commands(gateway_commands())
        except Exception:
            log.exception("command registration failed", extra={"platform": str(self.platform)})
        ready = asyncio.Event()
        self._supervisor = asyncio.create_task(self._supervise(ready), name=f"{self.platform}")
        await ready.wait()
        self.spawn(self._receive())

    def lead_with(self, leadership: Leadership) -> None:
        """Run the singular receiver under `leadership`'s lease (before `start`)."""
        self.leadership = leadership

    async def _receive(self) -> None:
        name = self.singular_connection()
        if name is None or self.leadership is None:
            await self.run_receiver()
            return
        self.leader = self.leadership.role(name)
        await self.leader.run(self._receive_leading)

    async def _receive_leading(self) -> None:
        try:
            await self.run_receiver()
        finally:
            self.receiving = False
            await self.close_receiver()

    async def check_lead(self) -> None:
        """Before an action of the singular receiver that must not happen twice (confirming an
        offset): raises `LeaseLostError` when this instance no longer leads it."""
        if self.leader is not None:
            await self.leader.check()

    def leads(self) -> bool:
        """The local half of `check_lead`, free enough for every event."""
        return self.leader is None or self.leader.leading

    async def _supervise(self, ready: asyncio.Event) -> None:
        async with asyncio.TaskGroup() as group:
            self._group = group
            ready.set()
            await self._stop.wait()
            for task in list(self._tasks):
                task.cancel()

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A task owned by the adapter's group, cancelled by `stop()`."""
        if self._group is None or self._stop.is_set():
            coro.close()
            raise RuntimeError("the adapter is not running")
        task = self._group.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        """Idempotent: cancels receiving, typing and streams; nothing is handled after."""
        if self._stopped:
            return
        self._stopped = True
        self.receiving = False
        self.typing.stop_all()
        self._stop.set()
        if self._supervisor is not None:
            await asyncio.gather(self._supervisor, return_exceptions=True)
        await self.disconnect()
        self.connected = False

    def chat_id_key(self, chat_id: str) -> str:
        return chat_id

    # ------------------------------------------------------------------ inbound

    async def admit(self, event: PlatformEvent) -> Admission:
        """Claim, gate, authorise and hand off one event (see the module docstring).

        Returns once the event is settled; raises `HandoffError` when the gateway did not take
        it (the caller must not advance its offset past it).
        """
        admitted = await self.admit_batch([event])
        if not admitted:
            raise HandoffError("the gateway did not take the event")
        return admitted[0]

    async def admit_batch(self, events: list[PlatformEvent]) -> list[Admission]:
        """`admit` for a batch in its order, with one claim transaction (before any await)
        and one finishing transaction for the batch. Returns the admissions of the leading
        events the gateway took; the first it did not take, and every later one it has not
        settled (dropped, a duplicate), are released for their redelivery (the caller
        advances its offset past the returned ones only).

        Parts of a message the client split (`bursts.py`) are held and merged: consecutive
        ones in the batch at once, later ones (another `admit`) while the window runs."""
        if self._stopped:
            raise HandoffError("the adapter is stopped")
        state = self._state()
        platform = str(self.platform)
        # Step 1, before the first await: two deliveries of one id cannot both pass.
        claimed = state.claim_events(platform, [e.event_id for e in events], owner=self.owner)
        done: list[str] = []
        # By position in the batch: a held part is settled after events behind it.
        slots: list[Admission | None] = [None] * len(events)
        # A burst this call leads, and the positions of its parts from this batch (parts
        # another `admit` joined are settled, and counted, by that call).
        lead: Burst | None = None
        held: dict[str, int] = {}

        def settle(index: int, event_id: str, admission: Admission) -> None:
            slots[index] = admission
            done.append(event_id)
            # A second copy later in the same batch is a duplicate.
            claimed.discard(event_id)
            self.counters.events += 1
            self._settled.set()

        async def flush(burst: Burst) -> None:
            admission = await self._flush(burst)
            first = burst.parts[0].event_id
            for part in burst.parts:
                index = held.pop(part.event_id, None)
                if index is not None:
                    settle(index, part.event_id, admission if part.event_id == first
                           else Admission("merged", first))  # fmt: skip

        try:
            for index, event in enumerate(events):
                if event.event_id not in claimed or event.event_id in held:
                    self.counters.duplicates += 1
                    log.debug(
                        "duplicate event", extra={"platform": platform, "event_id": event.event_id}
                    )
                    slots[index] = Admission("duplicate")
                    self.counters.events += 1
                    self._settled.set()
                    continue
                screened = await self._screen(event)
                if isinstance(screened, Admission):
                    settle(index, event.event_id, screened)
                    continue
                key = merge_key(screened) if self._merge_window > 0 else None
                now = self.clock.monotonic()
                split = key is not None and self._looks_split(screened)
                if lead is not None and key == lead.key:
                    lead.add(screened, now=now, window=self._merge_window, split=split)
                    held[event.event_id] = index
                    continue
                if lead is not None:
                    await flush(lead)
                    lead = None
                other = self._bursts.get(key) if key is not None else None
                if other is not None:
                    other.add(screened, now=now, window=self._merge_window, split=split)
                    await asyncio.shield(other.done)
                    settle(index, event.event_id, Admission("merged", other.parts[0].event_id))
                elif key is not None and split:
                    lead = self._bursts[key] = Burst.open(
                        key, screened, now=now, window=self._merge_window
                    )
                    held[event.event_id] = index
                else:
                    settle(index, event.event_id, await self._hand_off(screened))
            if lead is not None:
                await flush(lead)
                lead = None
        except HandoffError:
            pass
        finally:
            if lead is not None and not lead.done.done():
                # Cancelled (stopping) while holding: the parts joined from elsewhere are
                # released by their own callers.
                self._bursts.pop(lead.key, None)
                lead.done.set_exception(HandoffError("the adapter is stopping"))
            state.finish_events(platform, done)
            for event_id in claimed:
                state.release_event(platform, event_id, owner=self.owner)
        admitted: list[Admission] = []
        for slot in slots:
            if slot is None:
                break
            admitted.append(slot)
        return admitted

    async def wait_events(self, count: int) -> None:
        """Until `admit` has settled `count` events in all (tests, benchmarks)."""
        while self.counters.events < count:
            self._settled.clear()
            await self._settled.wait()

    async def wait_events_or_hold(self, count: int) -> bool:
        """`wait_events`, but returns False as soon as a split message is being held (a test
        then moves its clock on); True once `count` events are settled."""
        while self.counters.events < count:
            if self._holding:
                return False
            self._settled.clear()
            await self._settled.wait()
        return True

    @property
    def holding(self) -> bool:
        return self._holding > 0

    def held_parts(self) -> int:
        """Parts of split messages held right now, waiting for the rest."""
        return sum(len(b.parts) for b in self._bursts.values())

    def _joins_album(self, event: PlatformEvent) -> bool:
        if event.group_id is None:
            return False
        key = merge_key(event)
        return key is not None and key in self._bursts

    def _looks_split(self, event: PlatformEvent) -> bool:
        rendering = self.outbox.rendering
        return looks_split(event, min_length=self._merge_min_length, measure=rendering.measure)

    async def hold(self, seconds: float) -> None:
        """Wait for more parts of a split message (on `tick`: a test moves time on)."""
        self._holding += 1
        self._settled.set()
        try:
            await self.tick(seconds)
        finally:
            self._holding -= 1

    async def _flush(self, burst: Burst) -> Admission:
        """Hold `burst` until its window ends, then hand its parts off as one message."""
        try:
            while (wait := burst.deadline - self.clock.monotonic()) > 0:
                await self.hold(wait)
        finally:
            # No part joins once the merged text is taken (no await between).
            if self._bursts.get(burst.key) is burst:
                del self._bursts[burst.key]
        try:
            admission = await self._hand_off(merged(burst.parts))
        except BaseException:
            burst.done.set_exception(HandoffError("the merged message was not taken"))
            raise
        if len(burst.parts) > 1:
            self.counters.merged += len(burst.parts) - 1
            log.info(
                "split message merged",
                extra={"platform": str(self.platform), "parts": len(burst.parts)},
            )
        burst.done.set_result(admission)
        return admission

    async def _screen(self, event: PlatformEvent) -> PlatformEvent | Admission:
        """Gating, access, pairing, media caps and the thread fork: the event to hand off
        (with the facts and source it was admitted with), or what became of it."""
        source, facts = event.source, event.facts
        if source is None or facts is None:
            return self._drop(event, event.kind)
        horizon = self.settings.max_backlog_seconds
        if horizon is not None and event.sent_at is not None:
            age = self.clock.now().timestamp() - event.sent_at
            if age > horizon:
                log.info(
                    "message older than max_backlog_seconds; not answered",
                    extra={"platform": str(self.platform), "chat_id": source.chat_id,
                           "age_seconds": round(age)},
                )  # fmt: skip
                return self._drop(event, "stale_backlog")
        if source.thread_id and facts.chat_type is not ChatType.DM and not facts.in_joined_thread:
            joined = self._state().has_thread(str(self.platform), source.chat_id, source.thread_id)
            facts = replace(facts, in_joined_thread=joined)
        reason = decide_gate(facts, self.settings.gate)
        if reason is GateReason.NOT_ADDRESSED and self._joins_album(event):
            # An album's later items carry no caption (no mention): its first item decided.
            reason = GateReason.MENTIONED
        if not passes(reason):
            return self._drop(event, str(reason))
        if facts.is_bot and not self.bot_guard.admit(_chat_key(source)):
            return self._drop(event, "bot_loop_cooldown")
        access = decide_access(source, self.settings.access, paired=False)
        # The store is asked only when pairing is what is left to decide.
        if access is Access.PAIR and self._state().is_paired(
            str(self.platform), source.user_id or ""
        ):
            access = Access.ADMIT
        if access is Access.DENY:
            if facts.command_to_bot and event.kind not in _ANSWERED_BY_THE_PLATFORM:
                # A command addressed to the bot is told no, not silently dropped.
                await self._notice(source, COMMAND_REFUSAL)
            return self._drop(event, "not_allowed")
        if access is Access.PAIR:
            return await self._pair(source)
        cap = self.settings.max_media_bytes
        for attachment in event.attachments:
            if attachment.is_too_large(cap):
                await self._notice(source, too_large_notice(attachment, cap))
                return Admission("too_large", attachment.name or attachment.kind)
        if event.parent is not None and source.thread_id:
            self._fork_thread(source, event.parent)
        return replace(event, facts=facts)

    async def _hand_off(self, event: PlatformEvent) -> Admission:
        assert event.source is not None
        # The message id rides on the source to the reply, which may quote it.
        source = replace(event.source, message_id=event.message_id)
        runner = self._runner()
        # Typing from admission on; the reply (or any other outcome) ends it.
        typing_key = _chat_key(source)
        self.typing.start(typing_key, self.target_for(source))
        receipt = await runner.handle_message(
            MessageEvent(
                source=source,
                text=event.text,
                media=tuple(a.reference() for a in event.attachments),
                message_type=event.message_type,
                message_id=event.message_id,
                reply_to=event.reply_to,
            ),
            wait=False,
        )
        if receipt.status != ReceiptStatus.QUEUED:
            self.typing.stop(typing_key)
        if receipt.status == ReceiptStatus.UNAVAILABLE:
            raise HandoffError("the gateway is stopping")
        if receipt.status == ReceiptStatus.DUPLICATE:
            self.counters.duplicates += 1
        else:
            self.counters.accepted += 1
        return Admission("accepted", str(receipt.status), receipt)

    async def _notice(self, source: SessionSource, text: str) -> None:
        """An answer the kit itself gives (pairing, too large): a platform that refuses it is
        logged, never allowed to stop the receiver."""
        try:
            await self.outbox.deliver(self.target_for(source), text)
        except PlatformError as exc:
            log.warning(
                "notice not delivered",
                extra={
                    "platform": str(self.platform),
                    "chat_id": source.chat_id,
                    "error": str(exc),
                },
            )

    def _drop(self, event: PlatformEvent, reason: str) -> Admission:
        self.counters.dropped += 1
        chat = event.source.chat_id if event.source else None
        log.debug(
            "event dropped",
            extra={"platform": str(self.platform), "chat_id": chat, "reason": reason},
        )
        return Admission("dropped", reason)

    async def _pair(self, source: SessionSource) -> Admission:
        result = self._state().request_pairing(
            str(self.platform),
            user_id=source.user_id or "",
            chat_id=source.chat_id,
            user_name=source.user_name,
            ttl_seconds=self.settings.pairing_ttl_seconds,
            max_pending=MAX_PENDING_PAIRING,
        )
        if result.new and result.code is not None:
            self.counters.pairing_codes += 1
            minutes = self.settings.pairing_ttl_seconds // 60
            await self._notice(source, PAIRING_NOTICE.format(code=result.code, minutes=minutes))
            log.info("pairing code issued", extra={"platform": str(self.platform)})
        return Admission("pairing", "capped" if result.capped else None)

    def _fork_thread(self, source: SessionSource, parent: SessionSource) -> None:
        store = self._runner().store
        parent_key, parent_entry = store.resolve_route(parent)
        if parent_entry is None:
            return
        _thread_key, thread_entry = store.resolve_route(source)
        if thread_entry is not None:
            return
        child, _ = store.fork_session(parent_key, automatic=True, into=source)
        log.info(
            "thread session started isolated: a shared thread under one person's lane"
            if child.extra.get("fork_refused")
            else "thread session forked from its parent chat",
            extra={"session_key": child.session_key, "parent_key": parent_key},
        )

    # ------------------------------------------------------------------ outbound

    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> str | None:
        """Post `text` (and the files it names): the platform's id of the first message.
        Raises `SendRefusedError` when the platform refused the chat or the send is
        unconfirmed (recorded per turn, and never posted again)."""
        platform = str(self.platform)
        state = self._state()
        if source.chat_id == "home" and self.settings.home_channel:
            source = replace(
                source, chat_id=self.settings.home_channel, thread_id=None, message_id=None
            )
        if turn_id is not None:
            previous = state.begin_send(platform, turn_id)
            if previous is not None:
                if previous.state == "sending":
                    # A process died with this send in flight: it may have arrived.
                    self.counters.unconfirmed += 1
                    state.record_send(platform, turn_id, "unconfirmed", "interrupted by a crash")
                    log.warning(
                        "send interrupted by a crash; recorded unconfirmed, not resent",
                        extra={"platform": platform, "turn_id": turn_id},
                    )
                    raise SendRefusedError("unconfirmed: interrupted by a crash")
                if previous.state != "sent":
                    raise SendRefusedError(f"{previous.state}: {previous.detail or ''}".strip())
                log.info("turn already sent; resend dropped", extra={"turn_id": turn_id})
                return (previous.detail or "").split(",")[0] or None
        target = self.reply_target(source)
        text, files = split_media(text)
        try:
            stream = self._streams.pop(turn_id, None) if turn_id is not None else None
            if stream is not None:
                ids = await stream.finish(text)
            elif text.strip() or not files:
                ids = await self.outbox.deliver(target, text)
            else:
                ids = []
            if files:
                ids += await self._send_files(target, files, after=len(ids))
        except PermanentSendError as exc:
            self.counters.refused += 1
            log.warning(
                "the platform refuses this chat; not retried",
                extra={"platform": platform, "chat_id": source.chat_id, "error": str(exc)},
            )
            if turn_id is not None:
                state.record_send(platform, turn_id, "refused", str(exc))
            raise SendRefusedError(f"refused: {exc}") from exc
        except UnconfirmedSendError as exc:
            self.counters.unconfirmed += 1
            log.warning(
                "send unconfirmed; recorded, not resent",
                extra={"platform": platform, "chat_id": source.chat_id, "turn_id": turn_id},
            )
            if turn_id is not None:
                state.record_send(platform, turn_id, "unconfirmed", str(exc))
            raise SendRefusedError(f"unconfirmed: {exc}") from exc
        finally:
            self.typing.stop(_chat_key(source))
        self.counters.sent += 1
        if turn_id is not None:
            state.record_send(platform, turn_id, "sent", ",".join(ids))
        if source.thread_id and source.chat_type is not ChatType.DM:
            state.mark_thread(platform, source.chat_id, source.thread_id)
        return ids[0] if ids else None

    async def _send_files(self, target: Target, refs: list[str], *, after: int) -> list[str]:
        """Upload the files a reply named (`media_out.py`); each one that cannot go gets a
        line of text instead, sent after them."""
        ids: list[str] = []
        notices: list[str] = []
        cap = self.settings.max_upload_bytes or int(self.upload_limit_mb * 1_048_576)
        for ref in refs:
            name = file_name(ref)
            found = locate(ref, self.settings.media_dirs)
            if isinstance(found, str):
                notices.append(not_sent_notice(name, found))
                continue
            size = found.stat().st_size
            if size > cap:
                reason = f"it is {size / 1_048_576:.1f} MB, over the {cap / 1_048_576:.0f} MB limit"
                notices.append(not_sent_notice(name, reason))
                continue
            data = await asyncio.to_thread(found.read_bytes)
            upload = OutboundFile(found.name, data, mime_type_of(found))
            where = self.outbox.chunk_target(target, after + len(ids))
            try:
                ids.append(await self.outbox.send_file(where, upload))
                self.counters.files += 1
            except PlatformError as exc:
                # Refused for this file (too large, its type, a missing scope): the text is
                # out already, so the file gets a notice; what refuses the chat propagates.
                if not isinstance(exc, FileRejectedError) and type(exc) is not PlatformError:
                    raise
                log.warning(
                    "the platform refused a file",
                    extra={"platform": str(self.platform), "chat_id": target.chat_id,
                           "error": str(exc)},
                )  # fmt: skip
                notices.append(not_sent_notice(name, "the platform refused it"))
        if notices:
            where = self.outbox.chunk_target(target, after + len(ids))
            ids += await self.outbox.deliver(where, "\n".join(notices))
        return ids

    # The gateway's `StreamingAdapter`: the handle is the turn id, since the preview message
    # may not exist yet (its first post waits out a rate limit); `send` finishes the stream.

    @property
    def min_edit_interval(self) -> float:
        return self.edit_interval

    async def start_stream(self, source: SessionSource, text: str, *, turn_id: int) -> str:
        await self.open_stream(source, turn_id=turn_id).update(text)
        return str(turn_id)

    async def edit_stream(self, source: SessionSource, handle: str, text: str) -> None:
        stream = self._streams.get(int(handle))
        if stream is not None:
            await stream.update(text)

    async def finish_stream(
        self, source: SessionSource, handle: str, text: str, *, turn_id: int
    ) -> None:
        await self.send(source, text, turn_id=turn_id)

    def open_stream(self, source: SessionSource, *, turn_id: int) -> EditStream:
        """An in-place streamed reply for `turn_id`; `send` for that turn finishes it."""
        stream = self._streams.get(turn_id)
        if stream is None:
            stream = self._streams[turn_id] = EditStream(self.outbox, self.reply_target(source))
        return stream

    async def notify_home(self, text: str) -> bool:
        """A system notice to the platform's home channel; False when none is configured."""
        home = self.settings.home_channel
        if not home:
            return False
        await self.outbox.deliver(Target(chat_id=home), text)
        return True

    # ------------------------------------------------------------------ introspection

    def statistics(self) -> AdapterStatistics:
        c = self.counters
        return AdapterStatistics(
            connected=self.connected,
            receiving=self.receiving,
            events=c.events,
            accepted=c.accepted,
            duplicates=c.duplicates,
            dropped=c.dropped,
            pairing_codes=c.pairing_codes,
            sent=c.sent,
            refused=c.refused,
            unconfirmed=c.unconfirmed,
            plain_resends=self.outbox.plain_resends,
            rate_limited=self.outbox.rate_limited,
            reconnects=c.reconnects,
            stalls=c.stalls,
            merged=c.merged,
            files=c.files,
            degraded=self.watchdog.degraded if self.watchdog is not None else False,
            receive_failures=self.watchdog.failures if self.watchdog is not None else 0,
        )

    def _state(self) -> PlatformState:
        if self.state is None:
            raise RuntimeError("the adapter has not been started by a runner")
        return self.state

    def _runner(self) -> Inbox:
        if self.runner is None:
            raise RuntimeError("the adapter has not been started by a runner")
        return self.runner


def _chat_key(source: SessionSource) -> str:
    return f"{source.chat_id}\x00{source.thread_id or ''}"
