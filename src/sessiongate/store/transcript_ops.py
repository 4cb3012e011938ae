"""Transcripts on the store: append (idempotent, one turn one transaction), rewrite, load,
rewind by turns, and full-text search with its fallback.

`TranscriptOps` is mixed into `SessionStore`; it only uses the store's database and clock.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sessiongate.core.bindings import key_prefix_of
from sessiongate.core.clock import ensure_utc
from sessiongate.core.ids import is_safe_id
from sessiongate.core.transcript import validate_entry, validate_message
from sessiongate.errors import (
    InvalidEntryError,
    InvalidSessionIdError,
    SessionNotFoundError,
    StoreCorruptError,
    StoreUnavailableError,
)
from sessiongate.store.changes import Change, ChangeKind
from sessiongate.store.records import (
    EntryRecord,
    SessionRow,
    loads,
    row_to_event,
    row_to_message,
    to_us,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from sessiongate.core.clock import Clock
    from sessiongate.store.placement import Placement
    from sessiongate.store.protocol import Backend, Tx
    from sessiongate.store.records import EntryRow, PathMessageRow

__all__ = ["PREVIEW_CHARS", "TranscriptOps", "message_record"]

# The longest first line of a last message `preview` gives.
PREVIEW_CHARS = 160

log = logging.getLogger(__name__)

_MESSAGE_EXTRAS = ("tool_calls", "tool_call_id", "name", "message_id", "metadata")
# Entry types `append_entry` refuses, with where they belong instead.
_NOT_APPENDABLE = {
    "message": "append messages with append_messages (it fills the message columns, the "
    "search index and the message_id idempotency)",
    "leaf": "the active leaf moves through rewind_session, rewind_to or switch_branch",
}


class TranscriptOps:
    _db: Backend
    _placement: Placement
    clock: Clock

    def append_to_transcript(
        self, session_id: str, message: Mapping[str, Any], skip_db: bool = False
    ) -> None:
        """Append one message; `skip_db` means the agent already persisted it (no write)."""
        if skip_db:
            return
        self.append_messages(session_id, [message])

    def append_messages(
        self,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        first_index: int = 0,
    ) -> list[int | None]:
        """Append one turn in one transaction; returns the new entry ids (None: a duplicate).

        A message with a `message_id`, or any message when `idempotency_key` is given, is
        appended at most once per session: under a key, the message at position `i` of the
        list is number `first_index + i` of that key, so a turn can append its messages one
        at a time as they complete and a retried append is a no-op.
        """
        now_us = to_us(self.clock.now())
        records = [
            _message_record(m, now_us, idempotency_key, first_index + i)
            for i, m in enumerate(messages)
        ]
        _check_session_id(session_id)
        with self._placement.for_session(session_id).transaction() as conn:
            ahead = (
                conn.append_entries_ahead(session_id, records) if conn.sends_with_commit() else None
            )
            if ahead is None:
                appended = conn.append_entries(session_id, records)
                if appended is None:
                    raise _not_found(session_id)
                row, ids = appended
                self._note_appended(conn, row, records, ids)
                return ids
            # Sent with the commit, read after it: one round trip where each is one.
            for change in _appended_changes(ahead, records):
                conn.note(change)
        appended = ahead()
        if appended is None:
            raise _not_found(session_id)
        return appended[1]

    def append_message_ahead(
        self,
        session_id: str,
        message: Mapping[str, Any],
        *,
        idempotency_key: str,
        number: int = 0,
    ) -> Callable[[], int | None] | None:
        """`append_messages` of one message (number `number` of the key) inside the caller's
        transaction, sent without waiting for its answer where a write is a round trip: the
        returned function tells the new entry id once the transaction committed (None: stored
        already, or the session is gone). None, with nothing written, where that does not pay
        or the database could refuse the text (the caller appends it the usual way)."""
        with self._placement.for_session(session_id).read() as conn:
            if not conn.sends_ahead():
                return None
            record = _message_record(message, to_us(self.clock.now()), idempotency_key, number)
            _check_session_id(session_id)
            ahead = conn.append_entries_ahead(session_id, [record])
            if ahead is None:
                return None

            def entry_id() -> int | None:
                result = ahead()
                return None if result is None else result[1][0]

            (change,) = _appended_changes(ahead, [record])
            conn.note(change)
            return entry_id

    def keyed_messages(
        self, session_id: str, idempotency_key: str
    ) -> list[tuple[int, int, dict[str, Any]]]:
        """`(number, entry id, message)` of the active path's messages appended under
        `idempotency_key`, in order (what a resumed turn already stored); [] for an unknown
        session."""
        prefix = _keyed_idem(idempotency_key, "")
        with self._placement.for_session(session_id).read() as conn:
            row = conn.get_session_row(session_id)
            rows = [] if row is None else conn.keyed_path_messages(row.sid, prefix)
        numbered = [
            (int(idem[len(prefix) :]), entry)
            for idem, entry in rows
            if idem[len(prefix) :].isdigit()
        ]
        numbered.sort(key=lambda item: item[0])
        return [(number, entry.id, row_to_message(entry)) for number, entry in numbered]

    def append_entry(self, session_id: str, entry: Mapping[str, Any]) -> int:
        """Append a non-message tree entry (compaction, reset, custom, label, ...).

        Entry ids it names must exist in this session (`first_kept_entry_id` on the active
        path), checked in the append's transaction; `message` and `leaf` are refused.
        """
        kind = entry.get("type")
        if kind in _NOT_APPENDABLE:
            raise InvalidEntryError(
                f"append_entry cannot take a {kind} entry: {_NOT_APPENDABLE[kind]}"
            )
        clean = validate_entry(entry)
        kind = clean.pop("type")
        clean.pop("id", None)
        clean.pop("parent_id", None)
        ts = clean.pop("timestamp", None)
        ts_us = to_us(ensure_utc(datetime.fromisoformat(ts))) if ts else to_us(self.clock.now())
        record = EntryRecord(kind, None, None, clean or None, ts_us)
        with self._placement.for_session(session_id).transaction() as conn:
            row = self._require_session(conn, session_id)
            _check_references(conn, row, kind, clean)
            ids = self._append_records(conn, row, [record])
        assert ids[0] is not None
        return ids[0]

    def rewrite_transcript(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> None:
        """Replace the active path's messages atomically; replaced entries stay as a branch.

        Only what differs is replaced: the leaf moves back to just before the first current
        message that differs from `messages` (timestamps aside) and the rest is appended. The
        entries of the common prefix stay, `reset` and `compaction` boundaries included, so the
        load → edit → rewrite pattern never brings back history a boundary closed.
        """
        now_us = to_us(self.clock.now())
        records = [_message_record(m, now_us, None, i) for i, m in enumerate(messages)]
        seen: set[str] = set()
        for rec in records:
            if rec.idem is not None and rec.idem in seen:
                message_id = rec.payload.get("message_id") if rec.payload else None
                raise InvalidEntryError(
                    f"message_id {message_id!r} appears more than once in the rewrite"
                )
            if rec.idem is not None:
                seen.add(rec.idem)
        with self._placement.for_session(session_id).transaction() as conn:
            row = self._require_session(conn, session_id)
            current = conn.load_path(row.sid)  # the active path's messages
            same = 0
            for old, new in zip(current, records, strict=False):
                if not _is_same_message(old, new):
                    break
                same += 1
            if same < len(current):
                # Back to the entry before the first differing message (its parent on the path).
                row = conn.move_leaf(row, current[same].parent_id, release_keys=True)
            rest = records[same:]
            # The rewrite is the authority on its message ids: rows of older branches give
            # theirs up, or the new copies would be dropped as duplicates.
            conn.release_off_path_keys(row.sid, [r.idem for r in rest if r.idem is not None])
            self._append_records(conn, row, rest)

    def load_transcript(self, session_id: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The active path as chat-format dicts; `limit` reads only the last N messages."""
        if limit is not None and limit <= 0:
            return []
        with self._placement.for_session(session_id).read() as conn:
            rows = conn.tail_messages(session_id, limit)
        return [row_to_message(r) for r in rows or ()]

    def preview(self, session_id: str) -> dict[str, Any] | None:
        """What a list shows of a session without its transcript: `message_count` (messages
        on the active path) and `last_message` (`role`, the first line of its text, cut at
        `PREVIEW_CHARS`, `timestamp`, `notice` for a gateway notice; None for no message),
        from one read. None for an unknown session id."""
        with self._placement.for_session(session_id).read() as conn:
            row = conn.get_session_row(session_id)
            if row is None:
                return None
            rows = conn.load_path(row.sid, limit=1)
        last: dict[str, Any] | None = None
        if rows:
            message = row_to_message(rows[-1])
            text = _text_of(message.get("content"), None, parts=message.get("content"))
            first = next((line.strip() for line in text.splitlines() if line.strip()), "")
            if len(first) > PREVIEW_CHARS:
                first = first[: PREVIEW_CHARS - 1] + "…"
            metadata = message.get("metadata")
            notice = metadata.get("gateway_notice") if isinstance(metadata, dict) else None
            last = {
                "role": message["role"],
                "text": first,
                "timestamp": message["timestamp"],
                "notice": notice if isinstance(notice, str) else None,
            }
        return {"message_count": row.leaf_mdepth, "last_message": last}

    def load_events(self, session_id: str, *, branch: str = "active") -> list[dict[str, Any]]:
        """Transcript events (`id`, `parent_id`, `type`, `timestamp`, ...), active path or all."""
        with self._placement.for_session(session_id).read() as conn:
            row = conn.get_session_row(session_id)
            if row is None:
                return []
            if branch == "all":
                rows = conn.all_entries(row.sid)
            else:
                rows = conn.load_path(row.sid, messages_only=False)
        return [row_to_event(r) for r in rows]

    def rewind_session(self, session_id: str, n: int = 1) -> dict[str, Any]:
        """Back up `n` user turns: the leaf moves before the n-th last user message.

        Only turns after the latest `reset` on the active path count, so an undo never brings
        back what a reset closed; with none there, nothing is rewound (zeros, as for an empty
        transcript). The rewound entries stay in the tree as an inactive branch (the audit
        trail) and give up their idempotency keys, so a message sent again lands on the path.
        """
        empty = {"rewound_count": 0, "turns_undone": 0, "target_text": ""}
        if n <= 0:
            return empty
        with self._placement.for_session(session_id).transaction() as conn:
            row = conn.get_session_row(session_id)
            if row is None:
                return empty
            target: PathMessageRow | None = None
            found = 0
            floor = conn.latest_reset_depth(row.sid)
            for entry in conn.user_turns_above(row.sid, floor):
                if entry.role == "user":
                    target = entry
                    found += 1
                    if found == n:
                        break
            if target is None:
                return empty
            rewound = row.leaf_mdepth - target.mdepth + 1
            conn.move_leaf(row, target.parent_id, release_keys=True)
            conn.note(Change(ChangeKind.SESSION_UPDATED, row.session_key, session_id))
        return {
            "rewound_count": rewound,
            "turns_undone": found,
            "target_text": _text_of(target.content, target.payload),
        }

    def search(self, query: str, limit: int = 20) -> list[dict[str, Any]]:
        """Full-text search over active branches; a broken index falls back to a scan."""
        hits, _ = self.search_detailed(query, limit=limit)
        return hits

    def search_detailed(
        self,
        query: str,
        limit: int = 20,
        *,
        agent: str | None = None,
        key_prefix: str | None = None,
        tree_of: str | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """Search hits and whether they came from the fallback scan (the index is stale).

        Only agent `agent`'s sessions (or keys starting `key_prefix`), and only `tree_of`'s
        session and its forks, when given: filtered in the query, so `limit` hits are the
        best-ranked among those, never fewer because others ranked higher."""
        limit = max(1, min(int(limit), 500))
        prefix = key_prefix if agent is None else key_prefix_of(agent)
        damage: Exception | None = None
        try:
            with self._db.transaction() as conn:
                if not conn.search_is_stale():
                    conn.catch_up_search()
                    hits = conn.search_index(query, limit, key_prefix=prefix, tree_of=tree_of)
                    return hits, False
        except (StoreCorruptError, StoreUnavailableError) as exc:
            damage = exc
        if damage is not None:
            # Only the side index is suspect here; canonical writes go on regardless.
            try:
                with self._db.transaction() as conn:
                    conn.mark_search_stale(damage)
            except (StoreCorruptError, StoreUnavailableError):
                log.exception("could not mark the full-text index stale")
        with self._db.read() as conn:
            return conn.search_scan(query, limit, key_prefix=prefix, tree_of=tree_of), True

    def rebuild_search_index(self) -> int:
        with self._db.transaction() as conn:
            return conn.rebuild_search_index()

    def search_index_status(self) -> dict[str, Any]:
        with self._db.read() as conn:
            status = conn.search_index_status()
            status["integrity_error"] = conn.search_integrity_check()
        return status

    def _append_records(
        self, conn: Tx, row: SessionRow, records: Sequence[EntryRecord]
    ) -> list[int | None]:
        ids, _ = conn.insert_entries(row, records)
        self._note_appended(conn, row, records, ids)
        return ids

    @staticmethod
    def _note_appended(
        conn: Tx, row: SessionRow, records: Sequence[EntryRecord], ids: Sequence[int | None]
    ) -> None:
        for entry_id, record in zip(ids, records, strict=True):
            if entry_id is not None:
                conn.note(_appended(row, entry_id, record))

    def _require_session(self, conn: Tx, session_id: str) -> SessionRow:
        _check_session_id(session_id)
        row = conn.get_session_row(session_id)
        if row is None:
            raise _not_found(session_id)
        return row


def _appended(row: SessionRow, entry_id: int, record: EntryRecord) -> Change:
    return Change(
        ChangeKind.TRANSCRIPT_APPENDED,
        row.session_key,
        row.session_id,
        entry_id=entry_id,
        entry_type=record.type,
    )


def _appended_changes(
    ahead: Callable[[], tuple[SessionRow, list[int | None]] | None],
    records: Sequence[EntryRecord],
) -> list[Callable[[], Change | None]]:
    """The changes of an append sent ahead, one per record, each told after the commit
    (`Tx.note`): None for a record not appended."""

    def change(i: int) -> Callable[[], Change | None]:
        def told() -> Change | None:
            result = ahead()
            entry_id = None if result is None else result[1][i]
            if result is None or entry_id is None:
                return None
            return _appended(result[0], entry_id, records[i])

        return told

    return [change(i) for i in range(len(records))]


def _check_session_id(session_id: str) -> None:
    if not is_safe_id(session_id):
        raise InvalidSessionIdError(f"invalid session id: {session_id!r}", session_id=session_id)


def _not_found(session_id: str) -> SessionNotFoundError:
    return SessionNotFoundError(f"no session with id {session_id!r}", session_id=session_id)


def _check_references(conn: Tx, row: SessionRow, kind: str, clean: Mapping[str, Any]) -> None:
    """Refuse an entry naming an id that is not in this session: a compaction keeping from a
    missing entry would silently shrink the model context to its summary."""
    for name in ("first_kept_entry_id", "target_id", "from_entry_id"):
        ref = clean.get(name)
        if ref is None:
            continue
        target = conn.entry_row(ref)
        if target is None or target.sid != row.sid:
            raise InvalidEntryError(f"{kind} {name} {ref} is not an entry of this session")
        if name == "first_kept_entry_id" and not target.on_path:
            raise InvalidEntryError(f"{kind} {name} {ref} is not on the active path")


def _is_same_message(row: EntryRow, record: EntryRecord) -> bool:
    """Whether a stored message row holds what `record` would store (timestamps aside)."""
    payload = loads(row.payload) if row.payload is not None else None
    return row.role == record.role and row.content == record.content and payload == record.payload


# Roles whose message is complete with a role and text alone (a tool result also needs its
# tool_call_id), for the fast path below.
_PLAIN_ROLES = frozenset({"user", "assistant", "system"})


def message_record(message: Mapping[str, Any], ts_us: int) -> EntryRecord:
    """The record of one chat message as an append stores it (importers build trees with
    it); `ts_us` when the message carries no `timestamp`."""
    return _message_record(message, ts_us, None, 0)


def _message_record(
    message: Mapping[str, Any], now_us: int, idempotency_key: str | None, index: int
) -> EntryRecord:
    # Most messages are exactly `{"role", "content": text}`: `validate_message` would accept
    # them unchanged, so their record is built directly (a few microseconds per message of
    # every turn). Anything else takes the full validation.
    if message.__class__ is dict and len(message) == 2:
        role = message.get("role")
        content = message.get("content")
        if content.__class__ is str and role.__class__ is str and role in _PLAIN_ROLES:
            key = None if idempotency_key is None else _keyed_idem(idempotency_key, str(index))
            return EntryRecord("message", role, content, None, now_us, key)
    clean = validate_message(message)
    content = clean.get("content")
    payload: dict[str, Any] = {k: clean[k] for k in _MESSAGE_EXTRAS if clean.get(k) is not None}
    if content is not None and not isinstance(content, str):
        payload["content"] = content
        content = _text_of(None, None, parts=content)
    ts = clean.get("timestamp")
    ts_us = to_us(ensure_utc(datetime.fromisoformat(ts))) if isinstance(ts, str) else now_us
    message_id = clean.get("message_id")
    if message_id is not None:
        idem: str | None = f"m:{message_id}"
    elif idempotency_key is not None:
        idem = _keyed_idem(idempotency_key, str(index))
    else:
        idem = None
    return EntryRecord("message", clean["role"], content, payload or None, ts_us, idem)


def _text_of(content: Any, payload: str | None, *, parts: Any = None) -> str:
    """Plain text of a message's content (text parts joined) for search and editing."""
    if parts is None and payload:
        parts = loads(payload).get("content")
    if parts is None:
        return content if isinstance(content, str) else ""
    if isinstance(parts, str):
        return parts
    texts = [p.get("text", "") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    return "\n".join(t for t in texts if isinstance(t, str))


def _keyed_idem(idempotency_key: str, number: str) -> str:
    """The idempotency key of message `number` appended under `idempotency_key`."""
    return f"k:{idempotency_key}:{number}"
