"""The `routes` table: one `SessionEntry` per session key.

`data` holds the whole entry as JSON; the other columns are derived from it here, and only
here, so they can never disagree with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.core.keys import KeyParts
from sessiongate.store.records import decoded_entry, remember_entry
from sessiongate.store.sqlite._codec import dumps, to_us

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterator
    from datetime import datetime

    from sessiongate.core.entry import SessionEntry

__all__ = [
    "add_tombstone",
    "alias_of",
    "count_routes",
    "delete_route",
    "get_route",
    "get_route_parts",
    "get_route_with_parts",
    "insert_alias",
    "is_alias_target",
    "iter_routes",
    "keys_a_lane",
    "label_taken",
    "list_route_page",
    "put_route",
    "route_by_session_id",
    "tombstone_reason",
    "upsert_route",
]

_SELECT_DATA = "SELECT data FROM routes WHERE session_key = ?"
_SELECT_PARTS = (
    "SELECT platform, chat_type, chat_id, thread_id, participant_id FROM routes "
    "WHERE session_key = ?"
)
_UPSERT = """
INSERT INTO routes (session_key, session_id, platform, chat_type, chat_id, thread_id,
    participant_id, updated_at, pinned_at, archived_at, suspended, resume_pending, label, data)
VALUES (:session_key, :session_id, :platform, :chat_type, :chat_id, :thread_id,
    :participant_id, :updated_at, :pinned_at, :archived_at, :suspended, :resume_pending,
    :label, :data)
ON CONFLICT (session_key) DO UPDATE SET
    session_id = excluded.session_id, updated_at = excluded.updated_at,
    pinned_at = excluded.pinned_at, archived_at = excluded.archived_at,
    suspended = excluded.suspended, resume_pending = excluded.resume_pending,
    label = excluded.label, data = excluded.data
"""
# The common write: the key already routes to this session id (a message or a turn touching
# its own lane). It sets neither the session id nor the key's parts, so SQLite leaves the
# session-id index alone (an upsert's SET list rewrites every index on a column it names,
# even with the same value), and no read of the parts is needed first.
_TOUCH = """
UPDATE routes SET updated_at = :updated_at, pinned_at = :pinned_at, archived_at = :archived_at,
    suspended = :suspended, resume_pending = :resume_pending, label = :label, data = :data
WHERE session_key = :session_key AND session_id = :session_id
"""
_DELETE = "DELETE FROM routes WHERE session_key = ?"
_BY_SESSION_ID = "SELECT data FROM routes WHERE session_id = ?"
_ALL = "SELECT data FROM routes ORDER BY updated_at DESC"
_ALL_SINCE = "SELECT data FROM routes WHERE updated_at >= ? ORDER BY updated_at DESC"
_COUNT = "SELECT count(*) FROM routes"


def get_route(conn: sqlite3.Connection, session_key: str) -> SessionEntry | None:
    row = conn.execute(_SELECT_DATA, (session_key,)).fetchone()
    return None if row is None else decoded_entry(row[0])


_SELECT_WITH_PARTS = (
    "SELECT data, platform, chat_type, chat_id, thread_id, participant_id FROM routes "
    "WHERE session_key = ?"
)


def get_route_with_parts(
    conn: sqlite3.Connection, session_key: str
) -> tuple[SessionEntry, KeyParts] | None:
    row = conn.execute(_SELECT_WITH_PARTS, (session_key,)).fetchone()
    if row is None:
        return None
    return decoded_entry(row[0]), KeyParts(row[1] or "", row[2], row[3], row[4], row[5])


def get_route_parts(conn: sqlite3.Connection, session_key: str) -> KeyParts | None:
    row = conn.execute(_SELECT_PARTS, (session_key,)).fetchone()
    if row is None:
        return None
    return KeyParts(row[0] or "", row[1], row[2], row[3], row[4])


def upsert_route(conn: sqlite3.Connection, entry: SessionEntry, parts: KeyParts | None) -> None:
    row = _route_row(entry)
    row.update(_parts_columns(entry, parts))
    conn.execute(_UPSERT, row)
    remember_entry(str(row["data"]), entry)


def put_route(conn: sqlite3.Connection, entry: SessionEntry, parts: KeyParts | None = None) -> None:
    """Write `entry`: one UPDATE when its key already routes to its session id, else the
    upsert (a new key, or a new session id), with the key's stored parts unless `parts`."""
    row = _route_row(entry)
    if conn.execute(_TOUCH, row).rowcount == 0:
        if parts is None:
            parts = get_route_parts(conn, entry.session_key)
        row.update(_parts_columns(entry, parts))
        conn.execute(_UPSERT, row)
    remember_entry(str(row["data"]), entry)


