"""An operator takes a chat over: the agent stops answering its lane until it is handed back.

How a lane is taken over: `/bot off` in the chat (from one of `takeover.operators`), the
dashboard's Take over, `POST /v1/sessions/{key}/takeover` or `sessiongate sessions takeover`.
It is one row of the store (`store/takeover.py`), so it survives a restart.

While it is taken over:
- a turn that was running is stopped as `/stop` stops it (what it stored stays), and the
  lane's pending approvals are cancelled;
- people's messages are stored in the transcript as user messages (`metadata.held`), deduplicated
  by their message id like any message, and no turn runs (the receipt says `held`);
- work that waits in the lane's inbox (a `/queue` item, a scheduled job's turn) waits on:
  the lane is held (`LaneTable.hold`), so no worker claims it;
- the operator's replies (`reply`: HTTP, the dashboard) are stored as assistant messages
  marked `metadata.written_by: operator` and sent to the chat as a delivery row (kind
  `operator`), retried like any outbound message. The agent reads them as its own side.

Handing back (`/bot on`, Hand back, `DELETE .../takeover`, or `takeover.auto_resume_minutes`
after the takeover began, by the injected clock): the row goes, the lane is let go, and if
the last message is one people sent meanwhile that nobody answered, the agent answers at once
(a system turn, `takeover.handback`, over the whole conversation); otherwise it waits for the
next message. Either way its next turn sees everything said meanwhile; nothing is dropped.

Takeovers made by another process (the CLI on the same home, another instance on a shared
database) are picked up at the next `tick` (every `REFRESH_SECONDS`); `tick` also hands back
the takeovers whose time is up.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from sessiongate.core.clock import isoformat
from sessiongate.errors import NotTakenOverError, SessionNotFoundError
from sessiongate.gateway.approvals import approver_id
from sessiongate.gateway.lanes import CancelReason
from sessiongate.gateway.messages import MessageEvent, Receipt, ReceiptStatus
from sessiongate.gateway.store_calls import InlineCalls
from sessiongate.store.deliveries import DeliveryKind
from sessiongate.store.lanes import InboxItem, InboxKind
from sessiongate.store.records import to_us
from sessiongate.store.takeover import Takeover, TakeoverStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.approvals import Approvals
    from sessiongate.gateway.delivery import Delivery
    from sessiongate.gateway.lanes import LaneTable
    from sessiongate.gateway.routing import Routed
    from sessiongate.gateway.store_calls import StoreCalls
    from sessiongate.store.lanes import Inbound, LaneStore
    from sessiongate.store.session_store import SessionStore

__all__ = [
    "HANDBACK_EVENT",
    "HANDBACK_PROMPT",
    "OPERATOR",
    "REFRESH_SECONDS",
    "OperatorReply",
    "TakeoverHost",
    "Takeovers",
]

log = logging.getLogger(__name__)

# Who takes over through the HTTP routes, the dashboard and the CLI (the operator's token).
OPERATOR = "operator"
# How often takeovers made elsewhere are read, and due ones handed back.
REFRESH_SECONDS = 5.0
HANDBACK_EVENT = "takeover.handback"
HANDBACK_PROMPT = (
    "[The operator has handed this conversation back to you. The latest messages above came "
    "while the operator was answering and have had no reply yet: answer them now.]"
)
BOT_USAGE = "Usage: /bot off | /bot on"
_NOT_OPERATOR = "Only an operator may turn the bot off or on here."


class TakeoverHost(Protocol):
    """What takeovers need from intake (`intake.py`)."""

    def route(
        self,
        source: SessionSource,
        *,
        event_kind: str | None = None,
        session_key: str | None = None,
        visible_session_id: str | None = None,
    ) -> Routed: ...

    async def refuse_archived(
        self, entry: SessionEntry, source: SessionSource, *, event: str | None = None
    ) -> Receipt: ...

    async def handle_message(self, event: MessageEvent, *, wait: bool = True) -> Receipt: ...

    def discard(self, entry: SessionEntry, inbox_ids: Sequence[int]) -> None: ...

    def wake(self, session_key: str) -> None: ...


@dataclass(frozen=True, slots=True)
class OperatorReply:
    """An operator's reply as stored and sent: its transcript entry, and whether the
    platform confirmed it (False: its delivery row is retried, see `GET /v1/deliveries`)."""

    session_key: str
    session_id: str
    entry_id: int | None
    sent: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_key": self.session_key,
            "session_id": self.session_id,
            "entry_id": self.entry_id,
            "sent": self.sent,
        }


class Takeovers:
    """The lanes taken over, as this process holds them (a mirror of the store's rows)."""

    def __init__(
        self,
        *,
        store: SessionStore,
        lane_store: LaneStore,
        lanes: LaneTable,
        config: GatewayConfig,
        clock: Clock,
        delivery: Delivery,
        approvals: Approvals,
        host: TakeoverHost,
        user_message: Callable[[InboxItem, int], dict[str, Any]],
        calls: StoreCalls | None = None,
    ) -> None:
        self.book = TakeoverStore(store, clock=clock)
        self._store = store
        # How the store is called from the loop: inline (SQLite) or off it (PostgreSQL).
        self._calls: StoreCalls = calls or InlineCalls()
        self._lane_store = lane_store
        self._lanes = lanes
        self._config = config
        self._clock = clock
        self._delivery = delivery
        self._approvals = approvals
        self._host = host
        self._user_message = user_message
        # The lanes this process holds in the lane table, with their takeovers.
        self._held: dict[str, Takeover] = {}

    # ------------------------------------------------------------------ state

    def load(self) -> None:
        """Hold every lane the store says is taken over (at start, before any worker runs)."""
        for takeover in self.book.all():
            self._hold(takeover)

    def holds(self, session_key: str) -> bool:
        return session_key in self._held

    def holds_event(self, event: MessageEvent, key_of: Callable[[MessageEvent], str]) -> bool:
        """Whether `event` is a person's message to a lane taken over (a system event, such
        as a job's turn, waits in the lane's inbox instead). No key is built while no lane
        is taken over."""
        return bool(self._held) and not event.event_kind and key_of(event) in self._held

    def get(self, session_key: str) -> Takeover | None:
        return self.book.get(session_key)

    def _hold(self, takeover: Takeover) -> None:
        if takeover.session_key not in self._held:
            self._lanes.hold(takeover.session_key)
        self._held[takeover.session_key] = takeover

    def _let_go(self, key: str) -> None:
        if self._held.pop(key, None) is not None:
            self._lanes.unhold(key)

    async def _quiet(self, key: str) -> None:
        """Stop what the agent is doing on the lane: its pending approvals are cancelled and
        a running turn is stopped as `/stop` stops it, and waited for."""
        self._approvals.cancel(key, by="takeover")
        lane = self._lanes.get(key)
        if lane is not None:
            if lane.running is not None:
                lane.running.cancel(CancelReason.STOP)
            await lane.released.wait()

    # ------------------------------------------------------------------ take over, hand back

    async def take_over(self, session_key: str, *, by: str) -> tuple[Takeover, bool]:
        """Take the lane over (True), or its takeover as it is (False). A running turn is
        stopped as `/stop` stops it, and waited for, so nothing of the agent's lands after
        this returns. `SessionNotFoundError` for an unknown key."""
        if self._store.get_session(session_key) is None:
            raise SessionNotFoundError(
                f"no session with key {session_key!r}", session_key=session_key
            )
        minutes = self._config.takeover.auto_resume_minutes
        takeover, new = self.book.start(session_key, by=by, resume_after_minutes=minutes)
        self._hold(takeover)
        if new:
            log.info("lane taken over", extra={"session_key": session_key, "by": by})
            await self._quiet(session_key)
        return takeover, new

    async def hand_back(
        self, session_key: str, *, by: str, reason: str = "handback"
    ) -> Takeover | None:
        """Give the lane back to the agent (see the module docstring); the takeover that
        ended, or None when it was not taken over."""
        ended = self.end(session_key, by=by, reason=reason)
        if ended is not None:
            await self.resume(session_key, ended)
        return ended

    def end(self, session_key: str, *, by: str, reason: str = "handback") -> Takeover | None:
        """The durable half of `hand_back`: the row goes and the lane is let go; `resume`
        then lets the agent answer what is waiting."""
        ended = self.book.end(session_key, by=by, reason=reason)
        self._let_go(session_key)
        if ended is not None:
            log.info(
                "lane handed back", extra={"session_key": session_key, "by": by, "reason": reason}
            )
        return ended

    async def resume(self, session_key: str, ended: Takeover) -> None:
        """After a hand-back: a turn at once when people's last message went unanswered,
        else only the lane's waiting work (a `/queue` item, a job's turn)."""
        entry = self._store.get_session(session_key)
        last = self._store.load_transcript(entry.session_id, limit=1) if entry else []
        unanswered = bool(last) and last[-1].get("role") == "user" and _held(last[-1])
        if entry is None or entry.origin is None or not unanswered:
            self._host.wake(session_key)
            return
        event = MessageEvent(
            source=entry.origin,
            text=HANDBACK_PROMPT,
            # One per takeover: a hand-back seen by two instances runs one turn.
            message_id=f"{HANDBACK_EVENT}:{to_us(ended.since)}",
            internal=True,
            event_kind=HANDBACK_EVENT,
            session_key=session_key,
        )
        await self._host.handle_message(event, wait=False)

    async def tick(self) -> list[str]:
        """Follow the store: hold lanes taken over elsewhere, let go of those handed back
        elsewhere, and hand back those whose `resume_at` has come (by the injected clock).
        Returns the keys handed back here by time."""
        current = {t.session_key: t for t in await self._calls.run(self.book.all)}
        for key in current.keys() - self._held.keys():
            self._hold(current[key])
            await self._quiet(key)
        for key in self._held.keys() - current.keys():
            ended = self._held[key]
            self._let_go(key)
            await self.resume(key, ended)
        now = self._clock.now()
        resumed: list[str] = []
        due = [t for t in current.values() if t.resume_at is not None and t.resume_at <= now]
        for takeover in due:
            key = takeover.session_key
            if await self.hand_back(key, by=takeover.taken_by, reason="timeout"):
                resumed.append(key)
        return resumed

    async def run(self, stop: asyncio.Event) -> None:
        """`tick` every `REFRESH_SECONDS` until `stop` is set; a failing tick is logged."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), REFRESH_SECONDS)
            except TimeoutError:
                pass
            else:
                return
            try:
                await self.tick()
            except Exception:
                log.exception("takeover tick failed")

    # ------------------------------------------------------------------ messages

    async def hold_message(self, event: MessageEvent) -> Receipt:
        """Store a person's message in a taken-over lane's transcript; no turn runs."""
        inbound = event.to_inbound()
        seen = None
        with self._lane_store.atomic():
            routed = self._host.route(
                event.source,
                session_key=event.session_key,
                visible_session_id=event.visible_session_id,
            )
            entry = routed.entry
            if not routed.archived:
                seen = self._lane_store.lookup_seen(inbound, entry.session_key)
                if seen is None:
                    message = self._user_message(self._item(inbound, entry.session_key), 0)
                    metadata = dict(message.get("metadata") or {})
                    metadata.pop("turn_id", None)
                    metadata["held"] = "takeover"
                    self._store.append_messages(
                        entry.session_id, [{**message, "metadata": metadata}]
                    )
                    self._lane_store.record_command(
                        inbound,
                        session_key=entry.session_key,
                        session_id=entry.session_id,
                        reply=None,
                    )
        self._host.discard(entry, routed.dropped)
        if routed.archived:
            return await self._host.refuse_archived(entry, event.source)
        if seen is not None:
            return Receipt(
                seen.session_key, seen.session_id, ReceiptStatus.DUPLICATE, seen.reply, seen.turn_id
            )
        return Receipt(entry.session_key, entry.session_id, ReceiptStatus.HELD, None, None)

    def _item(self, inbound: Inbound, session_key: str) -> InboxItem:
        source = inbound.source
        part = {"text": inbound.text, "user_id": source.user_id, "user_name": source.user_name}
        return InboxItem(
            id=0,
            session_key=session_key,
            kind=InboxKind.SLOT,
            text=inbound.text,
            parts=(part,),
            media=inbound.media,
            message_id=inbound.message_id,
            message_ids=(inbound.message_id,) if inbound.message_id else (),
            source=source,
            message_type=inbound.message_type,
            reply_to=inbound.reply_to,
            event_kind=inbound.event_kind,
            internal=inbound.internal,
            accepted_at=self._clock.now(),
        )

    async def reply(self, session_key: str, text: str, *, by: str = OPERATOR) -> OperatorReply:
        """The operator's reply in a taken-over lane: stored as the assistant's message
        (written by the operator), then sent to the chat as a delivery row.
        `SessionNotFoundError`, or `NotTakenOverError` while the agent answers the lane."""
        entry = self._store.get_session(session_key)
        if entry is None:
            raise SessionNotFoundError(
                f"no session with key {session_key!r}", session_key=session_key
            )
        if self.book.get(session_key) is None:
            raise NotTakenOverError(
                "the agent answers this session; take it over before replying",
                session_key=session_key,
            )
        message = {
            "role": "assistant",
            "content": text,
            "timestamp": isoformat(self._clock.now()),
            "metadata": {"written_by": "operator", "operator": by},
        }
        ids = self._store.append_messages(entry.session_id, [message])
        sent = True
        if entry.origin is not None:
            sent = await self._delivery.send(
                entry.origin,
                text,
                turn_id=None,
                session_key=session_key,
                kind=DeliveryKind.OPERATOR,
            )
        return OperatorReply(session_key, entry.session_id, ids[0], sent)

    # ------------------------------------------------------------------ /bot

    async def bot_command(
        self, session_key: str, args: str, source: SessionSource
    ) -> tuple[str, Callable[[], Awaitable[None]] | None]:
        """`/bot off`, `/bot on` (operators only) and `/bot` (the state, for anyone): the
        answer, and what to run once it is sent (the agent's answer after `/bot on`)."""
        word = args.strip().lower()
        if word not in ("", "off", "on"):
            return BOT_USAGE, None
        if not word:
            return _state(self.book.get(session_key)), None
        who = approver_id(str(source.platform), source.user_id)
        if who is None or who not in self._config.takeover.operators:
            return _NOT_OPERATOR, None
        if word == "off":
            takeover, new = await self.take_over(session_key, by=who)
            if not new:
                return "The bot is already off here. " + _until(takeover), None
            return "The bot is off here: an operator answers. " + _until(takeover), None
        ended = self.end(session_key, by=who)
        if ended is None:
            return "The bot is on already.", None

        async def after() -> None:
            await self.resume(session_key, ended)

        return "The bot is back on.", after


def _held(message: dict[str, Any]) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and metadata.get("held") == "takeover"


def _until(takeover: Takeover) -> str:
    if takeover.resume_at is None:
        return "/bot on gives the chat back."
    return f"/bot on gives the chat back (by itself at {takeover.resume_at:%H:%M} UTC)."


def _state(takeover: Takeover | None) -> str:
    if takeover is None:
        return "The bot is on: it answers here."
    return f"The bot is off here since {takeover.since:%H:%M} UTC. " + _until(takeover)
