"""`SqliteTx`: the storage protocol's statements on one SQLite connection.

Each method is the module function of the table family it touches (`routes.py`,
`sessions.py`, `entries.py`, `inbox.py`, `journal.py`, `search.py`: the families of
`store/protocol/`) bound to the connection, or a mixin's (`approvals.py`, `deliveries.py`,
`erasure.py`, `jobs.py`, `outbox.py`, `platform_state.py`); the search index's are wrapped so
that a damaged side index reaches the store as a store error it can answer by falling back
to a scan.

Just over the ~400-line budget only because the protocol is long: every method is one line
that binds a module function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.sqlite import (
    entries,
    inbox,
    journal,
    routes,
    search as fts,
    sessions,
)
from sessiongate.store.sqlite._errors import translate_errors
from sessiongate.store.sqlite.approvals import SqliteApprovals
from sessiongate.store.sqlite.deliveries import SqliteDeliveries
from sessiongate.store.sqlite.erasure import SqliteErasure
from sessiongate.store.sqlite.hook_receipts import SqliteHookReceipts
from sessiongate.store.sqlite.jobs import SqliteJobs
from sessiongate.store.sqlite.outbox import SqliteOutbox
from sessiongate.store.sqlite.platform_state import SqlitePlatformState
from sessiongate.store.sqlite.takeover import SqliteTakeovers

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from datetime import datetime

    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.keys import KeyParts
    from sessiongate.store.records import (
        EntryRecord,
        EntryRow,
        InboxKind,
        InboxRow,
        PathMessageRow,
        SeenRow,
        SessionRow,
        TurnRow,
        TurnState,
    )

__all__ = ["SqliteTx"]

# Session rows a connection keeps between transactions (a few hundred bytes each).
_ROWS_KEPT = 4096


class SqliteTx(
    SqliteDeliveries,
    SqliteOutbox,
    SqliteHookReceipts,
    SqlitePlatformState,
    SqliteErasure,
    SqliteJobs,
    SqliteApprovals,
    SqliteTakeovers,
):
    """The protocol's `Tx` over one `sqlite3.Connection` (the caller holds its lock); what
    platform adapters keep is in `platform_state.py`."""

    __slots__ = ("_checked", "_created", "_keeps_rows", "_rows", "_version", "conn", "notes")

    def __init__(self, conn: sqlite3.Connection, *, keeps_rows: bool = False) -> None:
        self.conn = conn
        # What the open transaction changed, for `Database.transaction` to tell after commit.
        self.notes: list[object] = []
        # Session rows (id, key, leaf, ...) as a read inside a write transaction returns them,
        # kept across transactions: every append reads its session's row first, and a new
        # conversation's first append would read back the row just written. An append keeps
        # its row current; any other write to sessions or entries, a rollback, or a commit by
        # another connection (`PRAGMA data_version`, checked once per transaction) drops them.
        # (The writer's own; a snapshot reader lives for one read and keeps none.)
        self._keeps_rows = keeps_rows
        self._rows: dict[str, SessionRow] = {}
        self._version: int | None = None
        self._checked = False
        # Rows this transaction created, current whatever another connection did before it
        # began: a new conversation's first append needs no `data_version` check.
        self._created: dict[str, SessionRow] = {}

    def end_transaction(self, *, committed: bool) -> None:
        """Called by `Database` as a transaction ends (`committed=False`: rolled back, or a
        savepoint was)."""
        if not committed:
            self._rows.clear()
        elif self._created:
            if len(self._rows) + len(self._created) > _ROWS_KEPT:
                self._rows.clear()
            self._rows.update(self._created)
        self._created.clear()
        self._checked = False

    def _validate(self) -> None:
        if not self._checked:
            version = self.conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._version:
                self._rows.clear()
                self._version = version
            self._checked = True

    def _forget(self) -> None:
        """Another write to sessions or entries: no kept row can be trusted."""
        self._rows.clear()
        self._created.clear()

    def _keep(self, row: SessionRow) -> None:
        if not self._keeps_rows:
            return
        if row.session_id in self._created:
            self._created[row.session_id] = row
            return
        # A row written under this transaction's write lock needs no check of its own: a later
        # transaction compares `data_version` with the value read before this one began (read
        # once here if never before, so that the first comparison has something to go on).
        if self._version is None:
            self._validate()
        if len(self._rows) >= _ROWS_KEPT:
            self._rows.clear()
        self._rows[row.session_id] = row

    def note(self, change: object) -> None:
        self.notes.append(change)

    # Raw statements, for SQLite's own diagnostics and its fault-injection tests; the store
    # above never calls them (they are not part of the protocol).
    def execute(self, sql: str, params: Any = ()) -> sqlite3.Cursor:
        self._forget()
        return self.conn.execute(sql, params)

    def executemany(self, sql: str, params: Iterable[Any]) -> sqlite3.Cursor:
        self._forget()
        return self.conn.executemany(sql, params)

    def get_route(self, session_key: str) -> SessionEntry | None:
        return routes.get_route(self.conn, session_key)

    def prefetch_route(self, session_key: str) -> None:
        """Nothing to do: a read here is a call, not a round trip."""

    def expect_route(self, entry: SessionEntry) -> None:
        """Nothing to do, as for `prefetch_route`: the route is read."""

    def prefetch_context(
        self, session_id: str, max_depth: int | None, after: tuple[int, int] | None
    ) -> None:
        """Nothing to do, as for `prefetch_route`."""

    def pending_later(self, session_key: str) -> Callable[[], bool]:
        pending = inbox.has_pending(self.conn, session_key)
        return lambda: pending

    def get_route_with_parts(self, session_key: str) -> tuple[SessionEntry, KeyParts] | None:
        return routes.get_route_with_parts(self.conn, session_key)

    def get_route_parts(self, session_key: str) -> KeyParts | None:
        return routes.get_route_parts(self.conn, session_key)

    def upsert_route(self, entry: SessionEntry, parts: KeyParts | None) -> None:
        return routes.upsert_route(self.conn, entry, parts)

    def put_route(self, entry: SessionEntry, parts: KeyParts | None = None) -> None:
        return routes.put_route(self.conn, entry, parts)

    def delete_route(self, session_key: str) -> bool:
        return routes.delete_route(self.conn, session_key)

    def route_by_session_id(self, session_id: str) -> SessionEntry | None:
        return routes.route_by_session_id(self.conn, session_id)

    def iter_routes(self, *, since: datetime | None = None) -> Iterator[SessionEntry]:
        return routes.iter_routes(self.conn, since=since)

    def count_routes(self) -> int:
        return routes.count_routes(self.conn)

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
        return routes.list_route_page(
            self.conn,
            limit=limit,
            offset=offset,
            archived=archived,
            since=since,
            platform=platform,
            pinned=pinned,
            unread=unread,
            key_prefix=key_prefix,
        )

    def label_taken(self, label: str, *, except_key: str | None = None) -> bool:
        return routes.label_taken(self.conn, label, except_key=except_key)

    def tombstone_reason(self, session_key: str) -> str | None:
        return routes.tombstone_reason(self.conn, session_key)

    def add_tombstone(self, session_key: str, *, reason: str, at: int) -> None:
        return routes.add_tombstone(self.conn, session_key, reason=reason, at=at)

    def alias_of(self, platform: str, alias: str) -> str | None:
        return routes.alias_of(self.conn, platform, alias)

    def is_alias_target(self, platform: str, ident: str) -> bool:
        return routes.is_alias_target(self.conn, platform, ident)

    def keys_a_lane(self, platform: str, ident: str) -> bool:
        return routes.keys_a_lane(self.conn, platform, ident)

    def insert_alias(self, platform: str, alias: str, canonical: str, *, at: int) -> None:
        return routes.insert_alias(self.conn, platform, alias, canonical, at=at)

    def get_session_row(self, session_id: str) -> SessionRow | None:
        if not self._keeps_rows or not self.conn.in_transaction:
            return sessions.get_session_row(self.conn, session_id)
        row = self._created.get(session_id)
        if row is not None:
            return row
        self._validate()
        row = self._rows.get(session_id)
        if row is None:
            row = sessions.get_session_row(self.conn, session_id)
            if row is not None:
                self._keep(row)
        return row

    def unused_session_id(self, make: Callable[[], str]) -> str:
        return sessions.unused_session_id(self.conn, make)

    def create_session_row(
        self,
        *,
        session_id: str,
        session_key: str | None,
        parent_session_id: str | None,
        started_at: int,
        header: dict[str, Any],
    ) -> SessionRow:
        self._forget()
        return sessions.create_session_row(
            self.conn,
            session_id=session_id,
            session_key=session_key,
            parent_session_id=parent_session_id,
            started_at=started_at,
            header=header,
        )

    def create_fresh_session_row(
        self,
        make_id: Callable[[], str],
        *,
        session_key: str | None,
        parent_session_id: str | None,
        started_at: int,
        header: Callable[[str], dict[str, Any]],
    ) -> str:
        row = sessions.create_fresh_session_row(
            self.conn,
            make_id,
            session_key=session_key,
            parent_session_id=parent_session_id,
            started_at=started_at,
            header=header,
        )
        if self._keeps_rows:
            if self._version is None:
                self._validate()  # see `_keep`
            self._created[row.session_id] = row
        return row.session_id

    def end_session_row(self, sid: int, *, at: int | None, reason: str | None) -> None:
        self._forget()
        return sessions.end_session_row(self.conn, sid, at=at, reason=reason)

    def save_counters(self, sid: int, counters: dict[str, Any]) -> None:
        self._forget()
        return sessions.save_counters(self.conn, sid, counters)

    def load_counters(self, sid: int) -> dict[str, Any] | None:
        return sessions.load_counters(self.conn, sid)

    def has_any_sessions(self) -> bool:
        return sessions.has_any_sessions(self.conn)

    def key_has_history(self, session_key: str) -> bool:
        return sessions.key_has_history(self.conn, session_key)

    def session_ids_of_key(self, session_key: str) -> list[str]:
        return sessions.session_ids_of_key(self.conn, session_key)

    def sessions_of_lane(self, session_key: str, session_id: str) -> list[tuple[int, str, str]]:
        return sessions.sessions_of_lane(self.conn, session_key, session_id)

    def delete_session_rows(self, sid: int) -> None:
        self._forget()
        return sessions.delete_session_rows(self.conn, sid)

    def insert_entries(
        self, session: SessionRow, records: Sequence[EntryRecord]
    ) -> tuple[list[int | None], SessionRow]:
        ids, row = entries.insert_entries(self.conn, session, records)
        self._keep(row)
        return ids, row

    def append_entries(
        self, session_id: str, records: Sequence[EntryRecord]
    ) -> tuple[SessionRow, list[int | None]] | None:
        row = self.get_session_row(session_id)
        if row is None:
            return None
        return row, self.insert_entries(row, records)[0]

    def sends_ahead(self) -> bool:
        """Never: a write here is a call, not a round trip."""
        return False

    def prefetch_lane_creation(
        self,
        session_key: str,
        make_id: Callable[[], str],
        *,
        started_at: int,
        header: Callable[[str], dict[str, Any]],
    ) -> None:
        pass  # a read here is a call, not a round trip

    def sends_with_commit(self) -> bool:
        return False  # never `sends_ahead`

    def append_entries_ahead(
        self, session_id: str, records: Sequence[EntryRecord]
    ) -> Callable[[], tuple[SessionRow, list[int | None]] | None] | None:
        return None  # never `sends_ahead`

    def entry_row(self, entry_id: int) -> EntryRow | None:
        return entries.entry_row(self.conn, entry_id)

    def all_entries(self, sid: int) -> list[EntryRow]:
        return entries.all_entries(self.conn, sid)

    def tips_with_headlines(
        self, tip_ids: list[int], max_hops: int
    ) -> dict[int, tuple[EntryRow, EntryRow]]:
        return entries.tips_with_headlines(self.conn, tip_ids, max_hops)

    def load_path(
        self, sid: int, *, limit: int | None = None, messages_only: bool = True
    ) -> list[EntryRow]:
        return entries.load_path(self.conn, sid, limit=limit, messages_only=messages_only)

    def tail_messages(self, session_id: str, limit: int | None) -> list[EntryRow] | None:
        row = self.get_session_row(session_id)
        return None if row is None else self.load_path(row.sid, limit=limit)

    def user_turns_above(self, sid: int, depth: int) -> Iterable[PathMessageRow]:
        return entries.user_turns_above(self.conn, sid, depth)

    def last_completed_depth(self, sid: int, leaf_depth: int) -> int:
        return entries.last_completed_depth(self.conn, sid, leaf_depth)

    def move_leaf(
        self, session: SessionRow, target_id: int | None, *, release_keys: bool = False
    ) -> SessionRow:
        self._forget()
        return entries.move_leaf(self.conn, session, target_id, release_keys=release_keys)

    def release_off_path_keys(self, sid: int, keys: Sequence[str]) -> None:
        self._forget()
        return entries.release_off_path_keys(self.conn, sid, keys)

    def list_tips(self, sid: int) -> list[int]:
        return entries.list_tips(self.conn, sid)

    def latest_reset_depth(self, sid: int) -> int:
        return entries.latest_reset_depth(self.conn, sid)

    def copy_path(self, source: SessionRow, target: SessionRow, upto_depth: int) -> SessionRow:
        self._forget()
        return entries.copy_path(self.conn, source, target, upto_depth)

    def load_context_events(self, sid: int) -> list[dict[str, Any]]:
        return entries.load_context_events(self.conn, sid)

    def session_context_events(
        self, session_id: str, max_depth: int | None = None
    ) -> tuple[int, list[dict[str, Any]]] | None:
        row = self.get_session_row(session_id)
        if row is None:
            return None
        if max_depth is not None and row.leaf_depth > max_depth:
            return row.leaf_depth, []
        return row.leaf_depth, entries.load_context_events(self.conn, row.sid)

    def session_context_tail(
        self, session_id: str, max_depth: int | None, after_id: int, after_depth: int
    ) -> tuple[int, list[dict[str, Any]], bool] | None:
        row = self.get_session_row(session_id)
        if row is None:
            return None
        if max_depth is not None and row.leaf_depth > max_depth:
            return row.leaf_depth, [], False
        if row.leaf_id == after_id:
            return row.leaf_depth, [], True  # the kept row says it: no read at all
        tail = entries.context_events_below(self.conn, row.sid, after_id, after_depth)
        if tail is None:
            return row.leaf_depth, entries.load_context_events(self.conn, row.sid), False
        return row.leaf_depth, tail, True

    def keyed_path_messages(self, sid: int, prefix: str) -> list[tuple[str, EntryRow]]:
        return entries.keyed_path_messages(self.conn, sid, prefix)

    def search_is_stale(self) -> bool:
        with translate_errors():
            return fts.is_stale(self.conn)

    def mark_search_stale(self, reason: BaseException) -> None:
        with translate_errors():
            return fts.mark_stale(self.conn, reason)

    def catch_up_search(self) -> int:
        with translate_errors():
            return fts.catch_up(self.conn)

    def drop_session_from_search(self, sid: int) -> None:
        with translate_errors():
            return fts.drop_session(self.conn, sid)

    def lower_search_cursor(self) -> None:
        with translate_errors():
            return fts.lower_cursor(self.conn)

    def search_index(
        self, query: str, limit: int, *, key_prefix: str | None = None, tree_of: str | None = None
    ) -> list[dict[str, Any]]:
        with translate_errors():
            return fts.query_index(self.conn, query, limit, key_prefix=key_prefix, tree_of=tree_of)

    def search_scan(
        self, query: str, limit: int, *, key_prefix: str | None = None, tree_of: str | None = None
    ) -> list[dict[str, Any]]:
        with translate_errors():
            return fts.scan(self.conn, query, limit, key_prefix=key_prefix, tree_of=tree_of)

    def rebuild_search_index(self) -> int:
        with translate_errors():
            return fts.rebuild_index(self.conn)

    def search_index_status(self) -> dict[str, Any]:
        with translate_errors():
            return fts.index_status(self.conn)

    def search_integrity_check(self) -> str | None:
        with translate_errors():
            return fts.integrity_check(self.conn)

    def get_inbox_row(self, inbox_id: int) -> InboxRow | None:
        return inbox.get_row(self.conn, inbox_id)

    def pending_slot(self, session_key: str) -> InboxRow | None:
        return inbox.pending_slot(self.conn, session_key)

    def next_pending(self, session_key: str) -> InboxRow | None:
        return inbox.next_pending(self.conn, session_key)

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
        return inbox.insert_row(
            self.conn,
            session_key=session_key,
            kind=kind,
            part=part,
            media=media,
            message_id=message_id,
            source=source,
            message_type=message_type,
            reply_to=reply_to,
            event_kind=event_kind,
            internal=internal,
            at=at,
        )

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
        depth = self.count_pending(session_key)
        if depth:
            return depth, None
        inbox_id = self.insert_inbox_row(
            session_key=session_key,
            kind=kind,
            part=part,
            media=media,
            message_id=message_id,
            source=source,
            message_type=message_type,
            reply_to=reply_to,
            event_kind=event_kind,
            internal=internal,
            at=at,
        )
        return 0, inbox_id

    def start_row_if_idle(
        self, *, session_id: str, started_at: int, **row: Any
    ) -> tuple[int, int | None, int | None]:
        # `row` is `insert_inbox_row_if_idle`'s, as the protocol names it.
        depth, inbox_id = self.insert_inbox_row_if_idle(**row)
        if inbox_id is None:
            return depth, None, None
        turn_id = self.start_turn(
            session_key=row["session_key"],
            session_id=session_id,
            inbox_id=inbox_id,
            source=row["source"],
            accepted_at=row["at"],
            started_at=started_at,
        )
        return depth, inbox_id, turn_id

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
        return inbox.merge_into_slot(
            self.conn,
            slot,
            part=part,
            media=media,
            message_id=message_id,
            source=source,
            message_type=message_type,
            reply_to=reply_to,
            at=at,
        )

    def claim_inbox_row(self, inbox_id: int, turn_id: int) -> None:
        return inbox.claim_row(self.conn, inbox_id, turn_id)

    def delete_inbox_row(self, inbox_id: int) -> None:
        return inbox.delete_row(self.conn, inbox_id)

    def delete_pending_row(self, inbox_id: int) -> bool:
        return inbox.delete_pending_row(self.conn, inbox_id)

    def delete_pending(self, session_key: str) -> list[int]:
        return inbox.delete_pending(self.conn, session_key)

    def delete_pending_events(self, session_key: str, *, keep: int | None = None) -> list[int]:
        return inbox.delete_pending_events(self.conn, session_key, keep=keep)

    def has_pending(self, session_key: str) -> bool:
        return inbox.has_pending(self.conn, session_key)

    def count_pending(self, session_key: str) -> int:
        return inbox.count_pending(self.conn, session_key)

    def count_pending_later(self, session_key: str) -> Callable[[], int]:
        count = inbox.count_pending(self.conn, session_key)
        return lambda: count

    def lock_lane(self, session_key: str) -> None:
        """Nothing to do: SQLite's one writer already serialises every accept."""

    def count_pending_all(self) -> int:
        return inbox.count_pending_all(self.conn)

    def lanes_with_pending(self) -> list[str]:
        return inbox.lanes_with_pending(self.conn)

    def select_seen(
        self, platform: str, chat_id: str, message_id: str, *, session_key: str, sender_id: str
    ) -> SeenRow | None:
        return inbox.select_seen(
            self.conn, platform, chat_id, message_id, session_key=session_key, sender_id=sender_id
        )

    def insert_seen(self, row: SeenRow) -> bool:
        return inbox.insert_seen(self.conn, row)

    def link_seen_to_turn(self, inbox_id: int, turn_id: int) -> None:
        return inbox.link_seen_to_turn(self.conn, inbox_id, turn_id)

    def delete_seen_of_row(self, inbox_id: int) -> int:
        return inbox.delete_seen_of_row(self.conn, inbox_id)

    def prune_seen(self, before: int) -> int:
        return inbox.prune_seen(self.conn, before)

    def get_turn(self, turn_id: int) -> TurnRow | None:
        return journal.get_turn(self.conn, turn_id)

    def turn_id_taken(self, turn_id: int) -> Callable[[], bool]:
        taken = journal.turn_exists(self.conn, turn_id)
        return lambda: taken

    def turns_in_state(self, state: TurnState) -> list[TurnRow]:
        return journal.turns_in_state(self.conn, state)

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
        return journal.insert_turn(
            self.conn,
            session_key=session_key,
            session_id=session_id,
            inbox_id=inbox_id,
            source=source,
            accepted_at=accepted_at,
            started_at=started_at,
        )

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
        return journal.transition(
            self.conn, turn_id, to, at=at, reply=reply, error=error, resume=resume
        )

    def finish_reply(self, turn_id: int, *, at: int, reply: str, delivered: bool) -> None:
        return journal.finish_reply(self.conn, turn_id, at=at, reply=reply, delivered=delivered)

    def prune_turns(self, before: int) -> int:
        return journal.prune_turns(self.conn, before)

    def get_restart_count(self, session_key: str) -> int:
        return journal.get_restart_count(self.conn, session_key)

    def bump_restart_count(self, session_key: str, *, at: int) -> int:
        return journal.bump_restart_count(self.conn, session_key, at=at)

    def reset_restart_count(self, session_key: str) -> bool:
        return journal.reset_restart_count(self.conn, session_key)

    def reset_restart_count_later(self, session_key: str) -> Callable[[], bool]:
        reset = self.reset_restart_count(session_key)
        return lambda: reset

    def merge_restart_counts(self, counts: dict[str, int], *, at: int) -> None:
        return journal.merge_restart_counts(self.conn, counts, at=at)

    def restart_counts(self) -> dict[str, int]:
        return journal.restart_counts(self.conn)

    def get_meta(self, key: str) -> str | None:
        return journal.get_meta(self.conn, key)

    def set_meta(self, key: str, value: str) -> None:
        return journal.set_meta(self.conn, key, value)

    def pop_meta(self, key: str) -> str | None:
        return journal.pop_meta(self.conn, key)
