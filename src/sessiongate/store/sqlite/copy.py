"""Reading SQLite's tables for `db copy`: key order, keyset batches, seam values as stored."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

    from sessiongate.store.copy import TableSpec

__all__ = ["count_rows", "read_rows"]


def count_rows(conn: sqlite3.Connection, table: TableSpec) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table.name}").fetchone()[0])  # noqa: S608


def read_rows(
    conn: sqlite3.Connection, table: TableSpec, after: Sequence[Any] | None, limit: int
) -> list[tuple[Any, ...]]:
    # Names come from the fixed table list in `store/copy.py`, never from input.
    columns = ", ".join(c for c, _ in table.columns)
    key = ", ".join(table.key)
    where = "" if after is None else f"WHERE ({key}) > ({', '.join('?' * len(table.key))})"
    sql = f"SELECT {columns} FROM {table.name} {where} ORDER BY {key} LIMIT ?"  # noqa: S608
    return conn.execute(sql, (*(after or ()), limit)).fetchall()
