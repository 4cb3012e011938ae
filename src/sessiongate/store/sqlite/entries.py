"""The `entries` table, the transcript tree (`EntriesTx`; its PostgreSQL twin is
`postgres/entries.py`): append, the materialised active path, leaf moves, forks.

Invariants kept by every function here, inside the caller's transaction:
- the entries with `on_path = 1` of a session are exactly the path from a root to its leaf,
  one per depth, so the leaf is the deepest of them;
- `tips` holds the childless entries that are off the active path;
- `generation` rises whenever the active path changes other than by an append, so a reader that
  took a snapshot can tell that it was rewritten.

Slightly past the ~400-line budget: every statement that moves `on_path` is here, so the
invariants above can be checked in one file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.records import (
    EntryRecord,
    EntryRow,
    PathMessageRow,
    SessionRow,
    dumps,
    loads,
)

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

__all__ = [
    "all_entries",
    "context_events_below",
    "copy_path",
    "entry_row",
    "insert_entries",
    "keyed_path_messages",
    "last_completed_depth",
    "latest_reset_depth",
    "list_tips",
    "load_context_events",
    "load_path",
    "move_leaf",
    "release_off_path_keys",
    "tips_with_headlines",
    "user_turns_above",
]

_INSERT_ENTRY = (
    "INSERT INTO entries (sid, parent_id, depth, mdepth, type, role, content, payload, ts, idem) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)


_BUMP_GENERATION = "UPDATE sessions SET generation = generation + 1 WHERE sid = ?"


_ENTRY_COLUMNS = "id, parent_id, type, role, content, payload, ts, depth, mdepth, on_path, sid"


_GET_ENTRY = f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE id = ?"  # noqa: S608


_PATH_TAIL = (
    f"SELECT {_ENTRY_COLUMNS} FROM entries "  # noqa: S608
    "WHERE sid = ? AND on_path = 1 ORDER BY depth DESC LIMIT ?"
)


_PATH_TAIL_MESSAGES = (
    f"SELECT {_ENTRY_COLUMNS} FROM entries "  # noqa: S608
    "WHERE sid = ? AND on_path = 1 AND type = 'message' ORDER BY depth DESC LIMIT ?"
)


_PATH_ALL = (
    f"SELECT {_ENTRY_COLUMNS} FROM entries "  # noqa: S608
    "WHERE sid = ? AND on_path = 1 ORDER BY depth"
)


_PATH_ALL_MESSAGES = (
    f"SELECT {_ENTRY_COLUMNS} FROM entries "  # noqa: S608
    "WHERE sid = ? AND on_path = 1 AND type = 'message' ORDER BY depth"
)


_OFF_PATH_BELOW = "UPDATE entries SET on_path = 0 WHERE sid = ? AND on_path = 1 AND depth > ?"


_RELEASE_KEYS_BELOW = (
    "UPDATE entries SET idem = NULL "
    "WHERE sid = ? AND on_path = 1 AND depth > ? AND idem IS NOT NULL"
)


_LATEST_RESET_DEPTH = (
    "SELECT max(depth) FROM entries WHERE sid = ? AND on_path = 1 AND type = 'reset'"
)


_ON_PATH = "UPDATE entries SET on_path = 1 WHERE id = ?"


_HAS_CHILD = (
    "SELECT 1 FROM entries WHERE sid = ? AND on_path IN (0, 1) AND depth = ? AND parent_id = ? "
    "LIMIT 1"
)


_ADD_TIP = "INSERT INTO tips (sid, entry_id) VALUES (?, ?) ON CONFLICT DO NOTHING"


_DROP_TIP = "DELETE FROM tips WHERE sid = ? AND entry_id = ?"


_TIPS = "SELECT entry_id FROM tips WHERE sid = ? ORDER BY entry_id"


_MAX_ID = "SELECT coalesce(max(id), 0) FROM entries"


_COPY_PATH = """
INSERT INTO entries (id, sid, parent_id, depth, mdepth, on_path, type, role, content, payload, ts,
    idem)
SELECT :base + depth, :sid, CASE WHEN depth = 1 THEN NULL ELSE :base + depth - 1 END,
    depth, mdepth, 1, type, role, content, payload, ts, idem
