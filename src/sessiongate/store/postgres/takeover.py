"""SQL for lanes an operator took over, on PostgreSQL: each method does what its twin in
`sqlite/takeover.py` does (times cross as microseconds, stored as `timestamptz`).

`PostgresTakeovers` is the `TakeoverTx` half of `PostgresTx`; every method runs inside the
caller's transaction, and `store.takeover.TakeoverStore` is the only caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.records import TakeoverRow

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresTakeovers"]

_COLUMNS = "session_key, taken_by, sg_us(since), sg_us(resume_at)"


def _row(row: tuple[object, ...]) -> TakeoverRow:
    return TakeoverRow(*row)  # type: ignore[arg-type]  # columns in declaration order


class PostgresTakeovers:
    __slots__ = ()
    conn: psycopg.Connection[Any]

    def put_takeover(self, row: TakeoverRow) -> bool:
        cursor = self.conn.execute(
            "INSERT INTO takeovers (session_key, taken_by, since, resume_at) "
            "VALUES (%s, %s, sg_ts(%s), sg_ts(%s)) ON CONFLICT DO NOTHING",
            (row.session_key, row.taken_by, row.since, row.resume_at),
        )
        return cursor.rowcount > 0

    def get_takeover(self, session_key: str) -> TakeoverRow | None:
        found = self.conn.execute(
            f"SELECT {_COLUMNS} FROM takeovers WHERE session_key = %s",  # noqa: S608  # constant columns
            (session_key,),
        ).fetchone()
        return None if found is None else _row(found)

    def list_takeovers(self) -> list[TakeoverRow]:
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM takeovers ORDER BY since, session_key"  # noqa: S608  # constant columns
        ).fetchall()
        return [_row(row) for row in rows]

    def delete_takeover(self, session_key: str) -> TakeoverRow | None:
        found = self.conn.execute(
            f"DELETE FROM takeovers WHERE session_key = %s RETURNING {_COLUMNS}",  # noqa: S608  # constant columns
            (session_key,),
        ).fetchone()
        return None if found is None else _row(found)
