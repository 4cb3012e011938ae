"""The `sessions` table: one row per incarnation of a conversation, its header, saved
counters and end (`SessionsTx`; its PostgreSQL twin is `postgres/sessions.py`).

A session row's leaf (id, depth, message depth) is read with it from the entries, whose
module (`entries.py`) keeps it current.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.records import (
    SessionRow,
    dumps,
    loads,
)

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

__all__ = [
    "create_fresh_session_row",
    "create_session_row",
    "delete_session_rows",
    "end_session_row",
    "get_session_row",
    "has_any_sessions",
    "key_has_history",
    "load_counters",
    "save_counters",
    "session_ids_of_key",
    "sessions_of_lane",
    "unused_session_id",
]

_GET_SESSION = """
SELECT s.sid, s.session_id, s.session_key, s.parent_session_id, s.started_at, s.ended_at,
    s.end_reason, e.id, coalesce(e.depth, 0), coalesce(e.mdepth, 0), s.generation, s.header
FROM sessions s LEFT JOIN entries e ON e.id = (
    SELECT id FROM entries WHERE sid = s.sid AND on_path = 1 ORDER BY depth DESC LIMIT 1)
WHERE s.session_id = ?
"""


_CREATE_SESSION = (
    "INSERT INTO sessions (session_id, session_key, parent_session_id, started_at, header) "
    "VALUES (?, ?, ?, ?, ?)"
)


_END_SESSION = "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE sid = ?"


_SAVE_COUNTERS = "UPDATE sessions SET counters = ? WHERE sid = ?"


_LOAD_COUNTERS = "SELECT counters FROM sessions WHERE sid = ?"


# Creating a conversation is the first message of every chat: one statement draws the id and
# writes the row (no lookup first); an id already taken inserts nothing and is drawn again.
_CREATE_FRESH_SESSION = _CREATE_SESSION + " ON CONFLICT (session_id) DO NOTHING"


def create_fresh_session_row(
    conn: sqlite3.Connection,
    make_id: Callable[[], str],
    *,
    session_key: str | None,
    parent_session_id: str | None,
    started_at: int,
    header: Callable[[str], dict[str, Any]],
) -> SessionRow:
    """Write a session row under a fresh id from `make_id` (its header is `header(id)`) and
    return it as `get_session_row` would read it. The random part of an id is 32 bits, so a
    burst of sessions in one second can draw one twice: that draw inserts nothing and another
    is made."""
    for _ in range(16):
        session_id = make_id()
        text = dumps(header(session_id))
        cursor = conn.execute(
            _CREATE_FRESH_SESSION, (session_id, session_key, parent_session_id, started_at, text)
        )
        if cursor.rowcount == 1:
            assert cursor.lastrowid is not None
            return SessionRow(
                cursor.lastrowid,
                session_id,
                session_key,
                parent_session_id,
                started_at,
                None,
                None,
                None,
                0,
                0,
                0,
                text,
            )
    raise RuntimeError("could not draw an unused session id")


def get_session_row(conn: sqlite3.Connection, session_id: str) -> SessionRow | None:
    row = conn.execute(_GET_SESSION, (session_id,)).fetchone()
    return None if row is None else SessionRow(*row)


def unused_session_id(conn: sqlite3.Connection, make: Callable[[], str]) -> str:
    """A fresh id from `make` that no session has: the random part is 32 bits, so a burst of
    many sessions in one second can draw the same id twice."""
    for _ in range(16):
        candidate = make()
        if conn.execute(_SESSION_EXISTS, (candidate,)).fetchone() is None:
            return candidate
    raise RuntimeError("could not draw an unused session id")


_SESSION_EXISTS = "SELECT 1 FROM sessions WHERE session_id = ?"


def create_session_row(
    conn: sqlite3.Connection,
    *,
    session_id: str,
    session_key: str | None,
    parent_session_id: str | None,
    started_at: int,
    header: dict[str, Any],
) -> SessionRow:
    cursor = conn.execute(
        _CREATE_SESSION, (session_id, session_key, parent_session_id, started_at, dumps(header))
    )
    assert cursor.lastrowid is not None
    return SessionRow(
        cursor.lastrowid,
        session_id,
        session_key,
        parent_session_id,
        started_at,
        None,
        None,
        None,
        0,
        0,
        0,
        dumps(header),
    )


def end_session_row(
    conn: sqlite3.Connection, sid: int, *, at: int | None, reason: str | None
) -> None:
    conn.execute(_END_SESSION, (at, reason, sid))


def save_counters(conn: sqlite3.Connection, sid: int, counters: dict[str, Any]) -> None:
    """Keep a left incarnation's usage counters with it (see migration 5)."""
    conn.execute(_SAVE_COUNTERS, (dumps(counters), sid))


def load_counters(conn: sqlite3.Connection, sid: int) -> dict[str, Any] | None:
    """An incarnation's saved usage counters, or None if it was never left."""
    raw = conn.execute(_LOAD_COUNTERS, (sid,)).fetchone()
    return None if raw is None or raw[0] is None else dict(loads(raw[0]))


_ANY_SESSION = "SELECT 1 FROM sessions LIMIT 1"


# A key with incarnations but no route had its route pruned (deleting a lane removes both).
_KEY_HAS_HISTORY = "SELECT 1 FROM sessions WHERE session_key = ? LIMIT 1"


_IDS_OF_KEY = "SELECT session_id FROM sessions WHERE session_key = ? ORDER BY started_at DESC"


_SESSIONS_OF_LANE = (
    "SELECT sid, session_id, header FROM sessions WHERE session_key = ? OR session_id = ?"
)


def has_any_sessions(conn: sqlite3.Connection) -> bool:
    return conn.execute(_ANY_SESSION).fetchone() is not None


def key_has_history(conn: sqlite3.Connection, session_key: str) -> bool:
    return conn.execute(_KEY_HAS_HISTORY, (session_key,)).fetchone() is not None


def session_ids_of_key(conn: sqlite3.Connection, session_key: str) -> list[str]:
    return [r[0] for r in conn.execute(_IDS_OF_KEY, (session_key,))]


def sessions_of_lane(
    conn: sqlite3.Connection, session_key: str, session_id: str
) -> list[tuple[int, str, str]]:
    return conn.execute(_SESSIONS_OF_LANE, (session_key, session_id)).fetchall()


def delete_session_rows(conn: sqlite3.Connection, sid: int) -> None:
    conn.execute("DELETE FROM entries WHERE sid = ?", (sid,))
    conn.execute("DELETE FROM tips WHERE sid = ?", (sid,))
    conn.execute("DELETE FROM sessions WHERE sid = ?", (sid,))