FROM entries WHERE sid = :src AND on_path = 1 AND depth <= :upto
"""


def insert_entries(
    conn: sqlite3.Connection, session: SessionRow, records: Sequence[EntryRecord]
) -> tuple[list[int | None], SessionRow]:
    """Append `records` as a chain under the active leaf; duplicates (same `idem`) are skipped.

    Returns the new ids (None for a skipped duplicate) and the updated session row.
    """
    leaf, depth, mdepth = session.leaf_id, session.leaf_depth, session.leaf_mdepth
    ids: list[int | None] = []
    execute = conn.execute
    sid = session.sid
    for rec in records:
        is_message = rec.type == "message"
        payload = dumps(rec.payload) if rec.payload else None
        cursor = execute(
            _INSERT_ENTRY,
            (
                sid,
                leaf,
                depth + 1,
                mdepth + is_message,
                rec.type,
                rec.role,
                rec.content,
                payload,
                rec.ts,
                rec.idem,
            ),
        )
        if cursor.rowcount == 0:
            ids.append(None)
            continue
        leaf = cursor.lastrowid
        depth += 1
        mdepth += is_message
        ids.append(leaf)
    if leaf != session.leaf_id:
        session = _replace_leaf(session, leaf, depth, mdepth, session.generation)
    return ids, session


def entry_row(conn: sqlite3.Connection, entry_id: int) -> EntryRow | None:
    row = conn.execute(_GET_ENTRY, (entry_id,)).fetchone()
    return None if row is None else EntryRow._make(row)


# For each tip, its own row and the nearest user message at most `max_hops` entries up: one
# recursive walk over the parent links for every tip at once, reading only the columns the
# walk needs.
_HEADLINE_WALK = f"""
WITH RECURSIVE up(tip, id, parent_id, is_user, hops) AS (
    SELECT e.id, e.id, e.parent_id, e.type = 'message' AND e.role = 'user', 0
    FROM json_each(?) AS t JOIN entries AS e ON e.id = t.value
    UNION ALL
    SELECT up.tip, e.id, e.parent_id, e.type = 'message' AND e.role = 'user', up.hops + 1
    FROM up JOIN entries AS e ON e.id = up.parent_id
    WHERE NOT up.is_user AND up.hops < ?
)
SELECT up.tip, up.is_user, {", ".join(f"e.{c.strip()}" for c in _ENTRY_COLUMNS.split(","))}
FROM up JOIN entries AS e ON e.id = up.id
WHERE up.is_user OR up.id = up.tip
"""  # noqa: S608


def tips_with_headlines(
    conn: sqlite3.Connection, tip_ids: list[int], max_hops: int
) -> dict[int, tuple[EntryRow, EntryRow]]:
    """Tip id → (its entry row, the row its headline comes from: the nearest user message up
    to `max_hops` entries up, else the tip itself); unknown ids are left out."""
    tips: dict[int, EntryRow] = {}
    users: dict[int, EntryRow] = {}
    for tip, is_user, *values in conn.execute(_HEADLINE_WALK, (dumps(tip_ids), max_hops)):
        row = EntryRow._make(values)
        if row.id == tip:
            tips[tip] = row
        if is_user:
            users[tip] = row
    return {tip: (row, users.get(tip, row)) for tip, row in tips.items()}


def load_path(
    conn: sqlite3.Connection, sid: int, *, limit: int | None = None, messages_only: bool = True
) -> list[EntryRow]:
    """Active-path rows, root first; with `limit`, only the last `limit` (one index range)."""
    if limit is None:
        sql = _PATH_ALL_MESSAGES if messages_only else _PATH_ALL
        return list(map(EntryRow._make, conn.execute(sql, (sid,))))
    sql = _PATH_TAIL_MESSAGES if messages_only else _PATH_TAIL
    rows = list(map(EntryRow._make, conn.execute(sql, (sid, limit))))
    rows.reverse()
    return rows


def move_leaf(
    conn: sqlite3.Connection,
    session: SessionRow,
    target_id: int | None,
    *,
    release_keys: bool = False,
) -> SessionRow:
    """Make the path to `target_id` (None: before the first entry) the active path.

    `release_keys` (rewind, rewrite) clears the idempotency keys of the rows leaving the path:
    they were taken back, so the same message sent again must land on the new path instead of
    being dropped as a duplicate. A branch switch keeps them, since that branch may come back.
    """
    old_leaf = session.leaf_id
    chain: list[int] = []
    depth = mdepth = 0
    if target_id is not None:
        row = entry_row(conn, target_id)
        if row is None or row.sid != session.sid:
            raise LookupError(target_id)
        depth, mdepth = row.depth, row.mdepth
        cursor: EntryRow | None = row
        while cursor is not None and not cursor.on_path:
            chain.append(cursor.id)
            cursor = entry_row(conn, cursor.parent_id) if cursor.parent_id is not None else None
        common_depth = cursor.depth if cursor is not None else 0
    else:
        common_depth = 0
    if release_keys:
        conn.execute(_RELEASE_KEYS_BELOW, (session.sid, common_depth))
    conn.execute(_OFF_PATH_BELOW, (session.sid, common_depth))
    for entry_id in chain:
        conn.execute(_ON_PATH, (entry_id,))
    if target_id is not None:
        conn.execute(_DROP_TIP, (session.sid, target_id))
    if old_leaf is not None and old_leaf != target_id:
        old = entry_row(conn, old_leaf)
        assert old is not None
        has_child = conn.execute(_HAS_CHILD, (session.sid, old.depth + 1, old_leaf)).fetchone()
        if not old.on_path and has_child is None:
            conn.execute(_ADD_TIP, (session.sid, old_leaf))
    conn.execute(_BUMP_GENERATION, (session.sid,))
    return _replace_leaf(session, target_id, depth, mdepth, session.generation + 1)


def list_tips(conn: sqlite3.Connection, sid: int) -> list[int]:
    return [r[0] for r in conn.execute(_TIPS, (sid,))]


def latest_reset_depth(conn: sqlite3.Connection, sid: int) -> int:
    """Depth of the latest `reset` on the active path, 0 when there is none: rewinds stay below
    it, or `/undo` would bring the context a reset closed back into the model's view."""
    return int(conn.execute(_LATEST_RESET_DEPTH, (sid,)).fetchone()[0] or 0)


