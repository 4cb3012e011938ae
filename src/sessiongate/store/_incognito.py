"""Incognito lanes: held in a second, in-memory database that no durable code path can write,
gone after a restart (the key then refused with a reason, never re-created on disk), and the
tombstones that say why a key is gone. Which database holds a key, a session id or a row is the
store's `Placement` (`store/placement.py`).

`IncognitoOps` is mixed into `SessionStore`; it uses the store's placement, clock and config.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from sessiongate.core.bindings import agent_for
from sessiongate.core.keys import build_key_parts, fork_key, format_session_key
from sessiongate.store.records import to_us

if TYPE_CHECKING:
    from datetime import datetime

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.source import SessionSource
    from sessiongate.store.placement import Placement
    from sessiongate.store.protocol import Backend, EphemeralBackend, LaneBackend, Tx

__all__ = ["IncognitoOps"]


class IncognitoOps:
    _db: Backend
    # Initialised by SessionStore: which database holds each lane (`store/placement.py`).
    _placement: Placement
    clock: Clock
    config: GatewayConfig

    if TYPE_CHECKING:  # provided by SessionStore

        def _create_lane(
            self, conn: Tx, key: str, source: SessionSource, now: datetime
        ) -> SessionEntry: ...

    def is_incognito(self, session_key: str) -> bool:
        return self._placement.is_incognito(session_key)

    def create_incognito_session(self, source: SessionSource) -> SessionEntry:
        """A new lane held only in memory: hidden from search and from ordinary listings,
        gone after a restart (its key then refused, never re-created on disk)."""
        memory = self._placement.open_memory()
        base = build_key_parts(
            source,
            group_sessions_per_user=self.config.group_sessions_per_user,
            thread_sessions_per_user=self.config.thread_sessions_per_user,
            agent_id=agent_for(source, self.config.bindings),
        )
        key = fork_key(format_session_key(base), secrets.token_hex(4))
        now = self.clock.now()
        with memory.transaction() as conn:
            entry = self._create_lane(conn, key, source, now).evolve(incognito=True)
            conn.upsert_route(entry, base)
        self._placement.placed(memory, key, entry.session_id)
        with self._db.transaction() as conn:
            conn.add_tombstone(key, reason="incognito", at=to_us(now))
        return entry

    def tombstone(self, session_key: str) -> str | None:
        """Why a key is gone (`deleted`, `incognito`), or None if it never was."""
        # A live incognito key has an `incognito` tombstone on disk from its creation; its
        # own answer (alive, or deleted since) is in the in-memory database.
        db = self._placement.for_key(session_key)
        with db.read() as conn:
            return conn.tombstone_reason(session_key)

    def missing_message(self, session_key: str) -> str:
        """Why `session_key` names no session, for the error that says so."""
        reason = self.tombstone(session_key)
        if reason == "incognito":
            return f"the incognito session {session_key!r} ended when the gateway restarted"
        if reason == "deleted":
            return f"the session {session_key!r} was deleted"
        return f"no session with key {session_key!r}"

    def list_incognito(self) -> list[SessionEntry]:
        """Incognito lanes (operators only)."""
        memory = self._placement.memory
        if memory is None:
            return []
        with memory.read() as conn:
            return list(conn.iter_routes())

    @property
    def memory_database(self) -> EphemeralBackend | None:
        """The in-memory database of incognito lanes, once the first one exists."""
        return self._placement.memory

    @property
    def placement(self) -> Placement:
        """Which database holds each lane, session and row."""
        return self._placement

    def database_for(self, session_key: str) -> LaneBackend:
        """The database that holds `session_key`'s lane: the gateway keeps an incognito lane's
        inbox and journal beside its transcript, in memory."""
        return self._placement.for_key(session_key)
