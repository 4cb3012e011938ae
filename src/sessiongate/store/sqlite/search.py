"""Full-text search: an FTS5 side index over entry text, filled off the append path.

Appends never touch the index. `catch_up` indexes the rows added since the cursor (meta
`fts_cursor`) before a query, so search sees every committed message. Only what search can
return is indexed: user and assistant messages (tool output, system text and compaction
summaries are not searched). Rows off the active path stay indexed, since a branch switch
brings them back; the query filters on the path. If the index is damaged,
canonical writes go on: the index is marked stale, search falls back to a scan, and
`rebuild_index` (what `sessiongate doctor --repair` runs) makes it anew.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from typing import Any

from sessiongate.core.keys import FORK_TAG
from sessiongate.store.sqlite._codec import iso_from_us

__all__ = [
    "catch_up",
    "drop_indexed",
    "drop_session",
    "fts_query",
    "index_status",
    "is_stale",
    "lower_cursor",
    "mark_stale",
    "query_index",
    "rebuild_index",
    "scan",
]

log = logging.getLogger(__name__)

_CURSOR = "SELECT value FROM meta WHERE key = 'fts_cursor'"
_SET_CURSOR = (
    "INSERT INTO meta (key, value) VALUES ('fts_cursor', ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_STALE = "SELECT value FROM meta WHERE key = 'fts_stale'"
_SET_STALE = (
    "INSERT INTO meta (key, value) VALUES ('fts_stale', ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_INDEX_NEW = (
    "INSERT INTO entries_fts (rowid, content) "
    "SELECT id, content FROM entries WHERE id > ? AND content IS NOT NULL "
    "AND type = 'message' AND role IN ('user', 'assistant') ORDER BY id"
)
# A session's rows that are in the index, read from the index's own per-row table (`_docsize`
# has one row per indexed rowid): removing a row that was never indexed from an
# external-content index damages it, and a database indexed under an older, wider rule still
# has tool and system rows in it.
_INDEXED_OF_SESSION = (
    "SELECT e.id, e.content FROM entries e JOIN entries_fts_docsize d ON d.id = e.id "
    "WHERE e.sid = ?"
)
_CREATE_INDEX = (
    "CREATE VIRTUAL TABLE entries_fts USING fts5(content, content='entries', content_rowid='id')"
)
_MAX_ID = "SELECT coalesce(max(id), 0) FROM entries"
_DELETE_ROW = "INSERT INTO entries_fts (entries_fts, rowid, content) VALUES ('delete', ?, ?)"
_SEARCH = """
SELECT s.session_id, s.session_key, e.role,
       snippet(entries_fts, 0, '[', ']', '…', 12), e.ts
FROM entries_fts
JOIN entries e ON e.id = entries_fts.rowid
JOIN sessions s ON s.sid = e.sid
WHERE entries_fts MATCH :match AND e.on_path = 1 AND e.type = 'message'
  AND e.role IN ('user', 'assistant')
  AND (:prefix IS NULL OR substr(s.session_key, 1, length(:prefix)) = :prefix)
  AND (:tree IS NULL OR s.session_key = :tree
       OR substr(s.session_key, 1, length(:forks)) = :forks)
ORDER BY rank
LIMIT :limit
"""
_SCAN = """
SELECT s.session_id, s.session_key, e.role, e.content, e.ts
FROM entries e JOIN sessions s ON s.sid = e.sid
WHERE e.on_path = 1 AND e.type = 'message' AND e.role IN ('user', 'assistant')
  AND e.content LIKE :like ESCAPE '\\'
  AND (:prefix IS NULL OR substr(s.session_key, 1, length(:prefix)) = :prefix)
  AND (:tree IS NULL OR s.session_key = :tree
       OR substr(s.session_key, 1, length(:forks)) = :forks)
ORDER BY e.id DESC
LIMIT :limit
"""
_TOKEN = re.compile(r"\w+", re.UNICODE)


def fts_query(text: str) -> str | None:
    """User text → an FTS5 query of quoted terms, so `NOT`, `OR`, `"` or `*` are plain words."""
    terms = _TOKEN.findall(text)
    if not terms:
        return None
    return " ".join('"' + term.replace('"', '""') + '"' for term in terms[:32])


def is_stale(conn: sqlite3.Connection) -> bool:
    row = conn.execute(_STALE).fetchone()
    return row is not None and row[0] == "1"


def mark_stale(conn: sqlite3.Connection, reason: BaseException) -> None:
    log.warning("full-text index marked stale", extra={"error": str(reason)})
    conn.execute(_SET_STALE, ("1",))


def catch_up(conn: sqlite3.Connection) -> int:
    """Index rows past the cursor; returns how many ids the cursor moved over."""
    cursor = int(conn.execute(_CURSOR).fetchone()[0])
    newest = int(conn.execute(_MAX_ID).fetchone()[0])
    if newest <= cursor:
        return 0
    conn.execute(_INDEX_NEW, (cursor,))
    conn.execute(_SET_CURSOR, (str(newest),))
    return newest - cursor


def drop_indexed(conn: sqlite3.Connection, rows: list[tuple[int, str | None]]) -> None:
    """Remove deleted entries from the index (external content needs their old text); every
    row at or below the cursor must be in the index (`drop_session` selects only those)."""
    cursor = int(conn.execute(_CURSOR).fetchone()[0])
    for entry_id, content in rows:
        if entry_id <= cursor and content is not None:
            conn.execute(_DELETE_ROW, (entry_id, content))


def drop_session(conn: sqlite3.Connection, sid: int) -> None:
    """Remove a session's indexed entries from the index, before the entries are deleted."""
    drop_indexed(conn, conn.execute(_INDEXED_OF_SESSION, (sid,)).fetchall())


