"""PostgreSQL's side of `db copy`: writing a batch with its resume position in one
transaction, reading back in seam values for the verification, and moving the sequences."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.copy import Kind
from sessiongate.store.records import dumps, loads

if TYPE_CHECKING:
    from collections.abc import Sequence

    import psycopg

    from sessiongate.store.copy import TableSpec

__all__ = [
    "ORIGIN_KEY",
    "begin_copy",
    "copy_position",
    "count_rows",
    "end_copy",
    "finish_copy",
    "inspect_target",
    "read_rows",
    "write_rows",
]

# The copy's own marker in the target's meta: which source it copies. Written in the target's
# first transaction after its migrations, before any row; removed once the copy verified. A
# target holding data is written into again only by a resumed copy of that same source.
ORIGIN_KEY = "copy:origin"

# What an instance serving the database writes beside the copied tables: a database with only
# these filled is in use all the same.
_LIVE_TABLES = ("instances", "lane_lease", "leader_lease")

# Names in these statements come from the fixed table list in `store/copy.py`, never input.
_READ = {Kind.TIME: "sg_us({})", Kind.JSON: "{}::text"}
_WRITE = {Kind.TIME: "sg_ts(%s::bigint)", Kind.JSON: "%s::jsonb", Kind.BOOL: "%s::boolean"}


def count_rows(conn: psycopg.Connection[Any], table: TableSpec) -> int:
    row = conn.execute(f"SELECT count(*) FROM {table.name}").fetchone()  # noqa: S608
    return int(row[0]) if row else 0


def read_rows(
    conn: psycopg.Connection[Any], table: TableSpec, after: Sequence[Any] | None, limit: int
) -> list[tuple[Any, ...]]:
    columns = ", ".join(_READ.get(kind, "{}").format(name) for name, kind in table.columns)
    key = ", ".join(table.key)
    where = "" if after is None else f"WHERE ({key}) > ({', '.join(['%s'] * len(table.key))})"
    sql = f"SELECT {columns} FROM {table.name} {where} ORDER BY {key} LIMIT %s"  # noqa: S608
    return conn.execute(sql, (*(after or ()), limit)).fetchall()


def copy_position(conn: psycopg.Connection[Any], table: TableSpec) -> list[Any] | None:
    row = conn.execute("SELECT value FROM meta WHERE key = %s", (f"copy:{table.name}",)).fetchone()
    return None if row is None else list(loads(row[0]))


def write_rows(
    conn: psycopg.Connection[Any],
    table: TableSpec,
    rows: Sequence[tuple[Any, ...]],
    position: Sequence[Any],
) -> int:
    """Insert `rows` (those already present are kept) and record `position`; the caller's
    transaction makes the two one commit. Returns how many rows were new."""
    names = ", ".join(name for name, _ in table.columns)
    values = ", ".join(_WRITE.get(kind, "%s") for _, kind in table.columns)
    sql = f"INSERT INTO {table.name} ({names}) VALUES ({values}) ON CONFLICT DO NOTHING"  # noqa: S608
    before = count_rows(conn, table)
    if rows:
        with conn.cursor() as cursor:
            cursor.executemany(sql, [_bools(table, r) for r in rows])
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (f"copy:{table.name}", dumps(list(position))),
    )
    return count_rows(conn, table) - before


def finish_copy(conn: psycopg.Connection[Any], table: TableSpec) -> None:
    """Move the table's sequence past the copied ids and forget the resume position."""
    if table.serial is not None:
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence('{table.name}', '{table.serial}'), "  # noqa: S608
            f"greatest((SELECT max({table.serial}) FROM {table.name}), 1))"
        )
    conn.execute("DELETE FROM meta WHERE key = %s", (f"copy:{table.name}",))


def _bools(table: TableSpec, row: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(
        bool(v) if kind == Kind.BOOL and v is not None else v
        for (_, kind), v in zip(table.columns, row, strict=True)
    )


def inspect_target(conn: psycopg.Connection[Any], tables: Sequence[str]) -> tuple[bool, str | None]:
    """(whether the target holds sessiongate rows, the origin its copy marker names) of the
    schema `conn`'s search path names; reads only, and creates nothing."""
    has_rows = False
    for name in (*tables, *_LIVE_TABLES):
        found = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (name,)).fetchone()
        if not (found and found[0]):
            continue
        skip = " WHERE key <> %s" if name == "meta" else ""
        params: tuple[Any, ...] = (ORIGIN_KEY,) if skip else ()
        row = conn.execute(
            f"SELECT EXISTS (SELECT 1 FROM {name}{skip})",  # noqa: S608
            params,
        ).fetchone()
        has_rows = has_rows or bool(row and row[0])
    marker: str | None = None
    found = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
    if found and found[0]:
        row = conn.execute("SELECT value FROM meta WHERE key = %s", (ORIGIN_KEY,)).fetchone()
        marker = None if row is None else str(loads(row[0]))
    return has_rows, marker


def begin_copy(conn: psycopg.Connection[Any], origin: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (%s, %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (ORIGIN_KEY, dumps(origin)),
    )


def end_copy(conn: psycopg.Connection[Any]) -> None:
    conn.execute("DELETE FROM meta WHERE key = %s", (ORIGIN_KEY,))
