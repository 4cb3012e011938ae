"""Incognito lanes: held in a second, in-memory database that no durable code path can write,
gone after a restart (the key then refused with a reason, never re-created on disk), plus the
routing of a key or session id to the database that holds it and the tombstones that say why
a key is gone.

`IncognitoOps` is mixed into `SessionStore`; it uses the store's databases, clock and config.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from sessiongate.core.bindings import agent_for
from sessiongate.core.keys import build_key_parts, fork_key, format_session_key
from sessiongate.store.backends import open_memory_backend
from sessiongate.store.records import to_us

if TYPE_CHECKING:
    from datetime import datetime

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.source import SessionSource
    from sessiongate.store.protocol import Backend, Tx

__all__ = ["IncognitoOps"]


class IncognitoOps:
    _db: Backend
    # Initialised by SessionStore: the in-memory database once the first incognito lane
    # exists, and which keys and session ids live there.
    _memory: Backend | None
    _incognito_keys: set[str]
    _incognito_ids: set[str]
    clock: Clock
    config: GatewayConfig

    if TYPE_CHECKING:  # provided by SessionStore

        def _create_lane(
            self, conn: Tx, key: str, source: SessionSource, now: datetime
        ) -> SessionEntry: ...

    def _db_for_key(self, session_key: str) -> Backend:
        if self._memory is not None and session_key in self._incognito_keys:
            return self._memory
        return self._db

    def _db_for_id(self, session_id: str) -> Backend:
        if self._memory is not None and session_id in self._incognito_ids:
            return self._memory
        return self._db

    def _register_created(self, db: Backend, session_key: str, session_id: str) -> None:
        if db is self._memory:
            self._incognito_keys.add(session_key)
            self._incognito_ids.add(session_id)

    def is_incognito(self, session_key: str) -> bool:
        return session_key in self._incognito_keys

    def create_incognito_session(self, source: SessionSource) -> SessionEntry:
        """A new lane held only in memory: hidden from search and from ordinary listings,
        gone after a restart (its key then refused, never re-created on disk)."""
        if self._memory is None:
            self._memory = open_memory_backend()
        base = build_key_parts(
            source,
            group_sessions_per_user=self.config.group_sessions_per_user,
            thread_sessions_per_user=self.config.thread_sessions_per_user,
            agent_id=agent_for(source, self.config.bindings),
        )
        key = fork_key(format_session_key(base), secrets.token_hex(4))
        now = self.clock.now()
        with self._memory.transaction() as conn:
            entry = self._create_lane(conn, key, source, now).evolve(incognito=True)
            conn.upsert_route(entry, base)
        self._register_created(self._memory, key, entry.session_id)
        with self._db.transaction() as conn:
            conn.add_tombstone(key, reason="incognito", at=to_us(now))
        return entry

    def tombstone(self, session_key: str) -> str | None:
        """Why a key is gone (`deleted`, `incognito`), or None if it never was."""
        # A live incognito key has an `incognito` tombstone on disk from its creation; its
        # own answer (alive, or deleted since) is in the in-memory database.
        db = self._db_for_key(session_key)
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
        if self._memory is None:
            return []
        with self._memory.read() as conn:
            return list(conn.iter_routes())

    @property
    def memory_database(self) -> Backend | None:
        """The in-memory database of incognito lanes, once the first one exists."""
        return self._memory

    def database_for(self, session_key: str) -> Backend:
        """The database that holds `session_key`'s lane: the gateway keeps an incognito lane's
        inbox and journal beside its transcript, in memory."""
        return self._db_for_key(session_key)
