"""`Placement`: which database holds a lane, a session or a row — the durable one, or the
memory-only one of incognito lanes. Every choice between the two is made here.

An incognito lane is placed per key: its route, transcript, inbox rows, turns, takeovers and
approvals live in a second, in-memory database that no durable code path writes, and a
restart removes it (the key then refused by its tombstone, never re-created on disk).

Inbox ids and turn ids cross the API bare (`GET /v1/turns/{id}`, a reply's `turn_id`), and a
caller's id may name a row the placement never handed out (a restart's, a guess). So the two
databases number their rows apart rather than each from 1, which would let a bare id name a
row in both: the memory database is opened with its inbox rows and turns numbered from
`_MEMORY_FIRST_ROW` (2**50, exact as a JSON number; a durable database would need 35 years at
a million turns a second to reach it), and `for_row` answers from the id alone. That rule is
private to this module: everything else asks `for_row` or `is_durable_row`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.store.backends import open_memory_backend

if TYPE_CHECKING:
    from sessiongate.store.protocol import Backend, EphemeralBackend, LaneBackend, Tx

__all__ = ["Placement"]

_MEMORY_FIRST_ROW = 2**50


class Placement:
    """The durable database, the memory-only one once the first incognito lane exists, and
    which session keys and ids live in memory."""

    def __init__(self, durable: Backend) -> None:
        self._durable = durable
        self._memory: EphemeralBackend | None = None
        self._keys: set[str] = set()
        self._ids: set[str] = set()

    @property
    def durable(self) -> Backend:
        return self._durable

    @property
    def memory(self) -> EphemeralBackend | None:
        """The in-memory database of incognito lanes, once the first one exists."""
        return self._memory

    def open_memory(self) -> EphemeralBackend:
        """The in-memory database, opened on first use."""
        if self._memory is None:
            self._memory = open_memory_backend(first_row_id=_MEMORY_FIRST_ROW)
        return self._memory

    def databases(self) -> list[LaneBackend]:
        """Every database that may hold a row: the durable one first."""
        return [self._durable] if self._memory is None else [self._durable, self._memory]

    # ------------------------------------------------------------------ choosing

    def for_key(self, session_key: str) -> LaneBackend:
        if self._memory is not None and session_key in self._keys:
            return self._memory
        return self._durable

    def for_session(self, session_id: str) -> LaneBackend:
        if self._memory is not None and session_id in self._ids:
            return self._memory
        return self._durable

    def for_row(self, row_id: int) -> LaneBackend:
        """The database of an inbox row or a turn, by its id."""
        if self._memory is not None and not self.is_durable_row(row_id):
            return self._memory
        return self._durable

    def is_durable_row(self, row_id: int) -> bool:
        """Whether an inbox id or turn id names a row of the durable database (an id of the
        memory database is refused by it, and is gone after a restart)."""
        return row_id < _MEMORY_FIRST_ROW

    def is_incognito(self, session_key: str) -> bool:
        return session_key in self._keys

    # ------------------------------------------------------------------ recording

    def placed(self, db: LaneBackend, session_key: str, session_id: str) -> None:
        """Record a lane (or its new session) created in `db`: in memory, it stays there."""
        if self._memory is not None and db is self._memory:
            self._keys.add(session_key)
            self._ids.add(session_id)

    def placed_by(self, conn: Tx, session_key: str, session_id: str) -> None:
        """`placed`, for a session created in the transaction `conn`."""
        if self._memory is not None and self._memory.holds(conn):
            self._keys.add(session_key)
            self._ids.add(session_id)

    def close(self) -> None:
        if self._memory is not None:
            self._memory.close()
        self._durable.close()
