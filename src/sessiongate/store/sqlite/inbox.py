"""The durable inbound queue (`inbox`) and inbound deduplication (`inbound_seen`).

Every function runs inside the caller's transaction. Invariants kept here:
- a lane has at most one `pending` `slot` row (the partial unique index `inbox_one_slot`);
  follow-ups merge into it: text joined with a newline, media accumulated, the newest message
  id kept and every message id remembered;
- `queued` rows are never merged: one row, one turn, FIFO by id;
- a row is `claimed` by exactly one turn and deleted only when that turn's outcome commits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.records import (
    InboxKind,
    InboxRow,
    InboxState,
    SeenRow,
    dumps,
    loads,
    merged_slot,
)

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "InboxKind",
    "InboxRow",
    "InboxState",
    "SeenRow",
    "claim_row",
    "count_pending",
    "count_pending_all",
    "delete_pending",
    "delete_pending_events",
    "delete_pending_row",
    "delete_row",
    "delete_seen_of_row",
    "get_row",
    "has_pending",
    "insert_row",
    "insert_seen",
    "lanes_with_pending",
    "link_seen_to_turn",
    "merge_into_slot",
    "next_pending",
    "pending_slot",
    "prune_seen",
    "select_seen",
]


_COLUMNS = (
    "id, session_key, kind, state, turn_id, text, parts, media, message_id, message_ids, source, "
    "message_type, reply_to, event_kind, internal, accepted_at, updated_at"
)
_GET = f"SELECT {_COLUMNS} FROM inbox WHERE id = ?"  # noqa: S608
_PENDING_SLOT = (
    f"SELECT {_COLUMNS} FROM inbox "  # noqa: S608
    "WHERE session_key = ? AND state = 'pending' AND kind = 'slot'"
)
# The slot runs before the `/queue` overflow (spec §8: the slot is the next-up event); within a
# kind, the oldest row first.
_NEXT_PENDING = (
    f"SELECT {_COLUMNS} FROM inbox "  # noqa: S608
    "WHERE session_key = ? AND state = 'pending' "
    "ORDER BY CASE kind WHEN 'slot' THEN 0 ELSE 1 END, id LIMIT 1"
)
_INSERT = (
    "INSERT INTO inbox (session_key, kind, text, parts, media, message_id, message_ids, source, "
    "message_type, reply_to, event_kind, internal, accepted_at, updated_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_MERGE = (
    "UPDATE inbox SET text = ?, parts = ?, media = ?, message_id = ?, message_ids = ?, "
    "source = ?, message_type = ?, reply_to = ?, updated_at = ? "
    "WHERE id = ? AND state = 'pending' AND kind = 'slot'"
)
_CLAIM = "UPDATE inbox SET state = 'claimed', turn_id = ? WHERE id = ? AND state = 'pending'"
_DELETE = "DELETE FROM inbox WHERE id = ?"
_DELETE_PENDING_ROW = "DELETE FROM inbox WHERE id = ? AND state = 'pending'"
_PENDING_IDS = "SELECT id FROM inbox WHERE session_key = ? AND state = 'pending' ORDER BY id"
_DELETE_PENDING = "DELETE FROM inbox WHERE session_key = ? AND state = 'pending'"
# System events (`event_kind` set) waiting on a lane, for a rollover to discard.
_PENDING_EVENT_IDS = (
    "SELECT id FROM inbox WHERE session_key = ? AND state = 'pending' "
    "AND event_kind IS NOT NULL ORDER BY id"
)
_COUNT_PENDING = "SELECT count(*) FROM inbox WHERE session_key = ? AND state = 'pending'"
_HAS_PENDING = "SELECT 1 FROM inbox WHERE session_key = ? AND state = 'pending' LIMIT 1"
_COUNT_PENDING_ALL = "SELECT count(*) FROM inbox WHERE state = 'pending'"
_LANES_PENDING = (
    "SELECT session_key FROM inbox WHERE state = 'pending' GROUP BY session_key ORDER BY min(id)"
)
_SEEN_COLUMNS = (
    "platform, chat_id, message_id, session_key, sender_id, content_hash, session_id, inbox_id, "
    "turn_id, status, reply, seen_at"
)
# One primary-key lookup: the whole scope is the key.
_SELECT_SEEN = (
    f"SELECT {_SEEN_COLUMNS} FROM inbound_seen "  # noqa: S608
    "WHERE platform = ? AND chat_id = ? AND message_id = ? AND session_key = ? AND sender_id = ?"
)
_INSERT_SEEN = (
    f"INSERT INTO inbound_seen ({_SEEN_COLUMNS}) "  # noqa: S608
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
)
_LINK_SEEN = "UPDATE inbound_seen SET turn_id = ? WHERE inbox_id = ? AND turn_id IS NULL"
_DELETE_SEEN_OF_ROW = "DELETE FROM inbound_seen WHERE inbox_id = ?"
# A record whose inbox row still waits (or runs) is kept whatever its age: forgetting it would
# let a redelivery of that message become a second row.
_PRUNE_SEEN = (
    "DELETE FROM inbound_seen WHERE seen_at < ? "
    "AND (inbox_id IS NULL OR inbox_id NOT IN (SELECT id FROM inbox))"
)


def _row(raw: tuple[Any, ...]) -> InboxRow:
    return InboxRow(
        id=raw[0],
        session_key=raw[1],
        kind=InboxKind(raw[2]),
        state=InboxState(raw[3]),
        turn_id=raw[4],
        text=raw[5],
        parts=loads(raw[6]),
        media=loads(raw[7]),
        message_id=raw[8],
        message_ids=loads(raw[9]),
        source=loads(raw[10]),
        message_type=raw[11],
        reply_to=raw[12],
        event_kind=raw[13],
        internal=bool(raw[14]),
        accepted_at=raw[15],
        updated_at=raw[16],
    )


def get_row(conn: sqlite3.Connection, inbox_id: int) -> InboxRow | None:
    raw = conn.execute(_GET, (inbox_id,)).fetchone()
    return None if raw is None else _row(raw)


def pending_slot(conn: sqlite3.Connection, session_key: str) -> InboxRow | None:
    raw = conn.execute(_PENDING_SLOT, (session_key,)).fetchone()
    return None if raw is None else _row(raw)


def next_pending(conn: sqlite3.Connection, session_key: str) -> InboxRow | None:
    raw = conn.execute(_NEXT_PENDING, (session_key,)).fetchone()
    return None if raw is None else _row(raw)


def insert_row(
    conn: sqlite3.Connection,
    *,
    session_key: str,
    kind: InboxKind,
    part: dict[str, Any],
    media: list[str],
    message_id: str | None,
    source: dict[str, Any],
    message_type: str,
    reply_to: str | None,
    event_kind: str | None,
    internal: bool,
    at: int,
) -> int:
    cursor = conn.execute(
        _INSERT,
        (
            session_key,
            str(kind),
            part["text"],
            dumps([part]),
            dumps(media),
            message_id,
            dumps([message_id] if message_id else []),
            dumps(source),
            message_type,
            reply_to,
            event_kind,
            int(internal),
            at,
            at,
        ),
    )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def merge_into_slot(
    conn: sqlite3.Connection,
    slot: InboxRow,
    *,
    part: dict[str, Any],
    media: list[str],
    message_id: str | None,
    source: dict[str, Any],
    message_type: str,
    reply_to: str | None,
    at: int,
) -> None:
    """Merge one follow-up into the pending slot (never overwrite: DESIGN decision 3)."""
    cursor = conn.execute(
        _MERGE,
        merged_slot(
            slot,
            part=part,
            media=media,
            message_id=message_id,
            source=source,
            message_type=message_type,
            reply_to=reply_to,
            at=at,
        ),
    )
    if cursor.rowcount != 1:
        raise LookupError(f"inbox row {slot.id} is no longer a pending slot")


def claim_row(conn: sqlite3.Connection, inbox_id: int, turn_id: int) -> None:
    if conn.execute(_CLAIM, (turn_id, inbox_id)).rowcount != 1:
        raise LookupError(f"inbox row {inbox_id} is not pending")


def delete_row(conn: sqlite3.Connection, inbox_id: int) -> None:
    conn.execute(_DELETE, (inbox_id,))


def delete_pending_row(conn: sqlite3.Connection, inbox_id: int) -> bool:
    """Delete one row if it is still pending (never a claimed one); whether it was."""
    return conn.execute(_DELETE_PENDING_ROW, (inbox_id,)).rowcount == 1


def delete_pending(conn: sqlite3.Connection, session_key: str) -> list[int]:
    """Delete the lane's pending rows (slot and queue, for `/new`); returns their ids."""
    ids = [r[0] for r in conn.execute(_PENDING_IDS, (session_key,))]
    if ids:
        conn.execute(_DELETE_PENDING, (session_key,))
    return ids


