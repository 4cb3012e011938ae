"""`PostgresTx`: the storage protocol's statements on one psycopg connection.

Each family of the protocol is a mixin of its own module, the twin of the SQLite module of
the same table (their docstrings state the invariants; the shared store suite runs against
both): `routes.py` (routes, tombstones, aliases), `sessions.py`, `entries.py`, `search.py`,
`inbox.py`, `journal.py`, `platform_state.py`, `erasure.py`, `jobs.py`, `approvals.py`,
`deliveries.py`, `outbox.py` and `lease_statements.py`. Differences are of dialect only:
times are converted by `sg_ts`/`sg_us`, JSON is `jsonb` read back as text, ids come from
`RETURNING`, and search is the generated `tsvector` column, which cannot go stale.

This module holds the transaction's own state (`_tx_base.TxBase` declares it for the
mixins): its locks, the routes it saw written, and the reads it sent ahead. A new table's
statements go in a mixin of their own, added to the bases here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.postgres.approvals import PostgresApprovals
from sessiongate.store.postgres.deliveries import PostgresDeliveries
from sessiongate.store.postgres.entries import PostgresEntries
from sessiongate.store.postgres.erasure import PostgresErasure
from sessiongate.store.postgres.hook_receipts import PostgresHookReceipts
from sessiongate.store.postgres.jobs import PostgresJobs
from sessiongate.store.postgres.journal import PostgresJournal
from sessiongate.store.postgres.lease_statements import PostgresLeases
from sessiongate.store.postgres.outbox import PostgresOutbox
from sessiongate.store.postgres.platform_state import PostgresPlatformState
from sessiongate.store.postgres.routes import PostgresRoutes
from sessiongate.store.postgres.search import PostgresSearch
from sessiongate.store.postgres.takeover import PostgresTakeovers

if TYPE_CHECKING:
    import psycopg

    from sessiongate.core.entry import SessionEntry
    from sessiongate.store.postgres._pipeline import Wire

__all__ = ["PostgresTx"]


class PostgresTx(
    PostgresRoutes,
    PostgresEntries,
    PostgresSearch,
    PostgresJournal,
    PostgresLeases,
    PostgresDeliveries,
    PostgresOutbox,
    PostgresHookReceipts,
    PostgresPlatformState,
    PostgresErasure,
    PostgresJobs,
    PostgresApprovals,
    PostgresTakeovers,
):
    """The protocol's `Tx` (and `LeaseTx`) over one psycopg connection (the caller holds its
    lock): the families' mixins over this transaction's state."""

    __slots__ = ()  # `TxBase` holds them

    def __init__(self, conn: psycopg.Connection[Any], wire: Wire | None = None) -> None:
        self.conn = conn
        # The writer's pipeline (`_pipeline.py`), and its cursor for writes nothing reads the
        # answer of; None on a reader's connection.
        self._wire = wire
        self._sure = None if wire is None else wire.sure
        # Transactions open on the connection, nested ones counted (0: none, a plain read
        # included).
        self.depth = 0
        # Routes this transaction holds locked, as read (`_route`); emptied by the database
        # when the transaction ends or a savepoint rolls back.
        self.locked_routes: dict[str, tuple[Any, ...]] = {}
        # Keys of routes that did not exist, whose advisory lock this transaction holds.
        self.locked_keys: set[str] = set()
        # Those of them still missing when read under that lock: no other transaction can
        # make them before this one ends, so a read again (the route's creation reads it
        # once more) is answered here, until this transaction writes the route.
        self.missing_routes: set[str] = set()
        # Lanes whose writer lock (`lock_lane`) this transaction holds.
        self.locked_lanes: set[str] = set()
        # Route reads sent ahead (`prefetch_route`), answered with a later statement's.
        self._prefetched: dict[str, psycopg.Cursor[Any]] = {}
        # Lanes' first sessions sent with their route's read (`prefetch_lane_creation`): the
        # id, and the insert's answer (no row: the route was there, or the id was taken).
        self._fresh_ahead: dict[str, tuple[str, psycopg.Cursor[Any]]] = {}
        # Routes as the caller saw them written (`expect_route`), not yet checked at the
        # server; and whether a savepoint rolled back since one was (which fails the commit).
        self._seen: dict[str, SessionEntry] = {}
        self._seen_lost: bool | None = None
        # A context read sent with a transaction's commit (`prefetch_context`), for the read
        # right after it; dropped when the next transaction begins.
        self._context_ahead: tuple[Any, psycopg.Cursor[Any]] | None = None
        # The same for the lane worker's look for more work after an outcome (`has_pending`).
        # What the open transaction changed, for `PostgresDatabase.transaction` to tell after
        # commit.
        self.notes: list[object] = []

    def note(self, change: object) -> None:
        self.notes.append(change)

    def forget_locks(self) -> None:
        """The transaction ended, or a savepoint rolled back (and its locks went with it)."""
        if not self.in_transaction:
            self._seen.clear()
            self._seen_lost = None
        elif self._seen_lost is not None:
            # What the savepoint wrote over a seen route is undone, and what was decided from
            # that route can no longer be checked: the commit is refused (`check_seen`).
            self._seen_lost = True
        self.locked_routes.clear()
        self.locked_keys.clear()
        self.missing_routes.clear()
        self.locked_lanes.clear()
        self._prefetched.clear()
        self._fresh_ahead.clear()

    # A raw statement, for diagnostics and the store suite's checks of stored rows; the store
    # above never calls it (it is not part of the protocol).
    def execute(self, sql: str, params: Any = None) -> psycopg.Cursor[Any]:
        return self.conn.execute(sql, params)

    def drop_reads_ahead(self) -> None:
        """A transaction begins (or the one that sent them rolled back): what it may write
        would not be in the reads sent ahead."""
        self._context_ahead = None