def lower_cursor(conn: sqlite3.Connection) -> None:
    """After entries are deleted: pull the cursor back to the newest remaining id.

    Entry ids are INTEGER PRIMARY KEY without AUTOINCREMENT, so deleting the newest rows frees
    their ids for reuse; a cursor left above them would make `catch_up` skip the new rows that
    reuse them, and search would silently stop finding new messages.
    """
    cursor = int(conn.execute(_CURSOR).fetchone()[0])
    newest = int(conn.execute(_MAX_ID).fetchone()[0])
    if cursor > newest:
        conn.execute(_SET_CURSOR, (str(newest),))


def query_index(
    conn: sqlite3.Connection,
    query: str,
    limit: int,
    *,
    key_prefix: str | None = None,
    tree_of: str | None = None,
) -> list[dict[str, Any]]:
    """Hits from the index (only keys starting `key_prefix`, and only `tree_of` and its forks,
    when given); raises `sqlite3.DatabaseError` if the index is damaged."""
    match = fts_query(query)
    if match is None:
        return []
    params = {"match": match, "prefix": key_prefix, "limit": limit, **_tree(tree_of)}
    return [_hit(r) for r in conn.execute(_SEARCH, params).fetchall()]


def scan(
    conn: sqlite3.Connection,
    query: str,
    limit: int,
    *,
    key_prefix: str | None = None,
    tree_of: str | None = None,
) -> list[dict[str, Any]]:
    """The fallback: a LIKE scan of active message text, slower but independent of the index."""
    if fts_query(query) is None:
        return []
    like = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    params = {"like": like, "prefix": key_prefix, "limit": limit, **_tree(tree_of)}
    return [_hit(r, scan=True) for r in conn.execute(_SCAN, params).fetchall()]


def _tree(tree_of: str | None) -> dict[str, str | None]:
    """The `:tree` and `:forks` parameters: a key, and the prefix of its forks' keys."""
    return {"tree": tree_of, "forks": None if tree_of is None else f"{tree_of}:{FORK_TAG}"}


def rebuild_index(conn: sqlite3.Connection) -> int:
    """Drop and rebuild the index from the entries; clears the stale mark."""
    try:
        conn.execute("DROP TABLE IF EXISTS entries_fts")
    except sqlite3.DatabaseError:
        _unlink_broken_index(conn)
    conn.execute(_CREATE_INDEX)
    conn.execute(_SET_CURSOR, ("0",))
    moved = catch_up(conn)
    conn.execute(_SET_STALE, ("0",))
    return moved


_SHADOW_TABLES = (
    "entries_fts_data",
    "entries_fts_idx",
    "entries_fts_docsize",
    "entries_fts_config",
)


def _unlink_broken_index(conn: sqlite3.Connection) -> None:
    """Remove an index so damaged that SQLite cannot even construct it to drop it (its
    structure record is gone): unlink it from the schema, then drop its shadow tables as the
    plain tables they are. Only the derived index is touched; the entries stay."""
    version = int(conn.execute("PRAGMA schema_version").fetchone()[0])
    conn.execute("PRAGMA writable_schema=ON")
    try:
        conn.execute("DELETE FROM sqlite_master WHERE type = 'table' AND name = 'entries_fts'")
        # A new schema version makes every connection (ours included) read the schema again.
        conn.execute(f"PRAGMA schema_version={version + 1}")
    finally:
        conn.execute("PRAGMA writable_schema=OFF")
    for table in _SHADOW_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def index_status(conn: sqlite3.Connection) -> dict[str, Any]:
    cursor = int(conn.execute(_CURSOR).fetchone()[0])
    newest = int(conn.execute(_MAX_ID).fetchone()[0])
    return {"stale": is_stale(conn), "cursor": cursor, "pending": max(0, newest - cursor)}


def integrity_check(conn: sqlite3.Connection) -> str | None:
    """None if the index agrees with its content table, else the error text."""
    try:
        conn.execute("INSERT INTO entries_fts (entries_fts) VALUES ('integrity-check')")
    except sqlite3.DatabaseError as exc:
        return str(exc)
    return None


def _hit(row: tuple[Any, ...], *, scan: bool = False) -> dict[str, Any]:
    snippet = row[3] or ""
    if scan and len(snippet) > 160:
        snippet = snippet[:160] + "…"
    return {
        "session_id": row[0],
        "session_key": row[1],
        "role": row[2],
        "snippet": snippet,
        "timestamp": iso_from_us(row[4]),
    }