def delete_pending_events(
    conn: sqlite3.Connection, session_key: str, *, keep: int | None = None
) -> list[int]:
    """Delete the lane's pending system events (except row `keep`); returns their ids."""
    ids = [r[0] for r in conn.execute(_PENDING_EVENT_IDS, (session_key,)) if r[0] != keep]
    conn.executemany(_DELETE, [(i,) for i in ids])
    return ids


def has_pending(conn: sqlite3.Connection, session_key: str) -> bool:
    return conn.execute(_HAS_PENDING, (session_key,)).fetchone() is not None


def count_pending(conn: sqlite3.Connection, session_key: str) -> int:
    return int(conn.execute(_COUNT_PENDING, (session_key,)).fetchone()[0])


def count_pending_all(conn: sqlite3.Connection) -> int:
    return int(conn.execute(_COUNT_PENDING_ALL).fetchone()[0])


def lanes_with_pending(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute(_LANES_PENDING)]


def select_seen(
    conn: sqlite3.Connection,
    platform: str,
    chat_id: str,
    message_id: str,
    *,
    session_key: str,
    sender_id: str,
) -> SeenRow | None:
    """The record of this message id from this sender in this lane, or None."""
    raw = conn.execute(
        _SELECT_SEEN, (platform, chat_id, message_id, session_key, sender_id)
    ).fetchone()
    return None if raw is None else SeenRow(*raw)


