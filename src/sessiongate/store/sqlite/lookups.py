"""The small statements of the lifecycle that belong to no larger module: labels, tombstones,
identity aliases, and the incarnation and entry listings of rows, trees and rewinds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.store.records import EntryRow, PathMessageRow

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

__all__ = [
    "add_tombstone",
    "alias_of",
    "all_entries",
    "delete_session_rows",
    "has_any_sessions",
    "insert_alias",
    "is_alias_target",
    "key_has_history",
    "keys_a_lane",
    "label_taken",
    "last_completed_depth",
    "release_off_path_keys",
    "session_ids_of_key",
    "sessions_of_lane",
    "tombstone_reason",
    "user_turns_above",
]

_LABEL_TAKEN = "SELECT 1 FROM routes WHERE label = ? AND session_key IS NOT ?"
_TOMBSTONE = "SELECT reason FROM tombstones WHERE session_key = ?"
# A deleted key's tombstone is renewed; any other (incognito) keeps its first.
_ADD_TOMBSTONE = {
    "deleted": "INSERT INTO tombstones (session_key, deleted_at, reason) VALUES (?, ?, ?) "
    "ON CONFLICT (session_key) DO UPDATE SET deleted_at = excluded.deleted_at",
    "other": "INSERT INTO tombstones (session_key, deleted_at, reason) VALUES (?, ?, ?) "
    "ON CONFLICT (session_key) DO NOTHING",
}
_ALIAS_OF = "SELECT canonical FROM identity_aliases WHERE platform = ? AND alias = ?"
_IS_ALIAS_TARGET = "SELECT 1 FROM identity_aliases WHERE platform = ? AND canonical = ? LIMIT 1"
# A scan of the routes, but aliases are learned rarely (once per person and spelling).
_KEYS_A_LANE = (
    "SELECT 1 FROM routes WHERE platform = ? "
    "AND ((chat_type = 'dm' AND chat_id = ?) OR participant_id = ?) LIMIT 1"
)
_INSERT_ALIAS = (
    "INSERT INTO identity_aliases (platform, alias, canonical, created_at) "
    "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_ANY_SESSION = "SELECT 1 FROM sessions LIMIT 1"
# A key with incarnations but no route had its route pruned (deleting a lane removes both).
_KEY_HAS_HISTORY = "SELECT 1 FROM sessions WHERE session_key = ? LIMIT 1"
_IDS_OF_KEY = "SELECT session_id FROM sessions WHERE session_key = ? ORDER BY started_at DESC"
_SESSIONS_OF_LANE = (
    "SELECT sid, session_id, header FROM sessions WHERE session_key = ? OR session_id = ?"
)
_ALL_ENTRIES = (
    "SELECT id, parent_id, type, role, content, payload, ts, depth, mdepth, on_path, sid "
    "FROM entries WHERE sid = ? ORDER BY id"
)
_USER_TURNS_ABOVE = (
    "SELECT id, parent_id, role, content, payload, mdepth FROM entries "
    "WHERE sid = ? AND on_path = 1 AND type = 'message' AND depth > ? ORDER BY depth DESC"
)
# The depth a `last-completed` fork copies to: up to the message after the last assistant
# message that completed, so a compaction or reset written after the last completed turn comes
# along. An assistant message that asks for tools has not completed its turn: cutting after it
# would give the child a dangling tool call (and, before it, the unanswered user message), so
# only one without `tool_calls` counts (the store keeps `tool_calls` only when non-empty).
_LAST_COMPLETED_DEPTH = """
SELECT coalesce((
    SELECT min(depth) - 1 FROM entries
    WHERE sid = :sid AND on_path = 1 AND type = 'message' AND depth > coalesce((
        SELECT max(depth) FROM entries
        WHERE sid = :sid AND on_path = 1 AND type = 'message' AND role = 'assistant'
            AND json_extract(payload, '$.tool_calls') IS NULL), 0)
), :leaf)
"""
_RELEASE_OFF_PATH_KEY = "UPDATE entries SET idem = NULL WHERE sid = ? AND idem = ? AND on_path = 0"


def label_taken(conn: sqlite3.Connection, label: str, *, except_key: str | None = None) -> bool:
    return conn.execute(_LABEL_TAKEN, (label, except_key)).fetchone() is not None


def tombstone_reason(conn: sqlite3.Connection, session_key: str) -> str | None:
    row = conn.execute(_TOMBSTONE, (session_key,)).fetchone()
    return None if row is None else str(row[0])


def add_tombstone(conn: sqlite3.Connection, session_key: str, *, reason: str, at: int) -> None:
    sql = _ADD_TOMBSTONE["deleted" if reason == "deleted" else "other"]
    conn.execute(sql, (session_key, at, reason))


def alias_of(conn: sqlite3.Connection, platform: str, alias: str) -> str | None:
    row = conn.execute(_ALIAS_OF, (platform, alias)).fetchone()
    return None if row is None else str(row[0])


def is_alias_target(conn: sqlite3.Connection, platform: str, ident: str) -> bool:
    return conn.execute(_IS_ALIAS_TARGET, (platform, ident)).fetchone() is not None


def keys_a_lane(conn: sqlite3.Connection, platform: str, ident: str) -> bool:
    return conn.execute(_KEYS_A_LANE, (platform, ident, ident)).fetchone() is not None


def insert_alias(
    conn: sqlite3.Connection, platform: str, alias: str, canonical: str, *, at: int
) -> None:
    conn.execute(_INSERT_ALIAS, (platform, alias, canonical, at))


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


def all_entries(conn: sqlite3.Connection, sid: int) -> list[EntryRow]:
    return list(map(EntryRow._make, conn.execute(_ALL_ENTRIES, (sid,))))


def user_turns_above(conn: sqlite3.Connection, sid: int, depth: int) -> list[PathMessageRow]:
    return list(map(PathMessageRow._make, conn.execute(_USER_TURNS_ABOVE, (sid, depth))))


def last_completed_depth(conn: sqlite3.Connection, sid: int, leaf_depth: int) -> int:
    row = conn.execute(_LAST_COMPLETED_DEPTH, {"sid": sid, "leaf": leaf_depth}).fetchone()
    return int(row[0])


def release_off_path_keys(conn: sqlite3.Connection, sid: int, keys: Sequence[str]) -> None:
    conn.executemany(_RELEASE_OFF_PATH_KEY, [(sid, k) for k in keys])
