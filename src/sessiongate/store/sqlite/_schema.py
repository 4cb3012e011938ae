"""Numbered migrations, applied at open, each in one transaction; applied ones are never edited.

Times in columns are integer microseconds since the epoch (UTC) so they compare and sort as
numbers; JSON payloads carry ISO-8601 text.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

_V1 = [
    """CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID""",
    # One row per session key: the routing entry. `data` is the whole SessionEntry as JSON;
    # the other columns are derived from it in one function and exist to be filtered and sorted.
    """CREATE TABLE routes (
        session_key TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        platform TEXT,
        chat_type TEXT NOT NULL,
        chat_id TEXT,
        thread_id TEXT,
        participant_id TEXT,
        updated_at INTEGER NOT NULL,
        pinned_at INTEGER,
        archived_at INTEGER,
        suspended INTEGER NOT NULL DEFAULT 0,
        resume_pending INTEGER NOT NULL DEFAULT 0,
        label TEXT,
        data TEXT NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX routes_session_id ON routes(session_id)",
    "CREATE INDEX routes_updated ON routes(updated_at)",
    "CREATE UNIQUE INDEX routes_label ON routes(label) WHERE label IS NOT NULL",
    # One row per session incarnation (session id).
    """CREATE TABLE sessions (
        sid INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL UNIQUE,
        session_key TEXT,
        parent_session_id TEXT,
        started_at INTEGER NOT NULL,
        ended_at INTEGER,
        end_reason TEXT,
        generation INTEGER NOT NULL DEFAULT 0,
        header TEXT NOT NULL
    )""",
    "CREATE INDEX sessions_key ON sessions(session_key, started_at)",
    # The transcript tree. `depth` is the distance from the root and `mdepth` the number of
    # messages on the way there (a branch's message count without a walk); `on_path` marks the
    # materialised active path, so the last page is one index range scan and the active leaf is
    # its deepest entry (no leaf column to keep in step on every append). `sid` has no
    # foreign-key clause: the check would cost a lookup per append, and entries are only ever
    # written under a session row the same transaction just read.
    """CREATE TABLE entries (
        id INTEGER PRIMARY KEY,
        sid INTEGER NOT NULL,
        parent_id INTEGER,
        depth INTEGER NOT NULL,
        mdepth INTEGER NOT NULL,
        on_path INTEGER NOT NULL DEFAULT 1,
        type TEXT NOT NULL,
        role TEXT,
        content TEXT,
        payload TEXT,
        ts INTEGER NOT NULL,
        idem TEXT
    )""",
    "CREATE INDEX entries_path ON entries(sid, on_path, depth)",
    "CREATE UNIQUE INDEX entries_idem ON entries(sid, idem) WHERE idem IS NOT NULL",
    # Childless entries off the active path (the active leaf is on the sessions row).
    """CREATE TABLE tips (
        sid INTEGER NOT NULL REFERENCES sessions(sid) ON DELETE CASCADE,
        entry_id INTEGER NOT NULL,
        PRIMARY KEY (sid, entry_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE identity_aliases (
        platform TEXT NOT NULL,
        alias TEXT NOT NULL,
        canonical TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (platform, alias)
    ) WITHOUT ROWID""",
    """CREATE TABLE tombstones (
        session_key TEXT PRIMARY KEY,
        deleted_at INTEGER NOT NULL,
        reason TEXT NOT NULL
    ) WITHOUT ROWID""",
]

# The full-text index is a side index over message text, filled from `entries` by a cursor
# (meta `fts_cursor`) off the append path; search joins it with the active path.
_V2 = [
    "CREATE VIRTUAL TABLE entries_fts USING fts5(content, content='entries', content_rowid='id')",
    "INSERT INTO meta (key, value) VALUES ('fts_cursor', '0')",
]

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    (1, "routes, sessions, transcript tree, aliases, tombstones", _V1),
    (2, "full-text side index", _V2),
]
