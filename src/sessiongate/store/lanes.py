"""`LaneStore`: the gateway's durable inbound queue and turn journal, one transaction per call.

The gateway never sees a connection: each method here is one state transition (DESIGN
decisions 1, 3 and 4), and the outcome of a turn (transcript rows, usage, journal state, inbox
row, resume flag, stuck-loop counter) commits in one transaction with `SessionStore`'s own
methods nested inside as savepoints. Work is claimed, never removed up front: an inbox row is
marked claimed by the transaction that journals its turn and deleted by the one that commits
the turn's outcome, so a crash at any point leaves the row to be resumed.

Over the ~400-line budget because it is the whole durable contract of the runtime in one place:
each method is one transition, and reading them together is how one checks that no path
removes work before its outcome commits. The SQL itself lives behind the storage protocol
(`protocol/`), in the backends.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sessiongate.core.source import SessionSource
from sessiongate.errors import InvalidEntryError, MessageIdConflictError, SessionNotFoundError
from sessiongate.store.changes import Change, ChangeKind
from sessiongate.store.records import (
    TRANSITIONS,
    InboxKind,
    InboxRow,
    SeenRow,
    TurnRow,
    TurnState,
    from_us,
    to_us,
)
from sessiongate.store.tree import INLINE_CONTEXT_ENTRIES

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Callable, Sequence
    from datetime import datetime

    from sessiongate.core.entry import SessionEntry
    from sessiongate.store.protocol import LaneBackend, Tx
    from sessiongate.store.session_store import SessionStore

__all__ = [
    "TRANSITIONS",
    "AcceptStatus",
    "Acceptance",
    "Claim",
    "Inbound",
    "InboxItem",
    "InboxKind",
    "LaneStore",
    "SeenRecord",
    "Turn",
    "TurnState",
]

log = logging.getLogger(__name__)

_CLEAN_SHUTDOWN = "clean_shutdown"


class AcceptStatus(enum.StrEnum):
    ACCEPTED = "accepted"  # a new row
    MERGED = "merged"  # merged into the lane's pending slot
    # This message (same id, sender, lane and content) was seen before; nothing written.
    DUPLICATE = "duplicate"
    FULL = "full"  # the lane's queue is at its cap; nothing written


@dataclass(frozen=True, slots=True)
class Inbound:
    """One inbound message as the store keeps it (the gateway's `MessageEvent`, flattened)."""

    source: SessionSource
    text: str
    media: tuple[str, ...] = ()
    message_id: str | None = None
    message_type: str = "text"
    reply_to: str | None = None
    event_kind: str | None = None
    internal: bool = False
    # Text the gateway re-submits as stored (`/retry`): it already carries its sender prefix.
    verbatim: bool = False


@dataclass(frozen=True, slots=True)
class SeenRecord:
    """Where an already-seen message went, for answering a redelivery with the first receipt."""

    session_key: str
    session_id: str | None
    status: str  # "accepted" (became or joined an inbox row) or "command"
    inbox_id: int | None
    turn_id: int | None
    reply: str | None  # a command's answer, or the reply of the turn that consumed the message
    turn_state: TurnState | None
    pending: bool  # its inbox row still waits for (or is in) a turn


@dataclass(frozen=True, slots=True)
class Acceptance:
    status: AcceptStatus
    inbox_id: int | None
    depth: int  # the lane's pending rows after this call (the slot counts one)
    seen: SeenRecord | None = None
    # Whether a journal from before turns took their row's id holds that id already; asked
    # in the accepting transaction, answered once it committed (`turn_id`).
    id_taken: Callable[[], bool] | None = field(default=None, repr=False, compare=False)

    def turn_id(self) -> int | None:
        """The id of the turn that will answer the accepted row: a turn takes its row's id,
        unless an old journal holds it (then another, and this names none). Call it after
        the accepting transaction committed."""
        if self.inbox_id is None or (self.id_taken is not None and self.id_taken()):
            return None
        return self.inbox_id


@dataclass(frozen=True, slots=True)
class InboxItem:
    id: int
    session_key: str
    kind: InboxKind
    text: str
    parts: tuple[dict[str, Any], ...]
    media: tuple[str, ...]
    message_id: str | None
    message_ids: tuple[str, ...]
    source: SessionSource
    message_type: str
    reply_to: str | None
    event_kind: str | None
    internal: bool
    accepted_at: datetime


@dataclass(frozen=True, slots=True)
class Turn:
    id: int
    session_key: str
    session_id: str
    inbox_id: int | None
    state: TurnState
    attempt: int
    resumes: int
    source: SessionSource
    reply: str | None
    error: str | None
    accepted_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    delivered_at: datetime | None


@dataclass(frozen=True, slots=True)
class Claim:
    """A turn and the inbox row it holds, and the routing entry as it was when the turn was
    claimed (None for a resumed turn): it saves the executor a read, and tells the outcome
    commit whether a `resume_pending` flag can be set at all. `user_entry_id` is the entry of
    the user message the claim stored (None when it stored none)."""

    turn: Turn
    item: InboxItem
    entry: SessionEntry | None = None
    # Tells `user_entry_id` once the claim committed (on PostgreSQL the append's answer comes
    # with the commit's).
    user_entry: Callable[[], int | None] | None = field(default=None, repr=False, compare=False)

    @property
    def user_entry_id(self) -> int | None:
        return None if self.user_entry is None else self.user_entry()


@dataclass(frozen=True, slots=True)
class ReplyStored:
    """What a replied outcome tells once the caller's outermost transaction committed (on a
    shared database the answers come with the commit's): whether a stuck-loop counter was
    reset, and the new entry ids of the turn's messages (None: stored already)."""

    counter_reset: Callable[[], bool]
    entry_ids: Callable[[], list[int | None]]
    # Whether the lane has a row waiting, as the outcome committed (its worker's next look).
    pending: Callable[[], bool]


class LaneStore:
    """The inbox, the journal and the recovery records of one `SessionStore`'s database."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self._db = store.database
        self._placement = store.placement
        self._clock = store.clock

    def _now(self) -> int:
        return to_us(self._clock.now())

    # An incognito lane's rows live in the store's in-memory database, beside its transcript:
    # each call picks the database by the lane's key, or by the row's id, from the store's
    # placement (`store/placement.py`), so nothing of an incognito conversation reaches the
    # disk.

    def _db_for_key(self, session_key: str) -> LaneBackend:
        return self._placement.for_key(session_key)

    def _db_for_row(self, row_id: int) -> LaneBackend:
        return self._placement.for_row(row_id)

    def _databases(self) -> list[LaneBackend]:
        return self._placement.databases()

    def is_durable_turn(self, turn_id: int) -> bool:
        """Whether the turn (or inbox row) is kept in the durable database: not an incognito
        lane's, which lives in memory and is gone after a restart."""
        return self._placement.is_durable_row(turn_id)

    def atomic(self, *, savepoints: bool = True) -> contextlib.AbstractContextManager[object]:
        """Group several calls (and `SessionStore` calls) into one transaction (one on each
        database once incognito lanes exist): `SessionStore.atomic`."""
        return self._store.atomic(savepoints=savepoints)

    # ------------------------------------------------------------------ accepting

    def lock_lane(self, session_key: str) -> None:
        """The lane's writer lock, to the end of the caller's transaction (inside `atomic()`):
        what every accept takes (`_accept`), taken earlier by a caller that must order it
        before other row locks (on one database several instances share)."""
        # One statement in the caller's transaction: no savepoint of its own to pay for.
        with self._db_for_key(session_key).read() as conn:
            conn.lock_lane(session_key)

    def resolve(self, source: SessionSource) -> tuple[str, SessionEntry | None]:
        """The key `source` routes to and its entry, read only: nothing is created, rotated
        or touched (a busy lane's message must not roll its session over mid-turn)."""
        # The store's own routing (identity aliases, key-collision tags), so the key is always
        # the one `get_or_create_session` would use.
        return self._store.resolve_route(source)

    def accept(
        self,
        inbound: Inbound,
        *,
        session_key: str,
        session_id: str | None,
        kind: InboxKind,
        cap: int,
    ) -> Acceptance:
        """Deduplicate and write one inbound message, in one transaction.

        A `slot` message merges into the lane's pending slot when there is one (always allowed:
        it adds no row); otherwise a new row is written unless the lane already holds `cap`
        pending rows, in which case nothing is written and the status is FULL.
        """
        now = self._now()
        with self._db_for_key(session_key).transaction() as conn:
            acceptance, _, _ = self._accept(conn, inbound, session_key, kind, cap, now)
            if acceptance.inbox_id is None or acceptance.seen is not None:
                return acceptance
            self._remember(conn, inbound, session_key, session_id, acceptance.inbox_id, now)
            if acceptance.status is AcceptStatus.ACCEPTED:
                _queue_changed(conn, session_key, acceptance.depth)
            return replace(acceptance, id_taken=conn.turn_id_taken(acceptance.inbox_id))

    def accept_and_claim(
        self,
        inbound: Inbound,
        *,
        entry: SessionEntry,
        kind: InboxKind,
        cap: int,
        user_message: Callable[[InboxItem, int], dict[str, Any]] | None = None,
    ) -> tuple[Acceptance, Claim | None]:
        """`accept`, then `claim_next`, in one transaction: for a lane with no worker, whose
        message can start its turn at once. The message is durable before the turn starts,
        exactly as with two transactions; the claim is None when nothing was taken
        (duplicate, full). With `user_message`, the turn's user message is appended to the
        transcript in the same transaction."""
        key, session_id = entry.session_key, entry.session_id
        now = self._now()
        with self._db_for_key(key).transaction() as conn:
            acceptance, fresh, started = self._accept(
                conn, inbound, key, kind, cap, now, start_for=session_id
            )
            if acceptance.inbox_id is None or acceptance.seen is not None:
                return acceptance, None
            if fresh is not None and started is not None:
                # The lane was idle: the row was written claimed by its running turn, and is
                # claimed as built, without reading it back.
                item, turn_id = fresh, started
                _started(conn, key, session_id, turn_id)
                self._remember(conn, inbound, key, session_id, item.id, now, turn_id=turn_id)
            else:
                self._remember(conn, inbound, key, session_id, acceptance.inbox_id, now)
                row = conn.next_pending(key)
                assert row is not None  # the accepted row itself is pending
                item = _item(row)
                turn_id = self._journal(conn, key, session_id, item, now)
                conn.link_seen_to_turn(item.id, turn_id)
                if acceptance.status is AcceptStatus.MERGED:
                    # Merged into the slot, then the slot claimed: one row fewer waits.
                    _queue_changed(conn, key, acceptance.depth - 1)
            stored = self._store_user_message(conn, item, turn_id, session_id, user_message)
        return acceptance, self._claim(turn_id, item, entry, now, user_entry=stored)

    def _accept(
        self,
        conn: Tx,
        inbound: Inbound,
        session_key: str,
        kind: InboxKind,
        cap: int,
        now: int,
        *,
        start_for: str | None = None,
    ) -> tuple[Acceptance, InboxItem | None, int | None]:
        """The acceptance, the new row when one was written (for claiming it unread), and
        with `start_for` (a session id) the turn started on it when the lane was idle. The
        dedup record is the caller's to write (`_remember`), so it can name the turn."""
        source = inbound.source
        part: dict[str, Any] = {
            "text": inbound.text,
            "user_id": source.user_id,
            "user_name": source.user_name,
        }
        if inbound.verbatim:
            part["verbatim"] = True
        # Before the dedup read and the row: several instances may accept into this lane.
        conn.lock_lane(session_key)
        if inbound.message_id:
            seen = _select_seen(conn, inbound, session_key)
            if seen is not None:
                depth = conn.count_pending(seen.session_key)
                duplicate = Acceptance(
                    AcceptStatus.DUPLICATE, seen.inbox_id, depth, _seen(conn, seen)
                )
                return duplicate, None, None
        fields: dict[str, Any] = {
            "part": part,
            "media": list(inbound.media),
            "message_id": inbound.message_id,
            "source": source.to_dict(),
            "message_type": inbound.message_type,
            "reply_to": inbound.reply_to,
            "at": now,
        }
        row_fields = {
            "session_key": session_key,
            "kind": kind,
            "event_kind": inbound.event_kind,
            "internal": inbound.internal,
            **fields,
        }
        # An idle lane (the common case) takes the row at once (and starts its turn, with
        # `start_for`); otherwise the slot and the cap decide, as the count found.
        started: int | None = None
        if cap <= 0:
            depth, inbox_id = conn.count_pending(session_key), None
        elif start_for is not None:
            depth, inbox_id, started = conn.start_row_if_idle(
                session_id=start_for, started_at=now, **row_fields
            )
        else:
            depth, inbox_id = conn.insert_inbox_row_if_idle(**row_fields)
        if inbox_id is None:
            slot = None
            if depth and kind is InboxKind.SLOT:
                slot = conn.pending_slot(session_key)
            if slot is not None:
                conn.merge_into_slot(slot, **fields)
                return Acceptance(AcceptStatus.MERGED, slot.id, depth), None, None
            if depth >= cap:
                return Acceptance(AcceptStatus.FULL, None, depth), None, None
            inbox_id = conn.insert_inbox_row(**row_fields)
        item = InboxItem(
            id=inbox_id,
            session_key=session_key,
            kind=kind,
            text=inbound.text,
            parts=(part,),
            media=tuple(inbound.media),
            message_id=inbound.message_id,
            message_ids=(inbound.message_id,) if inbound.message_id else (),
            source=source,
            message_type=inbound.message_type,
            reply_to=inbound.reply_to,
            event_kind=inbound.event_kind,
            internal=inbound.internal,
            accepted_at=from_us(now),
        )
        return Acceptance(AcceptStatus.ACCEPTED, inbox_id, depth + 1), item, started

    def _remember(
        self,
        conn: Tx,
        inbound: Inbound,
        session_key: str,
        session_id: str | None,
        inbox_id: int,
        now: int,
        *,
        turn_id: int | None = None,
    ) -> None:
        if not inbound.message_id:
            return
        conn.insert_seen(
            _seen_row(inbound, session_key, session_id, inbox_id, turn_id, "accepted", None, now),
        )

    def lookup_seen(self, inbound: Inbound, session_key: str) -> SeenRecord | None:
        """The record of this message from this sender in lane `session_key`, or None;
        `MessageIdConflictError` when the id was used there for a different message."""
        if not inbound.message_id:
            return None
        with self._db_for_key(session_key).read() as conn:
            seen = _select_seen(conn, inbound, session_key)
            return None if seen is None else _seen(conn, seen)

    def record_command(
        self, inbound: Inbound, *, session_key: str, session_id: str | None, reply: str | None
    ) -> bool:
        """Remember a command's message id and answer (None: a message that ran no turn, such
        as one stored while an operator holds the lane); False if it was already seen.

        Call it inside `atomic()` together with the command's effect, so a redelivered `/new`
        neither resets twice nor is lost.
        """
        if not inbound.message_id:
            return True
        row = _seen_row(inbound, session_key, session_id, None, None, "command", reply, self._now())
        with self._db_for_key(session_key).transaction() as conn:
            return conn.insert_seen(row)

    def clear_pending(self, session_key: str) -> list[int]:
        """Delete the lane's pending slot and queue (for `/new` and `/reset`); returns the ids."""
        with self._db_for_key(session_key).transaction() as conn:
            deleted = conn.delete_pending(session_key)
            if deleted:
                _queue_changed(conn, session_key, 0)
            return deleted

    def drop_pending(self, inbox_id: int) -> bool:
        """Delete one waiting row that will not run (its session was archived while it
        waited), with the dedup records of its message ids; False if it is no longer pending.

        The records go in the same transaction: left behind, they would answer the sender's
        retry (after unarchiving) with `duplicate`, and the message would never run."""
        with self._db_for_row(inbox_id).transaction() as conn:
            row = conn.get_inbox_row(inbox_id)
            if row is None or not conn.delete_pending_row(inbox_id):
                return False
            conn.delete_seen_of_row(inbox_id)
            _queue_changed(conn, row.session_key)
            return True

    def discard_pending_events(self, session_key: str, *, keep: int | None = None) -> list[int]:
        """Delete the lane's waiting system events (a rollover: they were meant for the old
        session), except row `keep`; returns their ids."""
        with self._db_for_key(session_key).transaction() as conn:
            deleted = conn.delete_pending_events(session_key, keep=keep)
            if deleted:
                _queue_changed(conn, session_key)
            return deleted

    # ------------------------------------------------------------------ claiming

    def claim_next(
        self,
        session_key: str,
        session_id: str,
        *,
        user_message: Callable[[InboxItem, int], dict[str, Any]] | None = None,
    ) -> Claim | None:
        """Claim the lane's next pending row (the slot first, then `/queue` items, oldest first)
        and journal its turn as running, in one transaction (with the user message, as
        `accept_and_claim` does); None when the lane is empty."""
        now = self._now()
        with self._db_for_key(session_key).transaction() as conn:
            row = conn.next_pending(session_key)
            if row is None:
                return None
            item = _item(row)
            turn_id = self._journal(conn, session_key, session_id, item, now)
            conn.link_seen_to_turn(row.id, turn_id)
            _queue_changed(conn, session_key)
            stored = self._store_user_message(conn, item, turn_id, session_id, user_message)
        return self._claim(turn_id, item, None, now, session_id=session_id, user_entry=stored)

    def claim_item(
        self,
        item: InboxItem,
        entry: SessionEntry,
        *,
        user_message: Callable[[InboxItem, int], dict[str, Any]] | None = None,
    ) -> Claim:
        """Claim this pending row (from `peek_next`) for `entry`'s session, in one transaction
        (call it inside `atomic()` with the routing that chose the entry), with the user
        message as `accept_and_claim` does. Raises `LookupError` if the row is no longer
        pending."""
        now = self._now()
        with self._db_for_key(item.session_key).transaction() as conn:
            turn_id = self._journal(conn, item.session_key, entry.session_id, item, now)
            conn.link_seen_to_turn(item.id, turn_id)
            _queue_changed(conn, item.session_key)
            stored = self._store_user_message(conn, item, turn_id, entry.session_id, user_message)
        return self._claim(turn_id, item, entry, now, user_entry=stored)

    def _store_user_message(
        self,
        conn: Tx,
        item: InboxItem,
        turn_id: int,
        session_id: str,
        build: Callable[[InboxItem, int], dict[str, Any]] | None,
    ) -> Callable[[], int | None] | None:
        """Append the claimed turn's user message (number 0 of the turn) inside the claim's
        transaction; what tells its entry id once the claim committed (the id None when it
        was stored already), or None when there is no builder. A message the transcript
        refuses, or a session gone meanwhile, is left to the outcome commit, which appends it
        again (or records its absence) without failing the claim."""
        if build is None:
            return None
        try:
            message = build(item, turn_id)
            stored = self._store.append_message_ahead(
                session_id, message, idempotency_key=_idem(turn_id)
            )
            if stored is None:
                with self._db_for_key(item.session_key).savepoint():
                    ids = self._store.append_messages(
                        session_id, [message], idempotency_key=_idem(turn_id)
                    )
                stored = functools.partial(ids.__getitem__, 0)
        except (InvalidEntryError, SessionNotFoundError) as exc:
            log.warning(
                "user message not stored at the claim",
                extra={"session_key": item.session_key, "turn_id": turn_id, "error": str(exc)},
            )
            return None
        # The turn reads its context as soon as this commits: sent now, it comes with the
        # commit's answer (on a backend whose reads are round trips).
        after = self._store.kept_context_at(session_id)
        conn.prefetch_context(session_id, INLINE_CONTEXT_ENTRIES, after)
        return stored

    def _journal(
        self, conn: Tx, session_key: str, session_id: str, item: InboxItem, now: int
    ) -> int:
        """Journal the row's turn as running and mark the row claimed by it."""
        turn_id = conn.start_turn(
            session_key=session_key,
            session_id=session_id,
            inbox_id=item.id,
            source=item.source.to_dict(),
            accepted_at=to_us(item.accepted_at),
            started_at=now,
        )
        _started(conn, session_key, session_id, turn_id)
        return turn_id

    def _claim(
        self,
        turn_id: int,
        item: InboxItem,
        entry: SessionEntry | None,
        now: int,
        *,
        session_id: str | None = None,
        user_entry: Callable[[], int | None] | None = None,
    ) -> Claim:
        turn = Turn(
            id=turn_id,
            session_key=item.session_key,
            session_id=session_id or (entry.session_id if entry is not None else ""),
            inbox_id=item.id,
            state=TurnState.RUNNING,
            attempt=1,
            resumes=0,
            source=item.source,
            reply=None,
            error=None,
            accepted_at=item.accepted_at,
            started_at=from_us(now),
            finished_at=None,
            delivered_at=None,
        )
        return Claim(turn, item, entry, user_entry)

    def claim_resume(self, turn_id: int) -> tuple[Claim, int]:
        """Dispatch an accepted (interrupted) turn again: accepted -> running, attempt + 1, and
        the lane's stuck-loop counter + 1, in one transaction — so a resume that is SIGKILLed
        is still counted. Returns the claim and the new counter value."""
        now = self._now()
        with self._db_for_row(turn_id).transaction() as conn:
            conn.transition_turn(turn_id, TurnState.RUNNING, at=now, resume=True)
            claim = self._load_claim(conn, turn_id)
            count = conn.bump_restart_count(claim.turn.session_key, at=now)
            turn = claim.turn
            conn.note(
                Change(ChangeKind.TURN_STARTED, turn.session_key, turn.session_id, turn_id=turn_id)
            )
        return claim, count

    def get_claim(self, turn_id: int) -> Claim | None:
        with self._db_for_row(turn_id).read() as conn:
            try:
                return self._load_claim(conn, turn_id)
            except LookupError:
                return None

    def _load_claim(self, conn: Tx, turn_id: int) -> Claim:
        row = conn.get_turn(turn_id)
        item_row = conn.get_inbox_row(row.inbox_id) if row and row.inbox_id else None
        if row is None or item_row is None:
            raise LookupError(f"turn {turn_id} holds no inbox row")
        return Claim(_turn(row), _item(item_row))

    # ------------------------------------------------------------------ outcomes

    def commit_reply(
        self,
        claim: Claim,
        messages: Sequence[dict[str, Any]],
        *,
        reply: str,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        cost_usd: float | None = None,
        delivered: bool = False,
        first_index: int = 0,
        route_seen: SessionEntry | None = None,
    ) -> ReplyStored:
        """The replied outcome in one transaction: transcript rows (idempotent per turn: the
        first of `messages` is the turn's number `first_index`, see `append_turn_messages`),
        usage, journal -> replied (-> delivered too when `delivered`: the reply has no channel
        but the receipt), inbox row deleted, `resume_pending` cleared, stuck-loop counter
        reset. Raises `SessionNotFoundError` when the session row is gone (nothing is written
        then).

        `route_seen` is the lane's route as the caller saw it written (the claim's entry):
        where a read is a round trip, the outcome is written over it unread, and the commit
        raises `RouteChangedError` (nothing committed) if it changed meanwhile; the caller
        then commits again without it."""
        turn = claim.turn
        now = self._now()
        # Nothing inside is caught and gone on from: the calls need no savepoints.
        with self._db_for_key(turn.session_key).transaction(savepoints=False) as conn:
            conn.finish_reply(turn.id, at=now, reply=reply, delivered=delivered)
            if route_seen is not None and route_seen.session_id == turn.session_id:
                conn.expect_route(route_seen)
                ids = self._append_reply_ahead(turn, messages, first_index)
            else:
                # `record_turn` reads it after the append: sent now, it is answered with the
                # append's own answer.
                conn.prefetch_route(turn.session_key)
                ids = None
            if ids is None:
                appended = self._store.append_messages(
                    turn.session_id,
                    list(messages),
                    idempotency_key=_idem(turn.id),
                    first_index=first_index,
                )
                ids = functools.partial(list, appended)
            self._store.record_turn(
                turn.session_key,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cache_read_tokens=cache_read_tokens,
                cache_write_tokens=cache_write_tokens,
                cost_usd=cost_usd,
                last_prompt_tokens=input_tokens or None,
                # A system event (heartbeat, cron, ...) is no activity: it must not mark a read
                # conversation unread.
                activity=claim.item.event_kind is None,
            )
            if _may_be_resume_pending(claim):
                self._store.clear_resume_pending(turn.session_key)
            conn.delete_inbox_row(claim.item.id)
            pending = _finished(conn, turn, TurnState.REPLIED)
            return ReplyStored(conn.reset_restart_count_later(turn.session_key), ids, pending)

    def _append_reply_ahead(
        self, turn: Turn, messages: Sequence[dict[str, Any]], first_index: int
    ) -> Callable[[], list[int | None]] | None:
        """The reply's one message sent without waiting for its answer, where that pays;
        None when the caller appends the usual way. A session gone meanwhile is no silent
        miss: it went with its route, which the commit checks (`expect_route`)."""
        if len(messages) != 1:
            return None
        entry_id = self._store.append_message_ahead(
            turn.session_id, messages[0], idempotency_key=_idem(turn.id), number=first_index
        )
        if entry_id is None:
            return None
        return lambda: [entry_id()]

    def commit_failure(
        self,
        claim: Claim,
        *,
        error: str,
        notice: str,
        messages: Sequence[dict[str, Any]],
        suspend: bool = False,
        first_index: int = 0,
    ) -> Callable[[], bool]:
        """Failed in one transaction: the user's message (and `messages`) kept in the transcript
        when the session still exists, journal -> failed, inbox row deleted, `resume_pending`
        cleared, the lane's stuck-loop counter reset (the turn ended without a crash; with
        `suspend`, the loop guard ended it); `suspend` also suspends the session. Returns
        whether the lane has a row waiting, as it committed (read after the commit)."""
        turn = claim.turn
        with self._db_for_key(turn.session_key).transaction() as conn:
            conn.transition_turn(
                turn.id, TurnState.FAILED, at=self._now(), reply=notice, error=error
            )
            self._append_best_effort(turn, messages, first_index)
            self._store.clear_resume_pending(turn.session_key)
            if suspend:
                self._store.suspend_session(turn.session_key)
            conn.reset_restart_count(turn.session_key)
            conn.delete_inbox_row(claim.item.id)
            return _finished(conn, turn, TurnState.FAILED)

    def commit_interrupted(
        self,
        claim: Claim,
        *,
        reason: str,
        messages: Sequence[dict[str, Any]],
        notice: str | None = None,
        first_index: int = 0,
    ) -> Callable[[], bool]:
        """Interrupted in one transaction: the user's message stays in the transcript, journal
        -> interrupted, inbox row deleted, `resume_pending` cleared, and the lane's stuck-loop
        counter reset: the turn ended without a crash, so the next one to be cut off starts a
        new count (a resumed turn that a newer message cut off had left it raised). Returns
        whether the lane has a row waiting, as `commit_failure` does."""
        turn = claim.turn
        with self._db_for_key(turn.session_key).transaction() as conn:
            conn.transition_turn(
                turn.id, TurnState.INTERRUPTED, at=self._now(), reply=notice, error=reason
            )
            self._append_best_effort(turn, messages, first_index)
            self._store.clear_resume_pending(turn.session_key)
            conn.reset_restart_count(turn.session_key)
            conn.delete_inbox_row(claim.item.id)
            return _finished(conn, turn, TurnState.INTERRUPTED)

    def _append_best_effort(
        self, turn: Turn, messages: Sequence[dict[str, Any]], first_index: int
    ) -> None:
        if not messages:
            return
        try:
            with self._db_for_key(turn.session_key).savepoint():
                self._store.append_messages(
                    turn.session_id,
                    list(messages),
                    idempotency_key=_idem(turn.id),
                    first_index=first_index,
                )
        except SessionNotFoundError:
            # The session was deleted while the turn ran; the journal still records the turn.
            log.warning(
                "session gone; turn outcome kept in the journal only",
                extra={"session_key": turn.session_key, "turn_id": turn.id},
            )

    # ------------------------------------------------------------------ progress

    def append_turn_messages(
        self, turn: Turn, messages: Sequence[dict[str, Any]], *, first_index: int
    ) -> list[int | None]:
        """Append messages a running turn completed, numbered from `first_index` within the
        turn (the user message is number 0), in one short transaction (DESIGN decision 11).
        Keyed by (turn, number): a retried append, or the outcome commit appending the same
        number again, is a no-op (None in the returned ids). Nothing else of the turn moves;
        its outcome still commits in one transaction."""
        return self._store.append_messages(
            turn.session_id,
            list(messages),
            idempotency_key=_idem(turn.id),
            first_index=first_index,
        )

    def turn_messages(self, turn: Turn) -> list[tuple[int, int, dict[str, Any]]]:
        """`(number, entry id, message)` of what the turn stored so far, in order (a resumed
        turn reads its progress instead of guessing)."""
        return self._store.keyed_messages(turn.session_id, _idem(turn.id))

    def requeue(self, turn_id: int, *, resume_reason: str | None) -> None:
        """Running -> accepted (drain timeout, crash recovery): the turn keeps its inbox row and
        will be resumed; `resume_reason` marks the session resume-pending in the same commit."""
        with self._db_for_row(turn_id).transaction() as conn:
            conn.transition_turn(turn_id, TurnState.ACCEPTED, at=self._now())
            row = conn.get_turn(turn_id)
            if resume_reason is not None and row is not None:
                self._store.mark_resume_pending(row.session_key, resume_reason)
            if row is not None:
                # Not finished: back to `accepted`, it resumes at the next start.
                _finished(conn, _turn(row), TurnState.ACCEPTED)

    def mark_delivered(self, turn_id: int) -> None:
        with self._db_for_row(turn_id).transaction() as conn:
            conn.transition_turn(turn_id, TurnState.DELIVERED, at=self._now())

    # ------------------------------------------------------------------ reading

    def get_turn(self, turn_id: int) -> Turn | None:
        with self._db_for_row(turn_id).read() as conn:
            row = conn.get_turn(turn_id)
        return None if row is None else _turn(row)

    def turns_in_state(self, state: TurnState) -> list[Turn]:
        turns: list[Turn] = []
        for db in self._databases():
            with db.read() as conn:
                turns.extend(_turn(row) for row in conn.turns_in_state(state))
        return turns

    def has_pending(self, session_key: str) -> bool:
        with self._db_for_key(session_key).read() as conn:
            return conn.has_pending(session_key)

    def peek_next(self, session_key: str) -> InboxItem | None:
        """The row `claim_next` would claim, without claiming it."""
        with self._db_for_key(session_key).read() as conn:
            # Routing the row reads the lane's route next: sent now, it comes with the row.
            conn.prefetch_route(session_key)
            row = conn.next_pending(session_key)
        return None if row is None else _item(row)

    def get_item(self, inbox_id: int) -> InboxItem | None:
        with self._db_for_row(inbox_id).read() as conn:
            row = conn.get_inbox_row(inbox_id)
        return None if row is None else _item(row)

    def queue_depth(self, session_key: str) -> int:
        """Pending rows of the lane: the slot counts one, each `/queue` item one (spec §8)."""
        with self._db_for_key(session_key).read() as conn:
            return conn.count_pending(session_key)

    def total_queued(self) -> int:
        total = 0
        for db in self._databases():
            with db.read() as conn:
                total += conn.count_pending_all()
        return total

    def lanes_with_pending(self) -> list[str]:
        lanes: list[str] = []
        for db in self._databases():
            with db.read() as conn:
                lanes.extend(conn.lanes_with_pending())
        return lanes

    # ------------------------------------------------------------------ recovery records

    def restart_count(self, session_key: str) -> int:
        with self._db_for_key(session_key).read() as conn:
            return conn.get_restart_count(session_key)

    def restart_counts(self) -> dict[str, int]:
        with self._db.read() as conn:
            return conn.restart_counts()

    def merge_restart_counts(self, counts: dict[str, int]) -> None:
        with self._db.transaction() as conn:
            conn.merge_restart_counts(counts, at=self._now())

    def reset_restart_count(self, session_key: str) -> bool:
        with self._db_for_key(session_key).transaction() as conn:
            return conn.reset_restart_count(session_key)

    def mark_clean_shutdown(self, at: datetime) -> None:
        with self._db.transaction() as conn:
            conn.set_meta(_CLEAN_SHUTDOWN, at.isoformat())

    def consume_clean_shutdown(self) -> str | None:
        """The recorded clean-shutdown time, removed in the same transaction (None if absent)."""
        with self._db.transaction() as conn:
            return conn.pop_meta(_CLEAN_SHUTDOWN)

    def prune(self, before: datetime) -> tuple[int, int]:
        """Housekeeping: forget dedup records and finished turns older than `before` (and
        the sent deliveries and webhook events of that age)."""
        cutoff = to_us(before)
        seen = turns = 0
        for db in self._databases():
            with db.transaction() as conn:
                seen += conn.prune_seen(cutoff)
                turns += conn.prune_turns(cutoff)
                conn.prune_sent(cutoff)
        return seen, turns


def _may_be_resume_pending(claim: Claim) -> bool:
    # Only restart recovery and the requeue of a cut-off turn set the flag: neither can happen
    # between a live turn's claim and its outcome, so an entry seen without the flag at the
    # claim still lacks it, and the clear (a read and a savepoint) can be skipped.
    return claim.entry is None or claim.entry.resume_pending


def _idem(turn_id: int) -> str:
    # The transcript's idempotency key for every row of one turn (plus its index): a crash
    # after the commit and a retried commit can never append a turn twice.
    return f"turn:{turn_id}"


def _select_seen(conn: Tx, inbound: Inbound, session_key: str) -> SeenRow | None:
    """The dedup record of `inbound` in its scope (platform, chat, id, lane, sender).

    A record whose fingerprint differs is the sender reusing an id for another message: that
    is refused (`MessageIdConflictError`) rather than answered with the first message's
    receipt, which would drop the new message and show its sender an answer to another one.
    """
    assert inbound.message_id is not None
    source = inbound.source
    seen = conn.select_seen(
        str(source.platform),
        source.chat_id,
        inbound.message_id,
        session_key=session_key,
        sender_id=_sender_id(source),
    )
    if seen is not None and seen.content_hash not in (None, _fingerprint(inbound)):
        raise MessageIdConflictError(
            f"message_id {inbound.message_id!r} was already used for a different message in "
            "this conversation; send the new message with a new message_id",
            message_id=inbound.message_id,
        )
    return seen


def _sender_id(source: SessionSource) -> str:
    return source.participant_id or ""


def _fingerprint(inbound: Inbound) -> str:
    """What makes two messages with one id the same message: their text and media."""
    payload = json.dumps([inbound.text, list(inbound.media)], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _seen(conn: Tx, seen: SeenRow) -> SeenRecord:
    turn = conn.get_turn(seen.turn_id) if seen.turn_id is not None else None
    pending = False
    if turn is None and seen.inbox_id is not None:
        pending = conn.get_inbox_row(seen.inbox_id) is not None
    elif turn is not None:
        pending = turn.state in (TurnState.ACCEPTED, TurnState.RUNNING)
    return SeenRecord(
        session_key=seen.session_key,
        session_id=turn.session_id if turn is not None else seen.session_id,
        status=seen.status,
        inbox_id=seen.inbox_id,
        turn_id=seen.turn_id,
        reply=seen.reply if turn is None else turn.reply,
        turn_state=None if turn is None else turn.state,
        pending=pending,
    )


def _item(row: InboxRow) -> InboxItem:
    return InboxItem(
        id=row.id,
        session_key=row.session_key,
        kind=row.kind,
        text=row.text,
        parts=tuple(row.parts),
        media=tuple(row.media),
        message_id=row.message_id,
        message_ids=tuple(row.message_ids),
        source=SessionSource.from_dict(row.source),
        message_type=row.message_type,
        reply_to=row.reply_to,
        event_kind=row.event_kind,
        internal=row.internal,
        accepted_at=from_us(row.accepted_at),
    )


def _turn(row: TurnRow) -> Turn:
    return Turn(
        id=row.id,
        session_key=row.session_key,
        session_id=row.session_id,
        inbox_id=row.inbox_id,
        state=row.state,
        attempt=row.attempt,
        resumes=row.resumes,
        source=SessionSource.from_dict(row.source),
        reply=row.reply,
        error=row.error,
        accepted_at=from_us(row.accepted_at),
        started_at=None if row.started_at is None else from_us(row.started_at),
        finished_at=None if row.finished_at is None else from_us(row.finished_at),
        delivered_at=None if row.delivered_at is None else from_us(row.delivered_at),
    )


def _seen_row(
    inbound: Inbound,
    session_key: str,
    session_id: str | None,
    inbox_id: int | None,
    turn_id: int | None,
    status: str,
    reply: str | None,
    now: int,
) -> SeenRow:
    """The dedup record of an inbound message (it must carry a platform message id)."""
    assert inbound.message_id is not None
    source = inbound.source
    return SeenRow(
        str(source.platform),
        source.chat_id,
        inbound.message_id,
        session_key,
        _sender_id(source),
        _fingerprint(inbound),
        session_id,
        inbox_id,
        turn_id,
        status,
        reply,
        now,
    )


def _queue_changed(conn: Tx, session_key: str, depth: int | None = None) -> None:
    """Note the lane's new number of waiting rows (counted when not known: the count comes
    with the commit)."""
    if depth is not None:
        conn.note(Change(ChangeKind.QUEUE_CHANGED, session_key, depth=depth))
        return
    counted = conn.count_pending_later(session_key)
    conn.note(lambda: Change(ChangeKind.QUEUE_CHANGED, session_key, depth=counted()))


def _started(conn: Tx, session_key: str, session_id: str, turn_id: int) -> None:
    conn.note(Change(ChangeKind.TURN_STARTED, session_key, session_id, turn_id=turn_id))


def _finished(conn: Tx, turn: Turn, status: TurnState) -> Callable[[], bool]:
    """Note the turn finished; whether its lane has a row waiting, read after the commit (the
    lane's worker looks for more work right after: asked now, it comes with the commit)."""
    pending = conn.pending_later(turn.session_key)
    conn.note(
        Change(
            ChangeKind.TURN_FINISHED,
            turn.session_key,
            turn.session_id,
            turn_id=turn.id,
            status=str(status),
        )
    )
    return pending
