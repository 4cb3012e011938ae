"""`TxBase`: what every family of `PostgresTx` shares: the connection, the writer's pipeline,
the transaction's locks and reads sent ahead (set up by `PostgresTx.__init__`, which states
what each holds), and the helpers that run one statement."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

    from sessiongate.core.entry import SessionEntry
    from sessiongate.store.postgres._pipeline import Wire

__all__ = ["TxBase"]


class TxBase:
    """The state and statement helpers the family mixins (`routes.py`, `sessions.py`,
    `entries.py`, `search.py`, `inbox.py`, `journal.py`, `lease_statements.py`) build on."""

    __slots__ = (
        "_context_ahead",
        "_fresh_ahead",
        "_prefetched",
        "_seen",
        "_seen_lost",
        "_sure",
        "_wire",
        "conn",
        "depth",
        "locked_keys",
        "locked_lanes",
        "locked_routes",
        "missing_routes",
        "notes",
    )

    conn: psycopg.Connection[Any]
    _wire: Wire | None
    _sure: psycopg.Cursor[Any] | None
    depth: int
    locked_routes: dict[str, tuple[Any, ...]]
    locked_keys: set[str]
    missing_routes: set[str]
    locked_lanes: set[str]
    _prefetched: dict[str, psycopg.Cursor[Any]]
    _fresh_ahead: dict[str, tuple[str, psycopg.Cursor[Any]]]
    _seen: dict[str, SessionEntry]
    _seen_lost: bool | None
    _context_ahead: tuple[Any, psycopg.Cursor[Any]] | None

    @property
    def in_transaction(self) -> bool:
        """Inside `PostgresDatabase.transaction()` (not a plain read): route reads lock."""
        return self.depth > 0

    def _one(self, sql: str, params: Any = None) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, params).fetchone()
        return row

    def _all(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def _count(self, sql: str, params: Any = None) -> int:
        return self.conn.execute(sql, params).rowcount

    def _send_sure(self, sql: str, params: Any = None) -> None:
        """A write that cannot fail on its input (the caller checked it): in a transaction it
        is answered with the next statement that is read, or the commit."""
        if self._sure is None:
            self.conn.execute(sql, params)
        else:
            self._sure.execute(sql, params)

    def _sent_ahead(self, sql: str, params: Any) -> psycopg.Cursor[Any] | None:
        """`sql` on a cursor whose answer is read after the commit (`Wire.later`), in the
        writer's transaction; None elsewhere, where the caller runs it now."""
        if self._wire is None or not self.in_transaction:
            return None
        cursor = self._wire.later()
        cursor.execute(sql, params)
        return cursor
