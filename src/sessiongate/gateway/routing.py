"""Routing: which session an inbound message goes to, and when a session rolls over.

A message is routed in the transaction that accepts it (`Router.route`, called inside
`LaneStore.atomic()`):

- an archived entry is only read: the message is refused and nothing is written;
- a busy lane's entry (a worker or a holder has it) is only read: a reset policy never rolls a
  session over under its running turn;
- otherwise `get_or_create_session` routes it there and then, evaluating the reset policy, and
  a rollover makes the message the first turn of the new session;
- a message addressed to a lane by key (a fork, an incognito session) goes to that lane,
  whose reset policy is evaluated for the lane's own origin; an unknown or ended key is
  refused.

A row accepted while its lane was busy is routed again when the worker claims it, between turns
(`Router.claim_next`): a rollover held back by a running turn happens there, after the old
session's outcome has committed, and the waiting message still opens the new session (never
swallowed). A rollover discards the system events still queued for the old session (they were
meant for it); `/new` and `/reset` discard every waiting row themselves. A row whose session
was archived while it waited is refused there too, and deleted: archiving stops the work that
had not started.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.errors import SessionNotFoundError

if TYPE_CHECKING:
    from collections.abc import Callable

    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.lanes import Lane, LaneTable
    from sessiongate.store.lanes import Claim, InboxItem, LaneStore
    from sessiongate.store.session_store import SessionStore

__all__ = ["NextTurn", "Routed", "Router"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Routed:
    """Where an inbound message goes."""

    entry: SessionEntry
    busy: bool  # the lane has a worker or a holder: the entry was only read
    archived: bool  # the session refuses new work: the entry was only read
    dropped: tuple[int, ...] = ()  # system events discarded by a rollover (inbox ids)


@dataclass(frozen=True, slots=True)
class NextTurn:
    """What a worker finds between turns: a claimed turn, or a refused row, or neither (the
    lane is empty); and the system events a rollover discarded meanwhile."""

    claim: Claim | None
    entry: SessionEntry | None = None
    dropped: tuple[int, ...] = ()
    refused: InboxItem | None = None  # deleted: its session is archived


class Router:
    def __init__(self, *, store: SessionStore, lane_store: LaneStore, lanes: LaneTable) -> None:
        self._store = store
        self._lane_store = lane_store
        self._lanes = lanes
        self.rollovers = 0

    def route(
        self,
        source: SessionSource,
        *,
        event_kind: str | None = None,
        session_key: str | None = None,
        visible_session_id: str | None = None,
        reserved: Lane | None = None,
    ) -> Routed:
        """Route a message as it arrives, inside the caller's transaction (to `session_key`'s
        lane when it names one; `SessionNotFoundError` if that lane does not exist). A lane
        the caller `reserved` for this message is not busy for it."""
        if session_key is not None:
            return self._route_addressed(session_key, event_kind, visible_session_id, reserved)
        key, current = self._lane_store.resolve(source)
        busy = not self._lanes.is_free(key, reserved=reserved)
        if current is not None and (current.archived or busy):
            return Routed(current, busy=busy, archived=current.archived)
        entry = self._store.get_or_create_session(
            source, event_kind=event_kind, visible_session_id=visible_session_id
        )
        dropped: tuple[int, ...] = ()
        if current is not None and entry.session_id != current.session_id:
            dropped = self._rolled_over(current, entry)
        return Routed(entry, busy=busy, archived=False, dropped=dropped)

    def _route_addressed(
        self,
        key: str,
        event_kind: str | None,
        visible_session_id: str | None,
        reserved: Lane | None,
    ) -> Routed:
        current = self._store.get_session(key)
        if current is None:
            raise SessionNotFoundError(self._store.missing_message(key), session_key=key)
        busy = not self._lanes.is_free(key, reserved=reserved)
        if current.archived or busy:
            return Routed(current, busy=busy, archived=current.archived)
        entry = self._store.refresh_lane(
            key, event_kind=event_kind, visible_session_id=visible_session_id
        )
        dropped: tuple[int, ...] = ()
        if entry.session_id != current.session_id:
            dropped = self._rolled_over(current, entry)
        return Routed(entry, busy=False, archived=False, dropped=dropped)

    def claim_next(
        self,
        key: str,
        *,
        user_message: Callable[[InboxItem, int], dict[str, Any]] | None = None,
        pending: bool = False,
    ) -> NextTurn:
        """Route and claim the lane's next row between turns, in one transaction (with the
        turn's user message, built by `user_message`, see `LaneStore.claim_item`). With
        `pending`, the caller has just seen a row waiting, and the lane is not looked at
        again before its row is read."""
        # Reads first: an empty lane (the end of every burst) costs one index probe.
        if not pending and not self._lane_store.has_pending(key):
            return NextTurn(None)
        item = self._lane_store.peek_next(key)
        if item is None:
            return NextTurn(None)
        with self._lane_store.atomic(savepoints=False):
            before = self._store.get_session(key)
            if before is not None and before.archived:
                self._lane_store.drop_pending(item.id)
                return NextTurn(None, before, refused=item)
            dropped: tuple[int, ...] = ()
            if before is not None and self._lane_store.resolve(item.source)[0] != key:
                # The row was addressed to this lane by key, or its sender routes elsewhere now
                # (an identity alias learned while it waited): it runs on the lane that
                # accepted it, and the source's own route is left alone.
                entry = self._store.refresh_lane(key, event_kind=item.event_kind)
            else:
                entry = self._store.get_or_create_session(item.source, event_kind=item.event_kind)
            if before is not None and before.session_id != entry.session_id:
                dropped = self._rolled_over(before, entry, keep=item.id)
            claim = self._lane_store.claim_item(item, entry, user_message=user_message)
        return NextTurn(claim, entry, dropped)

    def _rolled_over(
        self, before: SessionEntry, entry: SessionEntry, *, keep: int | None = None
    ) -> tuple[int, ...]:
        """Discard the system events queued for the old session (inside the caller's
        transaction, except row `keep`, the message being claimed); returns their ids."""
        dropped = self._lane_store.discard_pending_events(entry.session_key, keep=keep)
        self.rollovers += 1
        log.info(
            "session rolled over",
            extra={
                "session_key": entry.session_key,
                "old_session_id": before.session_id,
                "session_id": entry.session_id,
                "reason": entry.auto_reset_reason,
                "discarded_events": len(dropped),
            },
        )
        return tuple(dropped)
