"""`PostgresTx`: the storage protocol's statements on one psycopg connection.

Each method does what the SQLite module of the same table does (`sqlite/routes.py`,
`transcripts.py`, `inbox.py`, `journal.py`, `lookups.py`; their docstrings state the
invariants); the shared store suite runs against both. Differences are of dialect only: times
are converted by `sg_ts`/`sg_us`, JSON is `jsonb` read back as text, ids come from `RETURNING`,
and search is the generated `tsvector` column, which cannot go stale (so the side-index
maintenance calls are no-ops).

Far over the ~400-line budget: it is the twin of the five SQLite table modules in one class,
so the protocol can be checked against it method by method; splitting it by table, as on
SQLite, is the natural next step once the two have settled.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from typing import TYPE_CHECKING, Any, NoReturn

from sessiongate.core.jsontext import json_encoder
from sessiongate.core.keys import FORK_TAG, KeyParts
from sessiongate.errors import RouteChangedError
from sessiongate.store.postgres import leases
from sessiongate.store.postgres.approvals import PostgresApprovals
from sessiongate.store.postgres.deliveries import PostgresDeliveries
from sessiongate.store.postgres.erasure import PostgresErasure
from sessiongate.store.postgres.jobs import PostgresJobs
from sessiongate.store.postgres.outbox import PostgresOutbox
from sessiongate.store.postgres.platform_state import PostgresPlatformState
from sessiongate.store.postgres.takeover import PostgresTakeovers
from sessiongate.store.records import (
    TRANSITIONS,
    EntryRecord,
    InboxKind,
    InboxRow,
    InboxState,
    SeenRow,
    SessionRow,
    TurnRow,
    TurnState,
    decoded_entry,
    dumps,
    iso_from_us,
    loads,
    merged_slot,
    refused_turn,
    remember_entry,
    to_us,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from datetime import datetime

    import psycopg

    from sessiongate.core.entry import SessionEntry
    from sessiongate.store.postgres._pipeline import Wire

__all__ = ["PostgresTx"]

log = logging.getLogger(__name__)

_ENTRY = "id, parent_id, type, role, content, payload::text, sg_us(ts), depth, mdepth, on_path, sid"
_ENTRY_OF_E = (
    "e.id, e.parent_id, e.type, e.role, e.content, e.payload::text, sg_us(e.ts), e.depth, "
    "e.mdepth, e.on_path, e.sid"
)
_SESSION = (
    "s.sid, s.session_id, s.session_key, s.parent_session_id, sg_us(s.started_at), "
    "sg_us(s.ended_at), s.end_reason, e.id, coalesce(e.depth, 0), coalesce(e.mdepth, 0), "
    "s.generation, s.header::text"
)
_INBOX = (
    "id, session_key, kind, state, turn_id, text, parts::text, media::text, message_id, "
    "message_ids::text, source::text, message_type, reply_to, event_kind, internal, "
    "sg_us(accepted_at), sg_us(updated_at)"
)
_SEEN = (
    "platform, chat_id, message_id, session_key, sender_id, content_hash, session_id, inbox_id, "
    "turn_id, status, reply, sg_us(seen_at)"
)
_TURN = (
    "id, session_key, session_id, inbox_id, state, attempt, resumes, source::text, reply, error, "
    "sg_us(accepted_at), sg_us(started_at), sg_us(finished_at), sg_us(delivered_at)"
)

_UPSERT_ROUTE = """
INSERT INTO routes (session_key, session_id, platform, chat_type, chat_id, thread_id,
    participant_id, updated_at, pinned_at, archived_at, suspended, resume_pending, label, data)
VALUES (%(session_key)s, %(session_id)s, %(platform)s, %(chat_type)s, %(chat_id)s,
    %(thread_id)s, %(participant_id)s, sg_ts(%(updated_at)s), sg_ts(%(pinned_at)s),
    sg_ts(%(archived_at)s), %(suspended)s, %(resume_pending)s, %(label)s, %(data)s::jsonb)
ON CONFLICT (session_key) DO UPDATE SET
    session_id = excluded.session_id, updated_at = excluded.updated_at,
    pinned_at = excluded.pinned_at, archived_at = excluded.archived_at,
    suspended = excluded.suspended, resume_pending = excluded.resume_pending,
    label = excluded.label, data = excluded.data
"""
_PUT_ROUTE = (
    "UPDATE routes SET updated_at = sg_ts(%(updated_at)s), "
    "pinned_at = sg_ts(%(pinned_at)s::bigint), "
    "archived_at = sg_ts(%(archived_at)s::bigint), suspended = %(suspended)s, "
    "resume_pending = %(resume_pending)s, label = %(label)s, data = %(data)s::jsonb "
    "WHERE session_key = %(session_key)s AND session_id = %(session_id)s"
)
# `SessionEntry.unread` in SQL: a marker, or activity after the last read (ISO-8601 UTC text
# sorts as time does).
_UNREAD = """(data->>'marked_unread_at' IS NOT NULL
    OR coalesce(data->>'last_read_at' IS NOT NULL
        AND data->>'last_activity_at' > data->>'last_read_at', false))"""
_PAGE_WHERE = f"""
WHERE (%(archived)s::boolean IS NULL OR (archived_at IS NOT NULL) = %(archived)s::boolean)
  AND (%(since)s::bigint IS NULL OR updated_at >= sg_ts(%(since)s::bigint))
  AND (%(platform)s::text IS NULL OR platform = %(platform)s::text)
  AND (%(pinned)s::boolean IS NULL OR (pinned_at IS NOT NULL) = %(pinned)s::boolean)
  AND (%(key_prefix)s::text IS NULL OR starts_with(session_key, %(key_prefix)s::text))
  AND (%(unread)s::boolean IS NULL OR {_UNREAD} = %(unread)s::boolean)
"""
_PAGE = (
    "SELECT data::text FROM routes"  # noqa: S608
    + _PAGE_WHERE
    + "ORDER BY (pinned_at IS NOT NULL AND archived_at IS NULL) DESC, updated_at DESC, "
    "session_key LIMIT %(limit)s OFFSET %(offset)s"
)
_PAGE_COUNT = "SELECT count(*) FROM routes" + _PAGE_WHERE  # noqa: S608
_GET_SESSION = f"""
SELECT {_SESSION}
FROM sessions s LEFT JOIN LATERAL (
    SELECT id, depth, mdepth FROM entries WHERE sid = s.sid AND on_path = 1
    ORDER BY depth DESC LIMIT 1) e ON true
WHERE s.session_id = %s
"""  # noqa: S608
_INSERT_ENTRY = (
    "INSERT INTO entries (sid, parent_id, depth, mdepth, type, role, content, payload, ts, idem) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s::jsonb, sg_ts(%s), %s) "
    "ON CONFLICT DO NOTHING RETURNING id"
)
_TURN_EXISTS = "SELECT 1 FROM turns WHERE id = %s"
_COUNT_PENDING = "SELECT count(*) FROM inbox WHERE session_key = %s AND state = 'pending'"
# `get_session_row` and the first entry's insert in one statement: the session (its leaf as
# it was before the insert) and the new id, NULL when the entry's key is already taken; no
# row when there is no such session (and then nothing is inserted).
_APPEND_FIRST = f"""
WITH s (sid, session_id, session_key, parent_session_id, started_at, ended_at, end_reason,
    leaf_id, depth, mdepth, generation, header) AS ({_GET_SESSION.strip()}),
ins AS (
    INSERT INTO entries (sid, parent_id, depth, mdepth, type, role, content, payload, ts, idem)
    SELECT s.sid, s.leaf_id, s.depth + 1, s.mdepth + %s, %s, %s, %s, %s::jsonb, sg_ts(%s), %s
    FROM s ON CONFLICT DO NOTHING RETURNING id)
SELECT s.*, (SELECT id FROM ins) FROM s
"""  # noqa: S608
# `get_session_row`'s leaf depth and `load_context_events` in one statement: no row when there
# is no such session; one row with a NULL id when the path is empty or deeper than the limit.
_SESSION_CONTEXT = """
WITH s AS (SELECT sid FROM sessions WHERE session_id = %(id)s),
leaf AS (SELECT coalesce((SELECT depth FROM entries WHERE sid = (SELECT sid FROM s)
    AND on_path = 1 ORDER BY depth DESC LIMIT 1), 0) AS depth)
SELECT (SELECT depth FROM leaf), e.id, e.type, e.role, e.content, e.payload::text
FROM s LEFT JOIN entries e ON e.sid = s.sid AND e.on_path = 1
    AND (%(max)s::bigint IS NULL OR (SELECT depth FROM leaf) <= %(max)s::bigint)
