"""The `EntriesTx` family on PostgreSQL: the transcript tree of each session.

Each method does what its twin in `sqlite/entries.py` does (whose docstring states the
tree's invariants). The hot reads and writes of a turn (an append, the model context) are
one statement each, and can be sent ahead of their answer on the writer's pipeline
(`RoundTripsTx`).
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from sessiongate.store.postgres.sessions import GET_SESSION, PostgresSessions
from sessiongate.store.records import (
    EntryRecord,
    EntryRow,
    PathMessageRow,
    SessionRow,
    dumps,
    loads,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


__all__ = ["PostgresEntries"]

_ENTRY = "id, parent_id, type, role, content, payload::text, sg_us(ts), depth, mdepth, on_path, sid"

_ENTRY_OF_E = (
    "e.id, e.parent_id, e.type, e.role, e.content, e.payload::text, sg_us(e.ts), e.depth, "
    "e.mdepth, e.on_path, e.sid"
)

_COLUMNS = "%s::text[], %s::text[], %s::text[], %s::text[], %s::bigint[], %s::text[]"

_INSERT_ENTRIES = f"SELECT sg_append_entries(%s, %s::bigint, %s, %s, {_COLUMNS})"

# `get_session_row` and `insert_entries` in one statement: the session (its leaf as it was
# before the insert) and the new ids, NULL for an entry whose key is already taken; no row
# when there is no such session (and then nothing is inserted).
_APPEND = f"""
WITH s (sid, session_id, session_key, parent_session_id, started_at, ended_at, end_reason,
    leaf_id, depth, mdepth, generation, header) AS ({GET_SESSION.strip()})
SELECT s.*, sg_append_entries(s.sid, s.leaf_id, s.depth, s.mdepth, {_COLUMNS})
FROM s
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

# `get_session_row`'s sid and `load_path(sid, limit=...)` in one statement, the deepest first:
# no row for an unknown session, one row with NULL entry columns for a path without messages
# (`LIMIT NULL` is no limit).
_TAIL_MESSAGES = f"""
SELECT s.sid, e.* FROM sessions AS s LEFT JOIN LATERAL (
    SELECT {_ENTRY} FROM entries
    WHERE sid = s.sid AND on_path = 1 AND type = 'message' ORDER BY depth DESC LIMIT %s
) AS e ON true
WHERE s.session_id = %s
"""  # noqa: S608

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

# See `sqlite/entries.py`: only an assistant message without `tool_calls` completes a turn.
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


def _tail_params(
    session_id: str, max_depth: int | None, after_id: int, after_depth: int
) -> dict[str, Any]:
    return {"id": session_id, "max": max_depth, "after": after_id, "after_depth": after_depth}


def _context_event(r: Sequence[Any]) -> dict[str, Any]:
    """An entry as `load_context_events` gives it, from (id, type, role, content, payload)."""
    event = {"id": r[0], "type": r[1], "role": r[2], "content": r[3]}
    return event if r[4] is None else {**event, **loads(r[4])}


def _columns(records: Sequence[EntryRecord]) -> tuple[list[Any], ...]:
    """The records as `sg_append_entries` takes them: one array per column."""
    return (
        [r.type for r in records],
        [r.role for r in records],
        [r.content for r in records],
        [dumps(r.payload) if r.payload else None for r in records],
        [r.ts for r in records],
        [r.idem for r in records],
    )


def _after_insert(
    session: SessionRow, records: Sequence[EntryRecord], ids: Sequence[int | None]
) -> SessionRow:
    """The session with its leaf moved past the entries inserted (`ids`, None: skipped)."""
    leaf, depth, mdepth = session.leaf_id, session.leaf_depth, session.leaf_mdepth
    for record, new_id in zip(records, ids, strict=True):
        if new_id is not None:
            leaf, depth, mdepth = new_id, depth + 1, mdepth + (record.type == "message")
    if leaf == session.leaf_id:
        return session
    return _replace_leaf(session, leaf, depth, mdepth, session.generation)


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