def delete_route(conn: sqlite3.Connection, session_key: str) -> bool:
    return conn.execute(_DELETE, (session_key,)).rowcount > 0


def route_by_session_id(conn: sqlite3.Connection, session_id: str) -> SessionEntry | None:
    row = conn.execute(_BY_SESSION_ID, (session_id,)).fetchone()
    return None if row is None else decoded_entry(row[0])


def iter_routes(
    conn: sqlite3.Connection, *, since: datetime | None = None
) -> Iterator[SessionEntry]:
    cursor = conn.execute(_ALL) if since is None else conn.execute(_ALL_SINCE, (to_us(since),))
    for (data,) in cursor:
        yield decoded_entry(data)


def count_routes(conn: sqlite3.Connection) -> int:
    return int(conn.execute(_COUNT).fetchone()[0])


# `SessionEntry.unread` in SQL: a marker, or activity after the last read (times are ISO-8601
# UTC text, which sorts as time does).
_UNREAD = """coalesce(
    json_extract(data, '$.marked_unread_at') IS NOT NULL
    OR (json_extract(data, '$.last_read_at') IS NOT NULL
        AND json_extract(data, '$.last_activity_at') > json_extract(data, '$.last_read_at')),
    0)"""
_PAGE = f"""
SELECT data FROM routes
WHERE (:archived IS NULL OR (archived_at IS NOT NULL) = :archived)
  AND (:since IS NULL OR updated_at >= :since)
  AND (:platform IS NULL OR platform = :platform)
  AND (:pinned IS NULL OR (pinned_at IS NOT NULL) = :pinned)
  AND (:key_prefix IS NULL OR substr(session_key, 1, length(:key_prefix)) = :key_prefix)
  AND (:unread IS NULL OR ({_UNREAD}) = :unread)
ORDER BY (pinned_at IS NOT NULL AND archived_at IS NULL) DESC, updated_at DESC, session_key
LIMIT :limit OFFSET :offset
"""  # noqa: S608 (built from constants; every value is bound)
_PAGE_COUNT = f"""
SELECT count(*) FROM routes
WHERE (:archived IS NULL OR (archived_at IS NOT NULL) = :archived)
  AND (:since IS NULL OR updated_at >= :since)
  AND (:platform IS NULL OR platform = :platform)
  AND (:pinned IS NULL OR (pinned_at IS NOT NULL) = :pinned)
  AND (:key_prefix IS NULL OR substr(session_key, 1, length(:key_prefix)) = :key_prefix)
  AND (:unread IS NULL OR ({_UNREAD}) = :unread)
"""  # noqa: S608


def list_route_page(
    conn: sqlite3.Connection,
    *,
    limit: int,
    offset: int,
    archived: bool | None,
    since: datetime | None,
    platform: str | None = None,
    pinned: bool | None = None,
    unread: bool | None = None,
    key_prefix: str | None = None,
) -> tuple[list[SessionEntry], int]:
    """One page, pinned (and not archived) first, then most recently updated; each filter
    left at None matches everything."""
    params = {
        "archived": None if archived is None else int(archived),
        "since": None if since is None else to_us(since),
        "platform": platform,
        "pinned": None if pinned is None else int(pinned),
        "unread": None if unread is None else int(unread),
        "key_prefix": key_prefix,
        "limit": limit,
        "offset": offset,
    }
    rows = conn.execute(_PAGE, params).fetchall()
    total = int(conn.execute(_PAGE_COUNT, params).fetchone()[0])
    return [decoded_entry(r[0]) for r in rows], total


def _parts_columns(entry: SessionEntry, parts: KeyParts | None) -> dict[str, object]:
    return {
        "platform": parts.platform if parts else (str(entry.platform) if entry.platform else None),
        "chat_type": parts.chat_type if parts else str(entry.chat_type),
        "chat_id": parts.chat_id if parts else None,
        "thread_id": parts.thread_id if parts else None,
        "participant_id": parts.participant_id if parts else None,
    }


def _route_row(entry: SessionEntry) -> dict[str, object]:
    return {
        "session_key": entry.session_key,
        "session_id": entry.session_id,
        "updated_at": to_us(entry.updated_at),
        "pinned_at": _us_or_none(entry.pinned_at),
        "archived_at": _us_or_none(entry.archived_at),
        "suspended": int(entry.suspended),
        "resume_pending": int(entry.resume_pending),
        "label": entry.label,
        "data": dumps(entry.to_dict(compact=True)),
    }


def _us_or_none(value: datetime | None) -> int | None:
    return None if value is None else to_us(value)


# ---------------------------------------------------------------------- labels, tombstones, aliases

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