ORDER BY e.depth
"""
# `_SESSION_CONTEXT` of the part of the path below an entry, while that entry is on the path at
# its depth (`kept` true); otherwise of the whole path.
_SESSION_CONTEXT_TAIL = """
WITH s AS (SELECT sid FROM sessions WHERE session_id = %(id)s),
leaf AS (SELECT coalesce((SELECT depth FROM entries WHERE sid = (SELECT sid FROM s)
    AND on_path = 1 ORDER BY depth DESC LIMIT 1), 0) AS depth),
kept AS (SELECT EXISTS (SELECT 1 FROM entries WHERE id = %(after)s AND sid = (SELECT sid FROM s)
    AND on_path = 1 AND depth = %(after_depth)s) AS ok)
SELECT (SELECT depth FROM leaf), (SELECT ok FROM kept), e.id, e.type, e.role, e.content,
    e.payload::text
FROM s LEFT JOIN entries e ON e.sid = s.sid AND e.on_path = 1
    AND (%(max)s::bigint IS NULL OR (SELECT depth FROM leaf) <= %(max)s::bigint)
    AND (NOT (SELECT ok FROM kept) OR e.depth > %(after_depth)s)
ORDER BY e.depth
"""
_HEADLINE_WALK = f"""
WITH RECURSIVE up(tip, id, parent_id, is_user, hops) AS (
    SELECT e.id, e.id, e.parent_id, e.type = 'message' AND e.role IS NOT DISTINCT FROM 'user', 0
    FROM entries AS e WHERE e.id = ANY(%s::bigint[])
    UNION ALL
    SELECT up.tip, e.id, e.parent_id, e.type = 'message' AND e.role IS NOT DISTINCT FROM 'user',
        up.hops + 1
    FROM up JOIN entries AS e ON e.id = up.parent_id
    WHERE NOT up.is_user AND up.hops < %s
)
SELECT up.tip, up.is_user, {_ENTRY_OF_E}
FROM up JOIN entries AS e ON e.id = up.id
WHERE up.is_user OR up.id = up.tip
"""  # noqa: S608
_COPY_PATH = """
INSERT INTO entries (id, sid, parent_id, depth, mdepth, on_path, type, role, content, payload, ts,
    idem)
SELECT %(base)s + depth, %(sid)s, CASE WHEN depth = 1 THEN NULL ELSE %(base)s + depth - 1 END,
    depth, mdepth, 1, type, role, content, payload, ts, idem
FROM entries WHERE sid = %(src)s AND on_path = 1 AND depth <= %(upto)s
"""
# Copies take explicit ids (`base + depth`), so the sequence must be moved past them.
_RESERVE_IDS = "SELECT setval(pg_get_serial_sequence('entries', 'id'), %s)"
_MAX_ENTRY_ID = "SELECT coalesce(max(id), 0) FROM entries"
# See `sqlite/lookups.py`: only an assistant message without `tool_calls` completes a turn.
_LAST_COMPLETED_DEPTH = """
SELECT coalesce((
    SELECT min(depth) - 1 FROM entries
    WHERE sid = %(sid)s AND on_path = 1 AND type = 'message' AND depth > coalesce((
        SELECT max(depth) FROM entries
        WHERE sid = %(sid)s AND on_path = 1 AND type = 'message' AND role = 'assistant'
            AND payload->'tool_calls' IS NULL), 0)
), %(leaf)s)
"""
_REFERENCE_FIELDS = ("first_kept_entry_id", "target_id", "from_entry_id")
_SEARCH = """
SELECT s.session_id, s.session_key, e.role,
       ts_headline('simple', e.content, q,
           'StartSel=[, StopSel=], MaxWords=12, MinWords=4, MaxFragments=1, '
           'FragmentDelimiter=…'),
       sg_us(e.ts)
FROM entries e JOIN sessions s ON s.sid = e.sid, plainto_tsquery('simple', %(terms)s) AS q
WHERE e.search @@ q AND e.on_path = 1
  AND (%(prefix)s::text IS NULL OR starts_with(s.session_key, %(prefix)s::text))
  AND (%(tree)s::text IS NULL OR s.session_key = %(tree)s::text
       OR starts_with(s.session_key, %(forks)s::text))
ORDER BY ts_rank(e.search, q) DESC, e.id DESC
LIMIT %(limit)s
"""
_SCAN = """
SELECT s.session_id, s.session_key, e.role, e.content, sg_us(e.ts)
FROM entries e JOIN sessions s ON s.sid = e.sid
WHERE e.on_path = 1 AND e.type = 'message' AND e.role IN ('user', 'assistant')
  AND e.content LIKE %(like)s ESCAPE '\\'
  AND (%(prefix)s::text IS NULL OR starts_with(s.session_key, %(prefix)s::text))
  AND (%(tree)s::text IS NULL OR s.session_key = %(tree)s::text
       OR starts_with(s.session_key, %(forks)s::text))
