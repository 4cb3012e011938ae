"""`Intake`: one inbound message from the adapter's hand-off to its lane.

Path: wait for the start → normalise the chat id → authorise (allow list; an unknown sender
leaves no trace) → a slash command goes to `CommandRunner` → route (`routing.py`) and accept
durably (dedup + inbox row) in one transaction, which also claims the turn when the lane is
free and the startup gate open → dispatch: in `interrupt` mode a follow-up cancels the running
turn, the lane's worker (`worker.py`) is started or handed the row, and a waiting caller gets
the turn's receipt.

`Intake` is the `CommandHost` commands use (route, accept, dispatch, refuse_archived, notify,
discard, wake, compact), so a command that starts a turn goes the way a message does.

On a shared database a turn is claimed in its accepting transaction only on a lane this
instance holds (its lease lingering after its last turn), under the lane's fence; elsewhere the
lane's worker takes the lease first. A caller waiting for a turn another instance runs is
answered from the journal (`follow_remote_outcomes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sessiongate.core.bindings import agent_for
from sessiongate.core.keys import build_session_key
from sessiongate.errors import LeaseLostError, StoreUnavailableError
from sessiongate.gateway.commands import CommandRunner, parse_command
from sessiongate.gateway.lanes import CancelReason
from sessiongate.gateway.messages import Receipt, ReceiptStatus
from sessiongate.gateway.takeover import Takeovers
from sessiongate.gateway.tracing import key_attribute, traced
from sessiongate.gateway.worker import ARCHIVED_NOTICE
from sessiongate.store.lanes import AcceptStatus, InboxKind, TurnState

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.approvals import Approvals
    from sessiongate.gateway.delivery import Delivery
    from sessiongate.gateway.lane_leases import LaneOwnership
    from sessiongate.gateway.lanes import Lane, LaneTable
    from sessiongate.gateway.messages import MessageEvent
    from sessiongate.gateway.receipts import Waiters
    from sessiongate.gateway.routing import Routed, Router
    from sessiongate.gateway.run_state import IntakeCounters, RunState
    from sessiongate.gateway.store_calls import StoreCalls
    from sessiongate.gateway.streams import TurnWatch
    from sessiongate.gateway.turns import TurnExecutor
    from sessiongate.gateway.worker import LaneWorker
    from sessiongate.store.lanes import Acceptance, Claim, Inbound, LaneStore, SeenRecord
    from sessiongate.store.session_store import SessionStore

__all__ = ["REMOTE_OUTCOME_POLL_SECONDS", "SHUTTING_DOWN", "Intake"]

log = logging.getLogger(__name__)

# How often a caller waiting here for a turn another instance runs looks at the journal.
REMOTE_OUTCOME_POLL_SECONDS = 0.25
_REMOTE_OUTCOMES = {
    TurnState.REPLIED: ReceiptStatus.REPLIED,
    TurnState.DELIVERED: ReceiptStatus.REPLIED,
    TurnState.FAILED: ReceiptStatus.FAILED,
    TurnState.INTERRUPTED: ReceiptStatus.INTERRUPTED,
}
SHUTTING_DOWN = "The gateway is shutting down; please send your message again shortly."


@dataclass(slots=True)
class _Arrivals:
    """The messages to one key being accepted or waiting to be."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    count: int = 0