def copy_path(
    conn: sqlite3.Connection, source: SessionRow, target: SessionRow, upto_depth: int
) -> SessionRow:
    """Copy the source's active path down to `upto_depth` into the empty `target` session."""
    if upto_depth <= 0:
        return target
    base = int(conn.execute(_MAX_ID).fetchone()[0])
    conn.execute(
        _COPY_PATH, {"base": base, "sid": target.sid, "src": source.sid, "upto": upto_depth}
    )
    _remap_references(conn, source.sid, target.sid, base)
    leaf = entry_row(conn, base + upto_depth)
    assert leaf is not None
    return _replace_leaf(target, leaf.id, leaf.depth, leaf.mdepth, target.generation)


# Payload fields holding an entry id; a copy must point them at the copied entries, or a forked
# compaction would keep nothing but its summary.
_REFERENCE_FIELDS = ("first_kept_entry_id", "target_id", "from_entry_id")


_COPIED_WITH_PAYLOAD = (
    "SELECT id, payload FROM entries WHERE sid = ? AND id > ? AND payload IS NOT NULL "
    "AND type IN ('compaction', 'reset', 'label', 'branch_summary')"
)


_SET_PAYLOAD = "UPDATE entries SET payload = ? WHERE id = ?"


def _remap_references(conn: sqlite3.Connection, source_sid: int, sid: int, base: int) -> None:
    """Point references of the entries just copied into `sid` (ids `base + depth`) at the
    copies; a reference to an entry that was not copied (another branch) is left as it was."""
    for entry_id, text in conn.execute(_COPIED_WITH_PAYLOAD, (sid, base)).fetchall():
        payload = loads(text)
        changed = False
        for name in _REFERENCE_FIELDS:
            ref = payload.get(name)
            source = entry_row(conn, ref) if isinstance(ref, int) else None
            if source is None or source.sid != source_sid or not source.on_path:
                continue
            if base + source.depth < entry_id:  # an ancestor of the entry, so it was copied
                payload[name] = base + source.depth
                changed = True
        if changed:
            conn.execute(_SET_PAYLOAD, (dumps(payload), entry_id))