class PostgresEntries(PostgresSessions):
    """The transcript tree of `PostgresTx` (an append reads its session, so it builds on
    `PostgresSessions`)."""

    __slots__ = ()

    def insert_entries(
        self, session: SessionRow, records: Sequence[EntryRecord]
    ) -> tuple[list[int | None], SessionRow]:
        if not records:
            return [], session
        head = (session.sid, session.leaf_id, session.leaf_depth, session.leaf_mdepth)
        row = self._one(_INSERT_ENTRIES, (*head, *_columns(records)))
        assert row is not None
        ids: list[int | None] = row[0]
        return ids, _after_insert(session, records, ids)

    def append_entries(
        self, session_id: str, records: Sequence[EntryRecord]
    ) -> tuple[SessionRow, list[int | None]] | None:
        if not records:
            session = self.get_session_row(session_id)
            return None if session is None else (session, [])
        raw = self._one(_APPEND, (session_id, *_columns(records)))
        return None if raw is None else (SessionRow(*raw[:12]), raw[12])

    def sends_ahead(self) -> bool:
        return self._wire is not None and self.in_transaction

    def sends_with_commit(self) -> bool:
        return self.sends_ahead() and self.depth == 1

    def append_entries_ahead(
        self, session_id: str, records: Sequence[EntryRecord]
    ) -> Callable[[], tuple[SessionRow, list[int | None]] | None] | None:
        if not records or not all(map(_storable, records)):
            return None
        ahead = self._sent_ahead(_APPEND, (session_id, *_columns(records)))
        if ahead is None:
            return None

        @functools.cache
        def appended() -> tuple[SessionRow, list[int | None]] | None:
            raw = ahead.fetchone()
            return None if raw is None else (SessionRow(*raw[:12]), raw[12])

        return appended

    def entry_row(self, entry_id: int) -> EntryRow | None:
        row = self._one(f"SELECT {_ENTRY} FROM entries WHERE id = %s", (entry_id,))  # noqa: S608
        return None if row is None else EntryRow._make(row)

    def all_entries(self, sid: int) -> list[EntryRow]:
        rows = self._all(f"SELECT {_ENTRY} FROM entries WHERE sid = %s ORDER BY id", (sid,))  # noqa: S608
        return list(map(EntryRow._make, rows))

    def tips_with_headlines(
        self, tip_ids: list[int], max_hops: int
    ) -> dict[int, tuple[EntryRow, EntryRow]]:
        tips: dict[int, EntryRow] = {}
        users: dict[int, EntryRow] = {}
        for tip, is_user, *values in self._all(_HEADLINE_WALK, (tip_ids, max_hops)):
            row = EntryRow._make(values)
            if row.id == tip:
                tips[tip] = row
            if is_user:
                users[tip] = row
        return {tip: (row, users.get(tip, row)) for tip, row in tips.items()}

    def load_path(
        self, sid: int, *, limit: int | None = None, messages_only: bool = True
    ) -> list[EntryRow]:
        kind = " AND type = 'message'" if messages_only else ""
        if limit is None:
            everything = self._all(
                f"SELECT {_ENTRY} FROM entries WHERE sid = %s AND on_path = 1{kind} "  # noqa: S608
                "ORDER BY depth",
                (sid,),
            )
            return list(map(EntryRow._make, everything))
        rows = self._all(
            f"SELECT {_ENTRY} FROM entries WHERE sid = %s AND on_path = 1{kind} "  # noqa: S608
            "ORDER BY depth DESC LIMIT %s",
            (sid, limit),
        )
        rows.reverse()
        return list(map(EntryRow._make, rows))

    def tail_messages(self, session_id: str, limit: int | None) -> list[EntryRow] | None:
        rows = self._all(_TAIL_MESSAGES, (limit, session_id))
        if not rows:
            return None
        # One row with no entry: a session whose path holds no message.
        found = [EntryRow._make(values) for _, *values in rows if values[0] is not None]
        found.reverse()
        return found

    def user_turns_above(self, sid: int, depth: int) -> list[PathMessageRow]:
        rows = self._all(
            "SELECT id, parent_id, role, content, payload::text, mdepth FROM entries "
            "WHERE sid = %s AND on_path = 1 AND type = 'message' AND depth > %s "
            "ORDER BY depth DESC",
            (sid, depth),
        )
        return list(map(PathMessageRow._make, rows))

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
            if row is None or row.sid != session.sid:
                raise LookupError(target_id)
            depth, mdepth = row.depth, row.mdepth
            cursor: EntryRow | None = row
            while cursor is not None and not cursor.on_path:
                chain.append(cursor.id)
                parent = cursor.parent_id
                cursor = self.entry_row(parent) if parent is not None else None
            common_depth = cursor.depth if cursor is not None else 0
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
                (session.sid, old.depth + 1, old_leaf),
            )
            if not old.on_path and has_child is None:
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
        return _replace_leaf(target, leaf.id, leaf.depth, leaf.mdepth, target.generation)

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
                if source is None or source.sid != source_sid or not source.on_path:
                    continue
                if base + source.depth < entry_id:
                    payload[name] = base + source.depth
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

    def keyed_path_messages(self, sid: int, prefix: str) -> list[tuple[str, EntryRow]]:
        # `starts_with`, not a range: under the database's collation `:` and `;` need not be
        # neighbours, as they are in SQLite's byte order.
        rows = self._all(
            f"SELECT idem, {_ENTRY} FROM entries WHERE sid = %s AND on_path = 1 "  # noqa: S608
            "AND type = 'message' AND starts_with(idem, %s)",
            (sid, prefix),
        )
        return [(row[0], EntryRow._make(row[1:])) for row in rows]