class Intake:
    def __init__(
        self,
        *,
        store: SessionStore,
        lane_store: LaneStore,
        config: GatewayConfig,
        state: RunState,
        lanes: LaneTable,
        router: Router,
        executor: TurnExecutor,
        worker: LaneWorker,
        leases: LaneOwnership,
        delivery: Delivery,
        waiters: Waiters,
        approvals: Approvals,
        counters: IntakeCounters,
        counts_changed: Callable[[], None],
        clock: Clock,
        calls: StoreCalls,
    ) -> None:
        self._store = store
        self._calls = calls
        # One accept at a time per key, in the order messages arrived (`_arriving`).
        self._arrivals: dict[str, _Arrivals] = {}
        self._lane_store = lane_store
        self._config = config
        self._state = state
        self._lanes = lanes
        self._router = router
        self._executor = executor
        self._worker = worker
        self._leases = leases
        self._delivery = delivery
        self._waiters = waiters
        self._counters = counters
        self._counts_changed = counts_changed
        # Lanes an operator took over from the agent (`takeover.py`): held here, at intake.
        self.takeovers = Takeovers(
            store=store,
            lane_store=lane_store,
            lanes=lanes,
            config=config,
            clock=clock,
            delivery=delivery,
            approvals=approvals,
            host=self,
            user_message=executor.claim_user_message,
            calls=calls,
        )
        self._commands = CommandRunner(
            store=store,
            lane_store=lane_store,
            lanes=lanes,
            config=config,
            host=self,
            approvals=approvals,
            takeovers=self.takeovers,
        )

    @traced(
        lambda self, event, **_: f"inbound {event.source.platform}",
        start=lambda self, event, **_: {
            "messaging.system": str(event.source.platform),
            "messaging.message.id": event.message_id,
            "sessiongate.chat_type": str(event.source.chat_type),
        },
        finish=lambda receipt, *_, **__: {
            "sessiongate.session_key": key_attribute(receipt.session_key),
            "sessiongate.session_id": receipt.session_id,
            "sessiongate.turn_id": receipt.turn_id,
            "sessiongate.receipt": str(receipt.status),
        },
    )
    async def handle_message(
        self, event: MessageEvent, *, wait: bool = True, watch: TurnWatch | None = None
    ) -> Receipt:
        """Route one inbound message; with `wait`, return once its turn has an outcome.

        Called before `start()` finishes, it waits for it; after `stop()`, it answers
        `unavailable` (nothing is written, so the platform's redelivery or the client's retry is
        safe). A message accepted without waiting answers `queued` with the id of the turn
        that will answer it (`GET /v1/turns/{id}`). With `watch`, the accepted message's turn
        streams into it (deltas, messages as stored, then the receipt); a message that was not
        accepted leaves it untouched.
        """
        await self._state.ready.wait()
        event = self._normalise(event)
        source = event.source
        if not self._state.accepting:
            # Nothing was written: a retry after the restart is safe (HTTP answers 503).
            return Receipt(
                self._key_of(event), None, ReceiptStatus.UNAVAILABLE, SHUTTING_DOWN, None
            )
        if not event.internal and not self._is_authorized(source):
            self._counters.unauthorized += 1
            log.info(
                "unauthorized sender",
                extra={"platform": str(source.platform), "user_id": source.user_id},
            )
            return Receipt(self._key_of(event), None, ReceiptStatus.UNAUTHORIZED, None, None)
        command = (
            None
            if event.event_kind
            else parse_command(
                event.text,
                reset_triggers=self._config.reset_triggers,
                agent_commands=self._config.agent_commands,
            )
        )
        if command is not None:
            return await self._commands.run(command, event, wait=wait)
        if self.takeovers.holds_event(event, self._key_of):
            return await self.takeovers.hold_message(event)  # an operator answers this lane
        # System events never interrupt and never merge: each is its own queued turn.
        kind = InboxKind.QUEUED if event.event_kind else InboxKind.SLOT
        inbound = event.to_inbound()
        key = self._key_of(event)
        async with self._arriving(key):
            # The lane is kept while the accept runs (off the loop on PostgreSQL), so a turn
            # claimed in it has a lane to run on and nothing else starts a worker there.
            reserved = self._lanes.reserve(key)
            try:
                routed, acceptance, claim = await self._accept(event, inbound, kind, key, reserved)
            except BaseException:
                if reserved is not None:
                    self._lanes.unreserve(reserved, self._worker.run)
                raise
        entry = routed.entry
        if (
            watch is not None
            and acceptance is not None
            and acceptance.status in (AcceptStatus.ACCEPTED, AcceptStatus.MERGED)
            and acceptance.inbox_id is not None
        ):
            # Before any await: the turn cannot have produced anything yet.
            self._waiters.watch(acceptance.inbox_id, entry.session_key, watch)
        self.discard(entry, routed.dropped)
        if claim is None:
            if reserved is not None:
                self._lanes.unreserve(reserved, self._worker.run)
            if acceptance is None:
                return await self.refuse_archived(entry, source, event=event.event_kind)
            return await self.dispatch(
                entry, source, acceptance, wait=wait, interrupt=kind is InboxKind.SLOT
            )
        assert reserved is not None
        # The lane was kept for this accept: its worker starts with this turn. Its lingering
        # lease is no longer idle, so the sweep cannot give it back under the turn before the
        # worker runs.
        self._leases.busy(entry.session_key)
        future = (
            self._waiters.add(claim.item.id, entry.session_key, entry.session_id) if wait else None
        )
        self._lanes.start(reserved, self._worker.run, first=claim)
        if future is None:
            return Receipt(
                entry.session_key, entry.session_id, ReceiptStatus.QUEUED, None, claim.turn.id
            )
        return await future

    @contextlib.asynccontextmanager
    async def _arriving(self, key: str) -> AsyncIterator[None]:
        """Messages to one key are accepted one at a time, in the order they arrived (an
        `asyncio.Lock` wakes its waiters first come, first served)."""
        arrivals = self._arrivals.get(key)
        if arrivals is None:
            arrivals = self._arrivals[key] = _Arrivals()
        arrivals.count += 1
        try:
            async with arrivals.lock:
                yield
        finally:
            arrivals.count -= 1
            if not arrivals.count:
                del self._arrivals[key]

    async def _accept(
        self,
        event: MessageEvent,
        inbound: Inbound,
        kind: InboxKind,
        key: str,
        reserved: Lane | None,
    ) -> tuple[Routed, Acceptance | None, Claim | None]:
        """`_accept_routed` off the loop. On a shared database a turn is claimed in its
        accepting transaction only on a lane this instance holds (its lease lingering after
        its last turn), under the fence; elsewhere the lane's worker claims the lease first."""
        held = reserved is not None and self._leases.held_for_accept(key)
        accept = self._accept_routed
        try:
            return await self._calls.run(accept, event, inbound, kind, key, held, reserved)
        except LeaseLostError:
            return await self._calls.run(accept, event, inbound, kind, key, False, reserved)
        except StoreUnavailableError:
            if held:
                # The connection died with the commit's answer (a restart): the claim may have
                # committed a running turn no worker here runs. Claimed here next, the lane's
                # later rows would overtake it; its next worker recovers it first.
                self._leases.settle(key, settled=False)
            raise

    def _accept_routed(
        self,
        event: MessageEvent,
        inbound: Inbound,
        kind: InboxKind,
        key: str,
        held: bool,
        reserved: Lane | None,
    ) -> tuple[Routed, Acceptance | None, Claim | None]:
        """Route and accept one message in one transaction, claiming its turn at once when
        its lane was `reserved` for it (and, on a shared database, `held` here: then under the
        fence, and `LeaseLostError` means nothing was written)."""
        fence = self._leases.fence(key, lock_lane=True) if held else contextlib.nullcontext()
        # No call inside is caught and gone on from: the calls need no savepoints.
        with fence, self._lane_store.atomic(savepoints=False):
            self._leases.lock_for_accept(key, held=held, lock_lane=self._lane_store.lock_lane)
            routed = self._router.route(
                event.source,
                event_kind=event.event_kind,
                session_key=event.session_key,
                visible_session_id=event.visible_session_id,
                reserved=reserved,
            )
            entry = routed.entry
            startable = (
                reserved is not None
                and entry.session_key == key
                and not routed.busy
                and self._state.gate.is_set()
                and not self._state.stopping
                and self._leases.claim_at_accept(key, held=held, routed_key=entry.session_key)
            )
            if routed.archived:
                return routed, None, None  # refused by the caller; nothing is written
            if startable:
                acceptance, claim = self._lane_store.accept_and_claim(
                    inbound,
                    entry=entry,
                    kind=kind,
                    cap=self._config.queue_cap,
                    user_message=self._executor.claim_user_message,
                )
                return routed, acceptance, claim
            return routed, self.accept(entry, inbound, kind), None

    def _normalise(self, event: MessageEvent) -> MessageEvent:
        adapter = self._delivery.adapter_for(event.source.platform)
        if adapter is None:
            return event
        chat_id = adapter.chat_id_key(event.source.chat_id)
        if chat_id == event.source.chat_id:
            return event
        return replace(event, source=replace(event.source, chat_id=chat_id))

    def _is_authorized(self, source: SessionSource) -> bool:
        adapter = self._delivery.adapter_for(source.platform)
        if adapter is not None and getattr(adapter, "authorizes_senders", False):
            # A kit adapter admitted the message by its own, stricter policy (users and chats,
            # pairing; fail closed) before handing it over.
            return True
        platform = self._config.platforms.get(str(source.platform))
        if platform is None or platform.allow_from is None:
            return True
        allowed = set(platform.allow_from)
        return "*" in allowed or any(
            uid in allowed for uid in (source.user_id, source.user_id_alt) if uid
        )

    def _key_of(self, event: MessageEvent) -> str:
        # Computed, never stored: an unauthorised sender must leave no row behind.
        if event.session_key is not None:
            return event.session_key
        return build_session_key(
            event.source,
            group_sessions_per_user=self._config.group_sessions_per_user,
            thread_sessions_per_user=self._config.thread_sessions_per_user,
            agent_id=agent_for(event.source, self._config.bindings),
        )

    # ------------------------------------------------------------------ CommandHost

    def route(
        self,
        source: SessionSource,
        *,
        event_kind: str | None = None,
        session_key: str | None = None,
        visible_session_id: str | None = None,
    ) -> Routed:
        return self._router.route(
            source,
            event_kind=event_kind,
            session_key=session_key,
            visible_session_id=visible_session_id,
        )

    async def refuse_archived(
        self, entry: SessionEntry, source: SessionSource, *, event: str | None = None
    ) -> Receipt:
        """Answer a message to an archived session; a system event (`event`, its kind) gets
        the receipt only: the notice is for people."""
        self._counters.archived += 1
        log.info(
            "message to an archived session refused",
            extra={"session_key": entry.session_key, "event_kind": event},
        )
        if event is None:
            await self.notify(source, ARCHIVED_NOTICE)
        return Receipt(
            entry.session_key, entry.session_id, ReceiptStatus.ARCHIVED, ARCHIVED_NOTICE, None
        )

    def accept(self, entry: SessionEntry, inbound: Inbound, kind: InboxKind) -> Acceptance:
        return self._lane_store.accept(
            inbound,
            session_key=entry.session_key,
            session_id=entry.session_id,
            kind=kind,
            cap=self._config.queue_cap,
        )

    async def dispatch(
        self,
        entry: SessionEntry,
        source: SessionSource,
        acceptance: Acceptance,
        *,
        wait: bool,
        interrupt: bool,
    ) -> Receipt:
        key = entry.session_key
        if acceptance.status is AcceptStatus.DUPLICATE:
            assert acceptance.seen is not None
            return await self._duplicate(acceptance.seen, wait=wait)
        if acceptance.status is AcceptStatus.FULL:
            self._counters.queue_full += 1
            notice = (
                f"{acceptance.depth} messages are already waiting here, so this one was not "
                "taken. Please send it again after the current replies."
            )
            log.warning("queue full", extra={"session_key": key, "depth": acceptance.depth})
            await self.notify(source, notice)
            return Receipt(key, entry.session_id, ReceiptStatus.QUEUE_FULL, notice, None)
        assert acceptance.inbox_id is not None
        # A queued message already knows the turn that will answer it (`Acceptance.turn_id`).
        turn_id = acceptance.turn_id()
        if self._state.stopping:
            # Accepted while the runner drains: the row is durable and runs after the restart.
            return Receipt(key, entry.session_id, ReceiptStatus.QUEUED, None, turn_id)
        lane = self._lanes.get(key)
        if (
            interrupt
            and self._config.busy_input_mode == "interrupt"
            and self._state.gate.is_set()
            and lane is not None
            and lane.running is not None
            and lane.running.cancel(CancelReason.INTERRUPT)
        ):
            log.info(
                "follow-up interrupts the running turn",
                extra={"session_key": key, "turn_id": lane.running.turn_id},
            )
        future = self._waiters.add(acceptance.inbox_id, key, entry.session_id) if wait else None
        self._worker.ensure(key)
        if future is None:
            return Receipt(key, entry.session_id, ReceiptStatus.QUEUED, None, turn_id)
        return await future

    async def follow_remote_outcomes(self, stop: asyncio.Event) -> None:
        """On a shared database a message accepted here may run on the instance owning its
        lane: its waiting caller is answered from the journal once that turn has ended."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), REMOTE_OUTCOME_POLL_SECONDS)
            except TimeoutError:
                pass
            else:
                return
            for inbox_id, key in self._waiters.rows().items():
                # A lane held here is answered by its own turn, with the richer receipt: no
                # read of the journal for it (it would be a round trip in the lane's way).
                if self._leases.holds(key):
                    continue
                try:
                    turn = await self._calls.run(self._lane_store.get_turn, inbox_id)
                except StoreUnavailableError:
                    break
                if turn is None or turn.inbox_id != inbox_id:
                    continue
                status = _REMOTE_OUTCOMES.get(turn.state)
                if status is not None:
                    self._waiters.resolve(
                        inbox_id,
                        status,
                        reply=turn.reply,
                        turn_id=turn.id,
                        session_id=turn.session_id,
                    )

    async def _duplicate(self, seen: SeenRecord, *, wait: bool) -> Receipt:
        self._counters.duplicates += 1
        if wait and seen.pending and seen.inbox_id is not None:
            first = await self._waiters.add(seen.inbox_id, seen.session_key, seen.session_id)
            return replace(first, status=ReceiptStatus.DUPLICATE)
        return Receipt(
            seen.session_key, seen.session_id, ReceiptStatus.DUPLICATE, seen.reply, seen.turn_id
        )

    async def notify(self, source: SessionSource, text: str) -> None:
        await self._delivery.send(source, text, turn_id=None)

    async def compact(
        self, session_key: str, *, record: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """`LaneWorker.compact`: the compaction runs on the lane as a turn does."""
        return await self._worker.compact(session_key, record=record)

    def write_restart_counts(self) -> None:
        self._counts_changed()

    def discard(self, entry: SessionEntry, inbox_ids: Sequence[int]) -> None:
        for inbox_id in inbox_ids:
            self._waiters.resolve(inbox_id, ReceiptStatus.INTERRUPTED, session_id=entry.session_id)

    def wake(self, session_key: str) -> None:
        if not self._state.stopping and self._lane_store.queue_depth(session_key):
            self._worker.ensure(session_key)