ORDER BY e.id DESC
LIMIT %(limit)s
"""
_TOKEN = re.compile(r"\w+", re.UNICODE)
_INSERT_INBOX = (
    "INSERT INTO inbox (session_key, kind, text, parts, media, message_id, message_ids, source, "
    "message_type, reply_to, event_kind, internal, accepted_at, updated_at) "
    "VALUES (%s, %s, %s, %s::jsonb, %s::jsonb, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, "
    "sg_ts(%s), sg_ts(%s)) RETURNING id"
)
# `count_pending` and, when it is 0, `_INSERT_INBOX`, in one statement: (count, new id).
_INSERT_INBOX_IF_IDLE = (
    "WITH d AS (SELECT count(*) AS n FROM inbox WHERE session_key = %s AND state = 'pending'), "
    "ins AS (INSERT INTO inbox (session_key, kind, text, parts, media, message_id, message_ids, "
    "source, message_type, reply_to, event_kind, internal, accepted_at, updated_at) "
    "SELECT %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, "
    "sg_ts(%s), sg_ts(%s) FROM d WHERE d.n = 0 RETURNING id) "
    "SELECT d.n, (SELECT id FROM ins) FROM d"
)
# `_INSERT_INBOX_IF_IDLE` of a row already claimed by the turn that `_START_TURN` would write,
# in one statement: (count, new row's id, turn id). The row takes its id from the sequence
# first, so it can name its turn (whose id is the row's when free, as `start_turn`'s).
_START_ROW_IF_IDLE = (
    "WITH d AS (SELECT count(*) AS n FROM inbox WHERE session_key = %s AND state = 'pending'), "
    "ins AS (INSERT INTO inbox (id, state, turn_id, session_key, kind, text, parts, media, "
    "message_id, message_ids, source, message_type, reply_to, event_kind, internal, "
    "accepted_at, updated_at) "
    "SELECT n.id, 'claimed', n.id, %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s::jsonb, %s::jsonb, "
    "%s, %s, %s, %s, sg_ts(%s), sg_ts(%s) "
    "FROM (SELECT nextval('inbox_id_seq') AS id FROM d WHERE d.n = 0) n "
    "RETURNING id, session_key, source, accepted_at), "
    "t AS (INSERT INTO turns (id, session_key, session_id, inbox_id, state, source, "
    "accepted_at, started_at) SELECT id, session_key, %s, id, 'running', source, accepted_at, "
    "sg_ts(%s) FROM ins ON CONFLICT DO NOTHING RETURNING id) "
    "SELECT d.n, (SELECT id FROM ins), (SELECT id FROM t) FROM d"
)
_MERGE = (
    "UPDATE inbox SET text = %s, parts = %s::jsonb, media = %s::jsonb, message_id = %s, "
    "message_ids = %s::jsonb, source = %s::jsonb, message_type = %s, reply_to = %s, "
    "updated_at = sg_ts(%s) WHERE id = %s AND state = 'pending' AND kind = 'slot'"
)
_TRANSITION = (
    "UPDATE turns SET state = %(to)s, "
    "attempt = attempt + %(attempt)s, resumes = resumes + %(resume)s, "
    "reply = coalesce(%(reply)s, reply), error = coalesce(%(error)s, error), "
    "started_at = coalesce(sg_ts(%(started)s::bigint), started_at), "
    "finished_at = coalesce(sg_ts(%(finished)s::bigint), finished_at), "
    "delivered_at = coalesce(sg_ts(%(delivered)s::bigint), delivered_at) "
    "WHERE id = %(id)s AND state = ANY(%(allowed)s::text[])"
)
_INSERT_TURN = (
    "INSERT INTO turns (id, session_key, session_id, inbox_id, state, source, accepted_at, "
    "started_at) VALUES ({id}, %s, %s, %s, %s, %s::jsonb, sg_ts(%s), sg_ts(%s)) "
    "ON CONFLICT DO NOTHING RETURNING id"
)
# `insert_turn` with the row's id and `claim_inbox_row` in one statement: (turn id, rows
# claimed); (NULL, 0) when the id is taken (then the two go one after another).
_START_TURN = (
    "WITH t AS (INSERT INTO turns (id, session_key, session_id, inbox_id, state, source, "
    "accepted_at, started_at) VALUES (%(inbox)s, %(key)s, %(sid)s, %(inbox)s, %(state)s, "
    "%(source)s::jsonb, sg_ts(%(accepted)s), sg_ts(%(started)s)) "
    "ON CONFLICT DO NOTHING RETURNING id), "
    "c AS (UPDATE inbox SET state = 'claimed', turn_id = t.id FROM t "
    "WHERE inbox.id = %(inbox)s AND inbox.state = 'pending' RETURNING inbox.id) "
    "SELECT (SELECT id FROM t), (SELECT count(*) FROM c)"
)
_FINISH_REPLY = "SELECT sg_finish_reply(%s, %s, %s, %s)"
_RESET_RESTART_COUNT = "DELETE FROM restart_counts WHERE session_key = %s"
_HAS_PENDING = "SELECT 1 FROM inbox WHERE session_key = %s AND state = 'pending' LIMIT 1"
_ADD_TOMBSTONE = {
    True: "INSERT INTO tombstones (session_key, deleted_at, reason) VALUES (%s, sg_ts(%s), %s) "
    "ON CONFLICT (session_key) DO UPDATE SET deleted_at = excluded.deleted_at",
    False: "INSERT INTO tombstones (session_key, deleted_at, reason) VALUES (%s, sg_ts(%s), %s) "
    "ON CONFLICT (session_key) DO NOTHING",
}
_ROUTE = (
    "SELECT data::text, platform, chat_type, chat_id, thread_id, participant_id FROM routes "
    "WHERE session_key = %s"
)
_PUT_ROUTE_SEEN = (
    "SELECT sg_put_route_seen(%(seen)s::jsonb, %(session_key)s, %(session_id)s, "
    "%(updated_at)s, %(pinned_at)s::bigint, %(archived_at)s::bigint, %(suspended)s, "
    "%(resume_pending)s, %(label)s, %(data)s::jsonb)"
)
_ROUTE_SEEN = "SELECT sg_route_seen(%s::jsonb, %s)"
_LOCK_KEY = "SELECT pg_advisory_xact_lock(hashtextextended('route:' || %s, 0))"
_META_SET = (
    "INSERT INTO meta (key, value) VALUES (%s, %s) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


# `jsonb`'s own spacing, from one reused encoder (`json.dumps` with options builds one a call).
_JSONB_TEXT = json_encoder()


def _jsonb_order(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonb_order(value[k]) for k in sorted(value, key=_jsonb_key)}
    if isinstance(value, list):
        return [_jsonb_order(item) for item in value]
    return value


def _jsonb_key(key: str) -> tuple[int, bytes]:
    raw = key.encode()
    return len(raw), raw


def _tail_params(
    session_id: str, max_depth: int | None, after_id: int, after_depth: int
) -> dict[str, Any]:
    return {"id": session_id, "max": max_depth, "after": after_id, "after_depth": after_depth}


def _route_data(entry: SessionEntry) -> str:
    """The route's JSON as `jsonb` gives it back (keys by length, then bytes; `", "` and
    `": "`), told to the decoded entries so the next read of it is not decoded again, and
    sent as it is: `jsonb` takes any order and spacing. A text that comes back otherwise (a
    float's digits) is simply decoded."""
    text = _JSONB_TEXT(_jsonb_order(entry.to_dict(compact=True)))
    remember_entry(text, entry)
    return text


def _seen_data(entry: SessionEntry) -> str:
    """A seen route's JSON, for the server to compare as `jsonb`: any key order does, and
    nothing will decode it, so it is not told to the decoded entries as `_route_data` is."""
    return dumps(entry.to_dict(compact=True))


def _route_values(entry: SessionEntry, parts: KeyParts | None) -> dict[str, Any]:
    return {
        "session_key": entry.session_key,
        "session_id": entry.session_id,
        "platform": parts.platform if parts else (str(entry.platform) if entry.platform else None),
        "chat_type": parts.chat_type if parts else str(entry.chat_type),
        "chat_id": parts.chat_id if parts else None,
        "thread_id": parts.thread_id if parts else None,
        "participant_id": parts.participant_id if parts else None,
        "updated_at": to_us(entry.updated_at),
        "pinned_at": _us(entry.pinned_at),
        "archived_at": _us(entry.archived_at),
        "suspended": bool(entry.suspended),
        "resume_pending": bool(entry.resume_pending),
        "label": entry.label,
        "data": _route_data(entry),
    }


def _sure_update(old: SessionEntry, new: SessionEntry, values: dict[str, Any]) -> bool:
    """Whether `_PUT_ROUTE` of `new` over the locked route `old` touches exactly that row and
    cannot be refused: same session, same label (so no other route's), and no NUL, which
    `jsonb` refuses (the text columns' NULs psycopg refuses before sending)."""
    return (
        old.session_id == new.session_id
        and old.label == new.label
        and "\\u0000" not in values["data"]
    )


def _context_event(r: Sequence[Any]) -> dict[str, Any]:
    """An entry as `load_context_events` gives it, from (id, type, role, content, payload)."""
    event = {"id": r[0], "type": r[1], "role": r[2], "content": r[3]}
    return event if r[4] is None else {**event, **loads(r[4])}


def _us(value: datetime | None) -> int | None:
    return None if value is None else to_us(value)


def _inbox_values(
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
) -> tuple[Any, ...]:
    return (
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
        bool(internal),
        at,
        at,
    )


def _inbox(raw: tuple[Any, ...]) -> InboxRow:
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


def _turn(raw: tuple[Any, ...]) -> TurnRow:
    return TurnRow(
        id=raw[0],
        session_key=raw[1],
        session_id=raw[2],
        inbox_id=raw[3],
        state=TurnState(raw[4]),
        attempt=raw[5],
        resumes=raw[6],
        source=loads(raw[7]),
        reply=raw[8],
        error=raw[9],
        accepted_at=raw[10],
        started_at=raw[11],
        finished_at=raw[12],
        delivered_at=raw[13],
    )


def _append_first_params(session_id: str, record: EntryRecord) -> tuple[Any, ...]:
    return (
        session_id,
        int(record.type == "message"),
        record.type,
        record.role,
        record.content,
        dumps(record.payload) if record.payload else None,
        record.ts,
        record.idem,
    )


def _storable(record: EntryRecord) -> bool:
    """Whether `text` and `jsonb` take the record as it is: UTF-8 without NUL (the server
    refuses NUL in the statement; a lone surrogate fails before it is sent)."""
    texts = [record.content or ""]
    if record.payload:
        texts.append(json.dumps(record.payload, ensure_ascii=False, default=str))
    for text in texts:
        if "\x00" in text or "\\u0000" in text:
            return False
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


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


class PostgresTx(
    PostgresDeliveries,
    PostgresOutbox,
    PostgresPlatformState,
    PostgresErasure,
    PostgresJobs,
    PostgresApprovals,
    PostgresTakeovers,
):
    """The protocol's `Tx` over one psycopg connection (the caller holds its lock); what
    platform adapters keep is in `platform_state.py`."""

    __slots__ = (
        "_context_ahead",
        "_pending_ahead",
        "_prefetched",
        "_seen",
        "_seen_lost",
        "_sure",
        "_wire",
        "conn",
        "in_transaction",
        "locked_keys",
        "locked_lanes",
        "locked_routes",
        "missing_routes",
        "notes",
    )

    def __init__(self, conn: psycopg.Connection[Any], wire: Wire | None = None) -> None:
        self.conn = conn
        # The writer's pipeline (`_pipeline.py`), and its cursor for writes nothing reads the
        # answer of; None on a reader's connection.
        self._wire = wire
        self._sure = None if wire is None else wire.sure
        # Inside `PostgresDatabase.transaction()` (not a plain read): route reads lock.
        self.in_transaction = False
        # Routes this transaction holds locked, as read (`_route`); emptied by the database
        # when the transaction ends or a savepoint rolls back.
        self.locked_routes: dict[str, tuple[Any, ...]] = {}
        # Keys of routes that did not exist, whose advisory lock this transaction holds.
        self.locked_keys: set[str] = set()
        # Those of them still missing when read under that lock: no other transaction can
        # make them before this one ends, so a read again (the route's creation reads it
        # once more) is answered here, until this transaction writes the route.
        self.missing_routes: set[str] = set()
        # Lanes whose writer lock (`lock_lane`) this transaction holds.
        self.locked_lanes: set[str] = set()
        # Route reads sent ahead (`prefetch_route`), answered with a later statement's.
        self._prefetched: dict[str, psycopg.Cursor[Any]] = {}
        # Routes as the caller saw them written (`expect_route`), not yet checked at the
        # server; and whether a savepoint rolled back since one was (which fails the commit).
        self._seen: dict[str, SessionEntry] = {}
        self._seen_lost: bool | None = None
        # A context read sent with a transaction's commit (`prefetch_context`), for the read
        # right after it; dropped when the next transaction begins.
        self._context_ahead: tuple[Any, psycopg.Cursor[Any]] | None = None
        # The same for the lane worker's look for more work after an outcome (`has_pending`).
        self._pending_ahead: tuple[str, psycopg.Cursor[Any]] | None = None
        # What the open transaction changed, for `PostgresDatabase.transaction` to tell after
        # commit.
        self.notes: list[object] = []

    def note(self, change: object) -> None:
        self.notes.append(change)

    def forget_locks(self) -> None:
        """The transaction ended, or a savepoint rolled back (and its locks went with it)."""
        if not self.in_transaction:
            self._seen.clear()
            self._seen_lost = None
        elif self._seen_lost is not None:
            # What the savepoint wrote over a seen route is undone, and what was decided from
            # that route can no longer be checked: the commit is refused (`check_seen`).
            self._seen_lost = True
        self.locked_routes.clear()
        self.locked_keys.clear()
        self.missing_routes.clear()
        self.locked_lanes.clear()
        self._prefetched.clear()

    # A raw statement, for diagnostics and the store suite's checks of stored rows; the store
    # above never calls it (it is not part of the protocol).
    def execute(self, sql: str, params: Any = None) -> psycopg.Cursor[Any]:
        return self.conn.execute(sql, params)

    def _one(self, sql: str, params: Any = None) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(sql, params).fetchone()
        return row

    def _all(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def _count(self, sql: str, params: Any = None) -> int:
        return self.conn.execute(sql, params).rowcount

    def _send_sure(self, sql: str, params: Any = None) -> None:
        """A write that cannot fail on its input (the caller checked it): in a transaction it
        is answered with the next statement that is read, or the commit."""
        if self._sure is None:
            self.conn.execute(sql, params)
        else:
            self._sure.execute(sql, params)

    # ------------------------------------------------------------------ routes

    # Several instances write one database under READ COMMITTED, where SQLite's one writer
    # lock serialised everything. A read of a route inside a write transaction therefore
    # locks it (`FOR UPDATE` waits for a concurrent writer and then reads its commit), and a
    # route that does not exist yet is locked by key (an advisory lock to the commit), so two
    # instances routing a new conversation at once cannot both create it.
    #
    # A route read so is kept until the transaction ends (or a savepoint rolls back, or this
    # transaction writes it): the row lock keeps every other writer off it meanwhile, so a
    # second read would only repeat the first.
    def _route(self, session_key: str) -> tuple[Any, ...] | None:
        """(data, platform, chat_type, chat_id, thread_id, participant_id) of the route."""
        if not self.in_transaction:
            return self._one(_ROUTE, (session_key,))
        row = self.locked_routes.get(session_key)
        if row is not None or session_key in self.missing_routes:
            return row
        ahead = self._prefetched.pop(session_key, None)
        if ahead is not None:
            row = ahead.fetchone()
        else:
            row = self._one(_ROUTE + " FOR UPDATE", (session_key,))
        if row is None and session_key not in self.locked_keys:
            # Read again under the key's lock (to the commit): a route made meanwhile shows.
            self.conn.execute(_LOCK_KEY, (session_key,))
            self.locked_keys.add(session_key)
            row = self._one(_ROUTE + " FOR UPDATE", (session_key,))
        if row is not None:
            self.locked_routes[session_key] = row
        elif session_key in self.locked_keys:
            self.missing_routes.add(session_key)
        return row

    def prefetch_route(self, session_key: str) -> None:
        if (
            self._wire is None
            or not self.in_transaction
            or session_key in self.locked_routes
            or session_key in self._prefetched
        ):
            return
        ahead = self._wire.later()
        ahead.execute(_ROUTE + " FOR UPDATE", (session_key,))
        self._prefetched[session_key] = ahead

    def expect_route(self, entry: SessionEntry) -> None:
        key = entry.session_key
        if (
            self._wire is None
            or not self.in_transaction
            or key in self.locked_routes
            or key in self.missing_routes
        ):
            return
        self._seen[key] = entry
        if self._seen_lost is None:
            self._seen_lost = False

    def _check_seen(self, session_key: str) -> None:
        """The seen route, if any, checked at the server now (with the next answer read), and
        the route read as usual from here on."""
        seen = self._seen.pop(session_key, None)
        if seen is not None:
            self._send_seen_check(seen)

    def _send_seen_check(self, seen: SessionEntry) -> None:
        self._send_sure(_ROUTE_SEEN, (_seen_data(seen), seen.session_key))

    def check_seen(self) -> None:
        """Before the commit: the seen routes nothing wrote over are checked too; raises
        `RouteChangedError` (the caller rolls back) when a savepoint rolled back since a route
        was seen."""
        if self._seen_lost:
            raise RouteChangedError("a savepoint rolled back over a route written as seen")
        for key in list(self._seen):
            self._check_seen(key)

    def get_route(self, session_key: str) -> SessionEntry | None:
        seen = self._seen.get(session_key)
        if seen is not None:
            return seen
        row = self._route(session_key)
        return None if row is None else decoded_entry(row[0])

    def get_route_with_parts(self, session_key: str) -> tuple[SessionEntry, KeyParts] | None:
        self._check_seen(session_key)
        row = self._route(session_key)
        if row is None:
            return None
        return decoded_entry(row[0]), KeyParts(row[1] or "", row[2], row[3], row[4], row[5])

    def get_route_parts(self, session_key: str) -> KeyParts | None:
        self._check_seen(session_key)
        row = self._route(session_key)
        return None if row is None else KeyParts(row[1] or "", row[2], row[3], row[4], row[5])

    def upsert_route(self, entry: SessionEntry, parts: KeyParts | None) -> None:
        self._check_seen(entry.session_key)
        self.locked_routes.pop(entry.session_key, None)
        self.missing_routes.discard(entry.session_key)
        self.conn.execute(_UPSERT_ROUTE, _route_values(entry, parts))

    def put_route(self, entry: SessionEntry, parts: KeyParts | None = None) -> None:
        """One UPDATE when the key already routes to this session id, else the upsert."""
        values = _route_values(entry, parts)
        seen = self._seen.pop(entry.session_key, None)
        if seen is not None:
            if _sure_update(seen, entry, values):
                self._send_sure(_PUT_ROUTE_SEEN, {**values, "seen": _seen_data(seen)})
                return
            self._send_seen_check(seen)
        self.missing_routes.discard(entry.session_key)
        locked = self.locked_routes.pop(entry.session_key, None)
        if locked is not None and _sure_update(decoded_entry(locked[0]), entry, values):
            self._send_sure(_PUT_ROUTE, values)
            return
        if not self._count(_PUT_ROUTE, values):
            if parts is None:
                parts = self.get_route_parts(entry.session_key)
            self.upsert_route(entry, parts)

    def delete_route(self, session_key: str) -> bool:
        self._check_seen(session_key)
        self.locked_routes.pop(session_key, None)
        return self._count("DELETE FROM routes WHERE session_key = %s", (session_key,)) > 0

    def route_by_session_id(self, session_id: str) -> SessionEntry | None:
        row = self._one("SELECT data::text FROM routes WHERE session_id = %s", (session_id,))
        return None if row is None else decoded_entry(row[0])

    def iter_routes(self, *, since: datetime | None = None) -> Iterator[SessionEntry]:
        if since is None:
            rows = self._all("SELECT data::text FROM routes ORDER BY updated_at DESC")
        else:
            rows = self._all(
                "SELECT data::text FROM routes WHERE updated_at >= sg_ts(%s) "
                "ORDER BY updated_at DESC",
                (to_us(since),),
            )
        return (decoded_entry(r[0]) for r in rows)

    def count_routes(self) -> int:
        row = self._one("SELECT count(*) FROM routes")
        assert row is not None
        return int(row[0])

    def list_route_page(
        self,
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
        params = {
            "archived": archived,
            "since": _us(since),
            "platform": platform,
            "pinned": pinned,
            "unread": unread,
            "key_prefix": key_prefix,
            "limit": limit,
            "offset": offset,
        }
        rows = self._all(_PAGE, params)
        total = self._one(_PAGE_COUNT, params)
        assert total is not None
        return [decoded_entry(r[0]) for r in rows], int(total[0])

    def label_taken(self, label: str, *, except_key: str | None = None) -> bool:
        row = self._one(
            "SELECT 1 FROM routes WHERE label = %s AND session_key IS DISTINCT FROM %s",
            (label, except_key),
        )
        return row is not None

    # ------------------------------------------------------------------ tombstones, aliases

    def tombstone_reason(self, session_key: str) -> str | None:
        row = self._one("SELECT reason FROM tombstones WHERE session_key = %s", (session_key,))
        return None if row is None else str(row[0])

    def add_tombstone(self, session_key: str, *, reason: str, at: int) -> None:
        # A deleted key's tombstone is renewed; any other (incognito) keeps its first.
        self.conn.execute(_ADD_TOMBSTONE[reason == "deleted"], (session_key, at, reason))

    def alias_of(self, platform: str, alias: str) -> str | None:
        row = self._one(
            "SELECT canonical FROM identity_aliases WHERE platform = %s AND alias = %s",
            (platform, alias),
        )
        return None if row is None else str(row[0])

    def is_alias_target(self, platform: str, ident: str) -> bool:
        row = self._one(
            "SELECT 1 FROM identity_aliases WHERE platform = %s AND canonical = %s LIMIT 1",
            (platform, ident),
        )
        return row is not None

    def keys_a_lane(self, platform: str, ident: str) -> bool:
        row = self._one(
            "SELECT 1 FROM routes WHERE platform = %s "
            "AND ((chat_type = 'dm' AND chat_id = %s) OR participant_id = %s) LIMIT 1",
            (platform, ident, ident),
        )
        return row is not None

    def insert_alias(self, platform: str, alias: str, canonical: str, *, at: int) -> None:
        self.conn.execute(
            "INSERT INTO identity_aliases (platform, alias, canonical, created_at) "
            "VALUES (%s, %s, %s, sg_ts(%s)) ON CONFLICT DO NOTHING",
            (platform, alias, canonical, at),
        )

    # ------------------------------------------------------------------ sessions and tree

    def get_session_row(self, session_id: str) -> SessionRow | None:
        row = self._one(_GET_SESSION, (session_id,))
        return None if row is None else SessionRow(*row)

    def unused_session_id(self, make: Callable[[], str]) -> str:
        for _ in range(16):
            candidate = make()
            if self._one("SELECT 1 FROM sessions WHERE session_id = %s", (candidate,)) is None:
                return candidate
        raise RuntimeError("could not draw an unused session id")

    def create_session_row(
        self,
        *,
        session_id: str,
        session_key: str | None,
        parent_session_id: str | None,
        started_at: int,
        header: dict[str, Any],
    ) -> SessionRow:
        text = dumps(header)
        row = self._one(
            "INSERT INTO sessions (session_id, session_key, parent_session_id, started_at, "
            "header) VALUES (%s, %s, %s, sg_ts(%s), %s::jsonb) RETURNING sid",
            (session_id, session_key, parent_session_id, started_at, text),
        )
        assert row is not None
        return SessionRow(
            row[0], session_id, session_key, parent_session_id, started_at, None, None, None,
            0, 0, 0, text,
        )  # fmt: skip

    def create_fresh_session_row(
        self,
        make_id: Callable[[], str],
        *,
        session_key: str | None,
        parent_session_id: str | None,
        started_at: int,
        header: Callable[[str], dict[str, Any]],
    ) -> str:
        for _ in range(16):
            session_id = make_id()
            row = self._one(
                "INSERT INTO sessions (session_id, session_key, parent_session_id, started_at, "
                "header) VALUES (%s, %s, %s, sg_ts(%s), %s::jsonb) "
                "ON CONFLICT (session_id) DO NOTHING RETURNING sid",
                (session_id, session_key, parent_session_id, started_at, dumps(header(session_id))),
            )
            if row is not None:
                return session_id
        raise RuntimeError("could not draw an unused session id")

    def save_counters(self, sid: int, counters: dict[str, Any]) -> None:
        self.conn.execute(
            "UPDATE sessions SET counters = %s::jsonb WHERE sid = %s", (dumps(counters), sid)
        )

    def load_counters(self, sid: int) -> dict[str, Any] | None:
        raw = self._one("SELECT counters::text FROM sessions WHERE sid = %s", (sid,))
        return None if raw is None or raw[0] is None else dict(loads(raw[0]))

    def end_session_row(self, sid: int, *, at: int | None, reason: str | None) -> None:
        self.conn.execute(
            "UPDATE sessions SET ended_at = sg_ts(%s::bigint), end_reason = %s WHERE sid = %s",
            (at, reason, sid),
        )

    def has_any_sessions(self) -> bool:
        return self._one("SELECT 1 FROM sessions LIMIT 1") is not None

    def key_has_history(self, session_key: str) -> bool:
        row = self._one("SELECT 1 FROM sessions WHERE session_key = %s LIMIT 1", (session_key,))
        return row is not None

    def session_ids_of_key(self, session_key: str) -> list[str]:
        rows = self._all(
            "SELECT session_id FROM sessions WHERE session_key = %s ORDER BY started_at DESC",
            (session_key,),
        )
        return [r[0] for r in rows]

    def sessions_of_lane(self, session_key: str, session_id: str) -> list[tuple[int, str, str]]:
        rows = self._all(
            "SELECT sid, session_id, header::text FROM sessions "
            "WHERE session_key = %s OR session_id = %s",
            (session_key, session_id),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def delete_session_rows(self, sid: int) -> None:
        self.conn.execute("DELETE FROM entries WHERE sid = %s", (sid,))
        self.conn.execute("DELETE FROM tips WHERE sid = %s", (sid,))
        self.conn.execute("DELETE FROM sessions WHERE sid = %s", (sid,))

    def insert_entries(
        self, session: SessionRow, records: Sequence[EntryRecord]
    ) -> tuple[list[int | None], SessionRow]:
        leaf, depth, mdepth = session.leaf_id, session.leaf_depth, session.leaf_mdepth
        ids: list[int | None] = []
        execute = self.conn.execute
        sid = session.sid
        for rec in records:
            is_message = rec.type == "message"
            payload = dumps(rec.payload) if rec.payload else None
            row = execute(
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
            ).fetchone()
            if row is None:
                ids.append(None)
                continue
            leaf = row[0]
            depth += 1
            mdepth += is_message
            ids.append(leaf)
        if leaf != session.leaf_id:
            session = _replace_leaf(session, leaf, depth, mdepth, session.generation)
        return ids, session

    def append_entries(
        self, session_id: str, records: Sequence[EntryRecord]
    ) -> tuple[SessionRow, list[int | None]] | None:
        if not records:
            session = self.get_session_row(session_id)
            return None if session is None else (session, [])
        first = records[0]
        is_message = first.type == "message"
        raw = self._one(_APPEND_FIRST, _append_first_params(session_id, first))
        if raw is None:
            return None
        session = SessionRow(*raw[:12])
        new_id: int | None = raw[12]
        if new_id is None:
            after = session
        else:
            after = _replace_leaf(
                session,
                new_id,
                session.leaf_depth + 1,
                session.leaf_mdepth + is_message,
                session.generation,
            )
        rest, _ = self.insert_entries(after, records[1:])
        return session, [new_id, *rest]

    def sends_ahead(self) -> bool:
        return self._wire is not None and self.in_transaction

    def _sent_ahead(self, sql: str, params: Any) -> psycopg.Cursor[Any] | None:
        """`sql` on a cursor whose answer is read after the commit (`Wire.later`), in the
        writer's transaction; None elsewhere, where the caller runs it now."""
        if self._wire is None or not self.in_transaction:
            return None
        cursor = self._wire.later()
        cursor.execute(sql, params)
        return cursor

    def append_entry_ahead(
        self, session_id: str, record: EntryRecord
    ) -> Callable[[], tuple[SessionRow, int | None] | None] | None:
        if not _storable(record):
            return None
        ahead = self._sent_ahead(_APPEND_FIRST, _append_first_params(session_id, record))
        if ahead is None:
            return None

        @functools.cache
        def appended() -> tuple[SessionRow, int | None] | None:
            raw = ahead.fetchone()
            return None if raw is None else (SessionRow(*raw[:12]), raw[12])

        return appended

    def entry_row(self, entry_id: int) -> tuple[Any, ...] | None:
        return self._one(f"SELECT {_ENTRY} FROM entries WHERE id = %s", (entry_id,))  # noqa: S608

    def all_entries(self, sid: int) -> list[tuple[Any, ...]]:
        return self._all(f"SELECT {_ENTRY} FROM entries WHERE sid = %s ORDER BY id", (sid,))  # noqa: S608

    def tips_with_headlines(
        self, tip_ids: list[int], max_hops: int
    ) -> dict[int, tuple[tuple[Any, ...], tuple[Any, ...]]]:
        tips: dict[int, tuple[Any, ...]] = {}
        users: dict[int, tuple[Any, ...]] = {}
        for tip, is_user, *row in self._all(_HEADLINE_WALK, (tip_ids, max_hops)):
            if row[0] == tip:
                tips[tip] = tuple(row)
            if is_user:
                users[tip] = tuple(row)
        return {tip: (row, users.get(tip, row)) for tip, row in tips.items()}

    def load_path(
        self, sid: int, *, limit: int | None = None, messages_only: bool = True
    ) -> list[tuple[Any, ...]]:
        kind = " AND type = 'message'" if messages_only else ""
        if limit is None:
            return self._all(
                f"SELECT {_ENTRY} FROM entries WHERE sid = %s AND on_path = 1{kind} "  # noqa: S608
                "ORDER BY depth",
                (sid,),
            )
        rows = self._all(
            f"SELECT {_ENTRY} FROM entries WHERE sid = %s AND on_path = 1{kind} "  # noqa: S608
            "ORDER BY depth DESC LIMIT %s",
            (sid, limit),
        )
        rows.reverse()
        return rows

    def user_turns_above(self, sid: int, depth: int) -> list[tuple[Any, ...]]:
        return self._all(
            "SELECT id, parent_id, role, content, payload::text, mdepth FROM entries "
            "WHERE sid = %s AND on_path = 1 AND type = 'message' AND depth > %s "
            "ORDER BY depth DESC",
            (sid, depth),
        )

    def last_completed_depth(self, sid: int, leaf_depth: int) -> int:
        row = self._one(_LAST_COMPLETED_DEPTH, {"sid": sid, "leaf": leaf_depth})
        assert row is not None
        return int(row[0])

    def move_leaf(
        self, session: SessionRow, target_id: int | None, *, release_keys: bool = False
    ) -> SessionRow:
        old_leaf = session.leaf_id
        chain: list[int] = []
        depth = mdepth = 0
        execute = self.conn.execute
        if target_id is not None:
            row = self.entry_row(target_id)
            if row is None or row[10] != session.sid:
                raise LookupError(target_id)
            depth, mdepth = row[7], row[8]
            cursor: tuple[Any, ...] | None = row
            while cursor is not None and not cursor[9]:
                chain.append(cursor[0])
                cursor = self.entry_row(cursor[1]) if cursor[1] is not None else None
            common_depth = cursor[7] if cursor is not None else 0
        else:
            common_depth = 0
        if release_keys:
            execute(
                "UPDATE entries SET idem = NULL "
                "WHERE sid = %s AND on_path = 1 AND depth > %s AND idem IS NOT NULL",
                (session.sid, common_depth),
            )
        execute(
            "UPDATE entries SET on_path = 0 WHERE sid = %s AND on_path = 1 AND depth > %s",
            (session.sid, common_depth),
        )
        if chain:
            execute("UPDATE entries SET on_path = 1 WHERE id = ANY(%s::bigint[])", (chain,))
        if target_id is not None:
            execute("DELETE FROM tips WHERE sid = %s AND entry_id = %s", (session.sid, target_id))
        if old_leaf is not None and old_leaf != target_id:
            old = self.entry_row(old_leaf)
            assert old is not None
            has_child = self._one(
                "SELECT 1 FROM entries WHERE sid = %s AND depth = %s AND parent_id = %s LIMIT 1",
                (session.sid, old[7] + 1, old_leaf),
            )
            if not old[9] and has_child is None:
                execute(
                    "INSERT INTO tips (sid, entry_id) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    (session.sid, old_leaf),
                )
        execute("UPDATE sessions SET generation = generation + 1 WHERE sid = %s", (session.sid,))
        return _replace_leaf(session, target_id, depth, mdepth, session.generation + 1)

    def release_off_path_keys(self, sid: int, keys: Sequence[str]) -> None:
        if keys:
            self.conn.execute(
                "UPDATE entries SET idem = NULL "
                "WHERE sid = %s AND idem = ANY(%s::text[]) AND on_path = 0",
                (sid, list(keys)),
            )

    def list_tips(self, sid: int) -> list[int]:
        rows = self._all("SELECT entry_id FROM tips WHERE sid = %s ORDER BY entry_id", (sid,))
        return [r[0] for r in rows]

    def latest_reset_depth(self, sid: int) -> int:
        row = self._one(
            "SELECT max(depth) FROM entries WHERE sid = %s AND on_path = 1 AND type = 'reset'",
            (sid,),
        )
        return int(row[0] or 0) if row else 0

    def copy_path(self, source: SessionRow, target: SessionRow, upto_depth: int) -> SessionRow:
        if upto_depth <= 0:
            return target
        # The sequence's own position (not max(id)) is the base: ids handed to transactions
        # that have not committed yet are above max(id), and must not be taken here.
        found = self._one("SELECT nextval(pg_get_serial_sequence('entries', 'id'))")
        assert found is not None
        base = int(found[0])
        self.conn.execute(_RESERVE_IDS, (base + upto_depth,))
        self.conn.execute(
            _COPY_PATH, {"base": base, "sid": target.sid, "src": source.sid, "upto": upto_depth}
        )
        self._remap_references(source.sid, target.sid, base)
        leaf = self.entry_row(base + upto_depth)
        assert leaf is not None
        return _replace_leaf(target, leaf[0], leaf[7], leaf[8], target.generation)

    def _remap_references(self, source_sid: int, sid: int, base: int) -> None:
        rows = self._all(
            "SELECT id, payload::text FROM entries WHERE sid = %s AND id > %s "
            "AND payload IS NOT NULL AND type IN ('compaction', 'reset', 'label', "
            "'branch_summary')",
            (sid, base),
        )
        for entry_id, text in rows:
            payload = loads(text)
            changed = False
            for name in _REFERENCE_FIELDS:
                ref = payload.get(name)
                source = self.entry_row(ref) if isinstance(ref, int) else None
                if source is None or source[10] != source_sid or not source[9]:
                    continue
                if base + source[7] < entry_id:
                    payload[name] = base + source[7]
                    changed = True
            if changed:
                self.conn.execute(
                    "UPDATE entries SET payload = %s::jsonb WHERE id = %s",
                    (dumps(payload), entry_id),
                )

    def load_context_events(self, sid: int) -> list[dict[str, Any]]:
        rows = self._all(
            "SELECT id, type, role, content, payload::text FROM entries "
            "WHERE sid = %s AND on_path = 1 ORDER BY depth",
            (sid,),
        )
        return [_context_event(r) for r in rows]

    def prefetch_context(
        self, session_id: str, max_depth: int | None, after: tuple[int, int] | None
    ) -> None:
        if self._wire is None or not self.in_transaction:
            return
        ahead = self._wire.later()
        if after is None:
            ahead.execute(_SESSION_CONTEXT, {"id": session_id, "max": max_depth})
        else:
            ahead.execute(_SESSION_CONTEXT_TAIL, _tail_params(session_id, max_depth, *after))
        self._context_ahead = ((session_id, max_depth, after), ahead)

    def _read_ahead(self, asked: tuple[Any, ...]) -> list[tuple[Any, ...]] | None:
        """The rows of the context read sent ahead when it is the one asked, else None."""
        ahead, self._context_ahead = self._context_ahead, None
        if ahead is None or ahead[0] != asked or self.in_transaction:
            return None
        return ahead[1].fetchall()

    def prefetch_pending(self, session_key: str) -> None:
        if self._wire is None or not self.in_transaction:
            return
        ahead = self._wire.later()
        ahead.execute(_HAS_PENDING, (session_key,))
        self._pending_ahead = (session_key, ahead)

    def drop_reads_ahead(self) -> None:
        """A transaction begins (or the one that sent them rolled back): what it may write
        would not be in the reads sent ahead."""
        self._context_ahead = self._pending_ahead = None

    def session_context_events(
        self, session_id: str, max_depth: int | None = None
    ) -> tuple[int, list[dict[str, Any]]] | None:
        rows = self._read_ahead((session_id, max_depth, None))
        if rows is None:
            rows = self._all(_SESSION_CONTEXT, {"id": session_id, "max": max_depth})
        if not rows:
            return None
        return int(rows[0][0]), [_context_event(r[1:]) for r in rows if r[1] is not None]

    def session_context_tail(
        self, session_id: str, max_depth: int | None, after_id: int, after_depth: int
    ) -> tuple[int, list[dict[str, Any]], bool] | None:
        rows = self._read_ahead((session_id, max_depth, (after_id, after_depth)))
        if rows is None:
            params = _tail_params(session_id, max_depth, after_id, after_depth)
            rows = self._all(_SESSION_CONTEXT_TAIL, params)
        if not rows:
            return None
        events = [_context_event(r[2:]) for r in rows if r[2] is not None]
        return int(rows[0][0]), events, bool(rows[0][1])

    def keyed_path_messages(self, sid: int, prefix: str) -> list[tuple[str, tuple[Any, ...]]]:
        # `starts_with`, not a range: under the database's collation `:` and `;` need not be
        # neighbours, as they are in SQLite's byte order.
        rows = self._all(
            f"SELECT idem, {_ENTRY} FROM entries WHERE sid = %s AND on_path = 1 "  # noqa: S608
            "AND type = 'message' AND starts_with(idem, %s)",
            (sid, prefix),
        )
        return [(row[0], tuple(row[1:])) for row in rows]

    # ------------------------------------------------------------------ search

    # The `tsvector` column is written with its row, in the same transaction: there is no
    # side index to fall behind, go stale or rebuild, so its maintenance calls do nothing.

    def search_is_stale(self) -> bool:
        return False

    def mark_search_stale(self, reason: BaseException) -> None:
        log.warning("full-text search failed", extra={"error": str(reason)})

    def catch_up_search(self) -> int:
        return 0

    def drop_session_from_search(self, sid: int) -> None:
        return None

    def lower_search_cursor(self) -> None:
        return None

    def search_index(
        self, query: str, limit: int, *, key_prefix: str | None = None, tree_of: str | None = None
    ) -> list[dict[str, Any]]:
        terms = _TOKEN.findall(query)
        if not terms:
            return []
        params = {
            "terms": " ".join(terms[:32]),
            "prefix": key_prefix,
            "limit": limit,
            **_tree(tree_of),
        }
        return [_hit(r) for r in self._all(_SEARCH, params)]

    def search_scan(
        self, query: str, limit: int, *, key_prefix: str | None = None, tree_of: str | None = None
    ) -> list[dict[str, Any]]:
        if not _TOKEN.findall(query):
            return []
        like = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        params = {"like": like, "prefix": key_prefix, "limit": limit, **_tree(tree_of)}
        return [_hit(r, scan=True) for r in self._all(_SCAN, params)]

    def rebuild_search_index(self) -> int:
        self.conn.execute("REINDEX INDEX entries_search")
        row = self._one("SELECT count(*) FROM entries WHERE search IS NOT NULL")
        return int(row[0]) if row else 0

    def search_index_status(self) -> dict[str, Any]:
        row = self._one(_MAX_ENTRY_ID)
        return {"stale": False, "cursor": int(row[0]) if row else 0, "pending": 0}

    def search_integrity_check(self) -> str | None:
        return None

    # ------------------------------------------------------------------ inbox

    def get_inbox_row(self, inbox_id: int) -> InboxRow | None:
        raw = self._one(f"SELECT {_INBOX} FROM inbox WHERE id = %s", (inbox_id,))  # noqa: S608
        return None if raw is None else _inbox(raw)

    def pending_slot(self, session_key: str) -> InboxRow | None:
        raw = self._one(
            f"SELECT {_INBOX} FROM inbox "  # noqa: S608
            "WHERE session_key = %s AND state = 'pending' AND kind = 'slot'",
            (session_key,),
        )
        return None if raw is None else _inbox(raw)

    def next_pending(self, session_key: str) -> InboxRow | None:
        raw = self._one(
            f"SELECT {_INBOX} FROM inbox "  # noqa: S608
            "WHERE session_key = %s AND state = 'pending' "
            "ORDER BY CASE kind WHEN 'slot' THEN 0 ELSE 1 END, id LIMIT 1",
            (session_key,),
        )
        return None if raw is None else _inbox(raw)

    def insert_inbox_row(
        self,
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
        row = self._one(
            _INSERT_INBOX,
            _inbox_values(
                session_key, kind, part, media, message_id, source, message_type, reply_to,
                event_kind, internal, at,
            ),
        )  # fmt: skip
        assert row is not None
        return int(row[0])

    def insert_inbox_row_if_idle(
        self,
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
    ) -> tuple[int, int | None]:
        values = _inbox_values(
            session_key, kind, part, media, message_id, source, message_type, reply_to,
            event_kind, internal, at,
        )  # fmt: skip
        row = self._one(_INSERT_INBOX_IF_IDLE, (session_key, *values))
        assert row is not None
        return int(row[0]), row[1]

    def start_row_if_idle(
        self,
        *,
        session_id: str,
        started_at: int,
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
    ) -> tuple[int, int | None, int | None]:
        values = _inbox_values(
            session_key, kind, part, media, message_id, source, message_type, reply_to,
            event_kind, internal, at,
        )  # fmt: skip
        row = self._one(_START_ROW_IF_IDLE, (session_key, *values, session_id, started_at))
        assert row is not None
        depth, inbox_id, turn_id = row
        if inbox_id is None:
            return int(depth), None, None
        if turn_id is None:  # the id is taken (a journal from before the rule)
            turn_id = self.insert_turn(
                session_key=session_key,
                session_id=session_id,
                inbox_id=inbox_id,
                source=source,
                accepted_at=at,
                started_at=started_at,
            )
            self._send_sure("UPDATE inbox SET turn_id = %s WHERE id = %s", (turn_id, inbox_id))
        return int(depth), int(inbox_id), int(turn_id)

    def merge_into_slot(
        self,
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
        count = self._count(
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
        if count != 1:
            raise LookupError(f"inbox row {slot.id} is no longer a pending slot")

    def claim_inbox_row(self, inbox_id: int, turn_id: int) -> None:
        count = self._count(
            "UPDATE inbox SET state = 'claimed', turn_id = %s WHERE id = %s AND state = 'pending'",
            (turn_id, inbox_id),
        )
        if count != 1:
            raise LookupError(f"inbox row {inbox_id} is not pending")

    def delete_inbox_row(self, inbox_id: int) -> None:
        # By key, of a row its turn holds: nothing of the input can make it fail.
        self._send_sure("DELETE FROM inbox WHERE id = %s", (inbox_id,))

    def delete_pending_row(self, inbox_id: int) -> bool:
        return (
            self._count("DELETE FROM inbox WHERE id = %s AND state = 'pending'", (inbox_id,)) == 1
        )

    def delete_pending(self, session_key: str) -> list[int]:
        rows = self._all(
            "DELETE FROM inbox WHERE session_key = %s AND state = 'pending' RETURNING id",
            (session_key,),
        )
        return sorted(r[0] for r in rows)

    def delete_pending_events(self, session_key: str, *, keep: int | None = None) -> list[int]:
        rows = self._all(
            "DELETE FROM inbox WHERE session_key = %s AND state = 'pending' "
            "AND event_kind IS NOT NULL AND id IS DISTINCT FROM %s::bigint RETURNING id",
            (session_key, keep),
        )
        return sorted(r[0] for r in rows)

    def has_pending(self, session_key: str) -> bool:
        ahead, self._pending_ahead = self._pending_ahead, None
        if ahead is not None and ahead[0] == session_key and not self.in_transaction:
            return ahead[1].fetchone() is not None
        return self._one(_HAS_PENDING, (session_key,)) is not None

    def count_pending(self, session_key: str) -> int:
        row = self._one(_COUNT_PENDING, (session_key,))
        return int(row[0]) if row else 0

    def count_pending_later(self, session_key: str) -> Callable[[], int]:
        ahead = self._sent_ahead(_COUNT_PENDING, (session_key,))
        if ahead is None:
            count = self.count_pending(session_key)
            return lambda: count

        @functools.cache
        def counted() -> int:
            row = ahead.fetchone()
            return int(row[0]) if row else 0

        return counted

    def count_pending_all(self) -> int:
        row = self._one("SELECT count(*) FROM inbox WHERE state = 'pending'")
        return int(row[0]) if row else 0

    def lanes_with_pending(self) -> list[str]:
        rows = self._all(
            "SELECT session_key FROM inbox WHERE state = 'pending' GROUP BY session_key "
            "ORDER BY min(id)"
        )
        return [r[0] for r in rows]

    def select_seen(
        self, platform: str, chat_id: str, message_id: str, *, session_key: str, sender_id: str
    ) -> SeenRow | None:
        raw = self._one(
            f"SELECT {_SEEN} FROM inbound_seen "  # noqa: S608
            "WHERE platform = %s AND chat_id = %s AND message_id = %s AND session_key = %s "
            "AND sender_id = %s",
            (platform, chat_id, message_id, session_key, sender_id),
        )
        return None if raw is None else SeenRow(*raw)

    def insert_seen(self, row: SeenRow) -> bool:
        count = self._count(
            "INSERT INTO inbound_seen (platform, chat_id, message_id, session_key, sender_id, "
            "content_hash, session_id, inbox_id, turn_id, status, reply, seen_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, sg_ts(%s)) "
            "ON CONFLICT DO NOTHING",
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
        return count == 1

    def link_seen_to_turn(self, inbox_id: int, turn_id: int) -> None:
        self.conn.execute(
            "UPDATE inbound_seen SET turn_id = %s WHERE inbox_id = %s AND turn_id IS NULL",
            (turn_id, inbox_id),
        )

    def delete_seen_of_row(self, inbox_id: int) -> int:
        return self._count("DELETE FROM inbound_seen WHERE inbox_id = %s", (inbox_id,))

    def prune_seen(self, before: int) -> int:
        return self._count(
            "DELETE FROM inbound_seen WHERE seen_at < sg_ts(%s) "
            "AND (inbox_id IS NULL OR NOT EXISTS (SELECT 1 FROM inbox WHERE id = inbox_id))",
            (before,),
        )

    # ------------------------------------------------------------------ journal

    def get_turn(self, turn_id: int) -> TurnRow | None:
        raw = self._one(f"SELECT {_TURN} FROM turns WHERE id = %s", (turn_id,))  # noqa: S608
        return None if raw is None else _turn(raw)

    def turn_id_taken(self, turn_id: int) -> Callable[[], bool]:
        ahead = self._sent_ahead(_TURN_EXISTS, (turn_id,))
        if ahead is None:
            taken = self._one(_TURN_EXISTS, (turn_id,)) is not None
            return lambda: taken
        return functools.cache(lambda: ahead.fetchone() is not None)

    def turns_in_state(self, state: TurnState) -> list[TurnRow]:
        rows = self._all(
            f"SELECT {_TURN} FROM turns WHERE state = %s ORDER BY id",  # noqa: S608
            (str(state),),
        )
        return [_turn(r) for r in rows]

    def insert_turn(
        self,
        *,
        session_key: str,
        session_id: str,
        inbox_id: int,
        source: dict[str, Any],
        accepted_at: int,
        started_at: int,
    ) -> int:
        """The turn takes its inbox row's id when it is free, as on SQLite. The id is never
        drawn from the sequence (which explicit ids do not move): when a journal from before
        the rule holds it, the next id above the journal's is taken, again until one is free
        (another instance may take the same one first)."""
        values = (
            session_key,
            session_id,
            inbox_id,
            str(TurnState.RUNNING),
            dumps(source),
            accepted_at,
            started_at,
        )
        row = self._one(_INSERT_TURN.format(id="%s"), (inbox_id, *values))
        while row is None:
            row = self._one(_INSERT_TURN.format(id="(SELECT max(id) + 1 FROM turns)"), values)
        return int(row[0])

    def start_turn(
        self,
        *,
        session_key: str,
        session_id: str,
        inbox_id: int,
        source: dict[str, Any],
        accepted_at: int,
        started_at: int,
    ) -> int:
        params = {
            "inbox": inbox_id,
            "key": session_key,
            "sid": session_id,
            "state": str(TurnState.RUNNING),
            "source": dumps(source),
            "accepted": accepted_at,
            "started": started_at,
        }
        row = self._one(_START_TURN, params)
        assert row is not None
        if row[0] is None:  # the id is taken (a journal from before the rule)
            turn_id = self.insert_turn(
                session_key=session_key,
                session_id=session_id,
                inbox_id=inbox_id,
                source=source,
                accepted_at=accepted_at,
                started_at=started_at,
            )
            self.claim_inbox_row(inbox_id, turn_id)
            return turn_id
        if row[1] != 1:
            raise LookupError(f"inbox row {inbox_id} is not pending")
        return int(row[0])

    def transition_turn(
        self,
        turn_id: int,
        to: TurnState,
        *,
        at: int,
        reply: str | None = None,
        error: str | None = None,
        resume: bool = False,
    ) -> None:
        allowed = [str(s) for s, targets in TRANSITIONS.items() if to in targets]
        params = {
            "to": str(to),
            "attempt": int(resume),
            "resume": int(resume),
            "reply": reply,
            "error": error,
            "started": at if to is TurnState.RUNNING else None,
            "finished": at
            if to in (TurnState.REPLIED, TurnState.FAILED, TurnState.INTERRUPTED)
            else None,
            "delivered": at if to is TurnState.DELIVERED else None,
            "id": turn_id,
            "allowed": allowed,
        }
        if self._count(_TRANSITION, params) == 1:
            return
        self._refuse(turn_id, to, allowed)

    def finish_reply(self, turn_id: int, *, at: int, reply: str, delivered: bool) -> None:
        # A refusal fails the transaction (`_errors.TURN_REFUSED`): the answer is not waited
        # for here, but comes with the next statement read, or the commit.
        to = TurnState.DELIVERED if delivered else TurnState.REPLIED
        self._send_sure(_FINISH_REPLY, (turn_id, str(to), reply, at))

    def _refuse(self, turn_id: int, to: TurnState, allowed: list[str]) -> NoReturn:
        raw = self._one("SELECT state FROM turns WHERE id = %s", (turn_id,))
        raise refused_turn(turn_id, to, allowed, None if raw is None else raw[0])

    def prune_turns(self, before: int) -> int:
        return self._count(
            "DELETE FROM turns WHERE state IN ('delivered', 'failed', 'interrupted') "
            "AND coalesce(delivered_at, finished_at, accepted_at) < sg_ts(%s)",
            (before,),
        )

    def get_restart_count(self, session_key: str) -> int:
        raw = self._one("SELECT count FROM restart_counts WHERE session_key = %s", (session_key,))
        return 0 if raw is None else int(raw[0])

    def bump_restart_count(self, session_key: str, *, at: int) -> int:
        row = self._one(
            "INSERT INTO restart_counts (session_key, count, updated_at) "
            "VALUES (%s, 1, sg_ts(%s)) ON CONFLICT (session_key) DO UPDATE SET "
            "count = restart_counts.count + 1, updated_at = excluded.updated_at RETURNING count",
            (session_key, at),
        )
        assert row is not None
        return int(row[0])

    def reset_restart_count(self, session_key: str) -> bool:
        return self._count(_RESET_RESTART_COUNT, (session_key,)) > 0

    def reset_restart_count_later(self, session_key: str) -> Callable[[], bool]:
        cursor = self._sent_ahead(_RESET_RESTART_COUNT, (session_key,))
        if cursor is None:
            reset = self.reset_restart_count(session_key)
            return lambda: reset
        return lambda: cursor.rowcount > 0

    def merge_restart_counts(self, counts: dict[str, int], *, at: int) -> None:
        for key, count in counts.items():
            if count > 0:
                self.conn.execute(
                    "INSERT INTO restart_counts (session_key, count, updated_at) "
                    "VALUES (%s, %s, sg_ts(%s)) ON CONFLICT (session_key) DO UPDATE SET "
                    "count = greatest(restart_counts.count, excluded.count)",
                    (key, count, at),
                )

    def restart_counts(self) -> dict[str, int]:
        rows = self._all("SELECT session_key, count FROM restart_counts ORDER BY session_key")
        return {key: int(count) for key, count in rows}

    def get_meta(self, key: str) -> str | None:
        raw = self._one("SELECT value FROM meta WHERE key = %s", (key,))
        return None if raw is None else str(raw[0])

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute(_META_SET, (key, value))

    def pop_meta(self, key: str) -> str | None:
        raw = self._one("DELETE FROM meta WHERE key = %s RETURNING value", (key,))
        return None if raw is None else str(raw[0])

    # ------------------------------------------------------------------ leases (many instances)

    def register_instance(self, instance_id: str, host: str, pid: int) -> None:
        leases.register_instance(self.conn, instance_id, host, pid)

    def heartbeat(self, instance_id: str, ttl: float) -> int:
        return leases.heartbeat(self.conn, instance_id, ttl)

    def stop_instance(self, instance_id: str) -> None:
        leases.stop_instance(self.conn, instance_id)

    def mark_dead(self, stale_after: float) -> list[str]:
        return leases.mark_dead(self.conn, stale_after)

    def list_instances(self) -> list[dict[str, Any]]:
        return leases.list_instances(self.conn)

    def claim_lane(self, key: str, owner: str, ttl: float) -> int | None:
        return leases.claim_lane(self.conn, key, owner, ttl)

    def fence_lane(self, key: str, owner: str, epoch: int, ttl: float) -> None:
        leases.fence_lane(self._sure or self.conn, key, owner, epoch, ttl)

    def release_lane(self, key: str, owner: str, epoch: int) -> bool:
        return leases.release_lane(self.conn, key, owner, epoch)

    def lock_lane(self, session_key: str) -> None:
        # Once per transaction: the lock lasts to its end (a savepoint rolled back may take
        # it with it, and then `forget_locks` forgets it here too).
        if session_key not in self.locked_lanes:
            leases.lock_lane(self._sure or self.conn, session_key)
            self.locked_lanes.add(session_key)

    def lanes_wanting_owner(self, owner: str, limit: int) -> list[str]:
        return leases.lanes_wanting_owner(self.conn, owner, limit)

    def lane_in_flight(self, key: str) -> list[int]:
        return leases.lane_in_flight(self.conn, key)

    def nudge_lane_owner(self, key: str, me: str) -> bool:
        return leases.nudge_lane_owner(self.conn, key, me)

    def reap_vanished(self, me: str, late: float, grace: float) -> list[str]:
        return leases.reap_vanished(self.conn, me, late, grace)

    def claim_leader(self, name: str, owner: str, ttl: float) -> int | None:
        return leases.claim_leader(self.conn, name, owner, ttl)

    def hold_leader(self, name: str, owner: str, epoch: int, ttl: float) -> bool:
        return leases.hold_leader(self.conn, name, owner, epoch, ttl)

    def release_leader(self, name: str, owner: str, epoch: int) -> bool:
        return leases.release_leader(self.conn, name, owner, epoch)


def _tree(tree_of: str | None) -> dict[str, str | None]:
    """The `tree` and `forks` parameters of a search: a key, and the prefix of its forks' keys."""
    return {"tree": tree_of, "forks": None if tree_of is None else f"{tree_of}:{FORK_TAG}"}