def insert_seen(conn: sqlite3.Connection, row: SeenRow) -> bool:
    """Remember one inbound message id; False when it was already seen (nothing written)."""
    cursor = conn.execute(
        _INSERT_SEEN,
        (
            row.platform,
            row.chat_id,
            row.message_id,
            row.session_key,
            row.sender_id,
            row.content_hash,
            row.session_id,
            row.inbox_id,
            row.turn_id,
            row.status,
            row.reply,
            row.seen_at,
        ),
    )
    return cursor.rowcount == 1


def link_seen_to_turn(conn: sqlite3.Connection, inbox_id: int, turn_id: int) -> None:
    conn.execute(_LINK_SEEN, (turn_id, inbox_id))


def delete_seen_of_row(conn: sqlite3.Connection, inbox_id: int) -> int:
    """Forget the dedup records of a row dropped unrun (every message id merged into it), so a
    retry of those messages is accepted again; returns how many."""
    return int(conn.execute(_DELETE_SEEN_OF_ROW, (inbox_id,)).rowcount)


def prune_seen(conn: sqlite3.Connection, before: int) -> int:
    """Forget dedup records older than `before` (housekeeping) whose inbox row is gone;
    returns how many."""
    return int(conn.execute(_PRUNE_SEEN, (before,)).rowcount)