_CONTEXT_PATH = (
    "SELECT id, type, role, content, payload FROM entries "
    "WHERE sid = ? AND on_path = 1 ORDER BY depth"
)


def load_context_events(conn: sqlite3.Connection, sid: int) -> list[dict[str, Any]]:
    """The active path as the slim events the model-context builder reads (no timestamps, no
    tree links): the hot read of every turn, so it fetches and builds only what it needs."""
    return _events(conn.execute(_CONTEXT_PATH, (sid,)).fetchall())


def _events(rows: list[Any]) -> list[dict[str, Any]]:
    return [
        {"id": r[0], "type": r[1], "role": r[2], "content": r[3]}
        if r[4] is None
        else {"id": r[0], "type": r[1], "role": r[2], "content": r[3], **loads(r[4])}
        for r in rows
    ]


_ON_PATH_AT = "SELECT 1 FROM entries WHERE id = ? AND sid = ? AND on_path = 1 AND depth = ?"


_CONTEXT_BELOW = (
    "SELECT id, type, role, content, payload FROM entries "
    "WHERE sid = ? AND on_path = 1 AND depth > ? ORDER BY depth"
)


def context_events_below(
    conn: sqlite3.Connection, sid: int, entry_id: int, depth: int
) -> list[dict[str, Any]] | None:
    """`load_context_events` of the part of the active path below the entry, or None when it
    is not on the path at that depth (the path is no longer the one it ended)."""
    if conn.execute(_ON_PATH_AT, (entry_id, sid, depth)).fetchone() is None:
        return None
    return _events(conn.execute(_CONTEXT_BELOW, (sid, depth)).fetchall())


# The active path's messages whose idempotency key starts with a prefix: a range on the
# (sid, idem) index, up to the prefix with its last character moved one code point on.
_KEYED_PATH_MESSAGES = (
    f"SELECT idem, {_ENTRY_COLUMNS} FROM entries "  # noqa: S608
    "WHERE sid = ? AND idem >= ? AND idem < ? AND on_path = 1 AND type = 'message'"
)


def keyed_path_messages(
    conn: sqlite3.Connection, sid: int, prefix: str
) -> list[tuple[str, EntryRow]]:
    """`(idempotency key, entry row)` of the active path's messages whose key starts with
    `prefix` (not empty), in no particular order."""
    above = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    rows = conn.execute(_KEYED_PATH_MESSAGES, (sid, prefix, above)).fetchall()
    return [(row[0], EntryRow._make(row[1:])) for row in rows]


def _replace_leaf(s: SessionRow, leaf: int | None, depth: int, mdepth: int, gen: int) -> SessionRow:
    return SessionRow(
        s.sid,
        s.session_id,
        s.session_key,
        s.parent_session_id,
        s.started_at,
        s.ended_at,
        s.end_reason,
        leaf,
        depth,
        mdepth,
        gen,
        s.header,
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


def all_entries(conn: sqlite3.Connection, sid: int) -> list[EntryRow]:
    return list(map(EntryRow._make, conn.execute(_ALL_ENTRIES, (sid,))))


def user_turns_above(conn: sqlite3.Connection, sid: int, depth: int) -> list[PathMessageRow]:
    return list(map(PathMessageRow._make, conn.execute(_USER_TURNS_ABOVE, (sid, depth))))


def last_completed_depth(conn: sqlite3.Connection, sid: int, leaf_depth: int) -> int:
    row = conn.execute(_LAST_COMPLETED_DEPTH, {"sid": sid, "leaf": leaf_depth}).fetchone()
    return int(row[0])


def release_off_path_keys(conn: sqlite3.Connection, sid: int, keys: Sequence[str]) -> None:
    conn.executemany(_RELEASE_OFF_PATH_KEY, [(sid, k) for k in keys])
