"""The storage seam: what `SessionStore` and `LaneStore` ask of a database, and nothing more.

A `Backend` owns the connections and hands out transactions; inside one, a `Tx` offers every
statement the store runs, as a method that takes and returns plain values (`records.py`).
`sqlite/` and `postgres/` implement it and are the only places with SQL or a driver, so the
lifecycle rules above this line are written once and checked against both by one test suite.

The contract of a `Tx` method is the SQLite module that first implemented it (its docstring
and invariants); a backend may differ only in how, never in what.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from datetime import datetime

    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.keys import KeyParts
    from sessiongate.store.copy import TableSpec
    from sessiongate.store.records import (
        ApprovalRow,
        DeliveryRow,
        EntryRecord,
        InboxKind,
        InboxRow,
        JobRow,
        JobRunRow,
        OutboxRow,
        PairingRow,
        SeenRow,
        SessionRow,
        TakeoverRow,
        TurnRow,
        TurnState,
    )

__all__ = [
    "ApprovalTx",
    "Backend",
    "DeliveryTx",
    "ErasureTx",
    "JobsTx",
    "LeaseBackend",
    "LeaseTx",
    "OutboxTx",
    "PlatformStateTx",
    "TakeoverTx",
    "Tx",
]

# An entry row: (id, parent_id, type, role, content, payload, ts, depth, mdepth, on_path, sid).
EntryTuple = tuple[Any, ...]


class PlatformStateTx(Protocol):
    """What platform adapters keep (`store/platform_state.py` states the rules): event
    claims, pairing requests, threads the bot has spoken in, sends per turn, and receiver
    cursors. Times are
    integer microseconds; a send is (state, detail)."""

    def claim_platform_event(self, platform: str, event_id: str, owner: str, now: int) -> bool: ...
    def finish_platform_events(self, platform: str, event_ids: list[str]) -> None: ...
    def release_platform_event(self, platform: str, event_id: str, owner: str) -> None: ...
    def prune_platform_events(self, before: int) -> int: ...
    def get_pairing(self, platform: str, user_id: str) -> PairingRow | None: ...
    def upsert_pairing(self, row: PairingRow) -> None: ...
    def count_pending_pairing(self, platform: str, now: int) -> int: ...
    def approve_pairing(self, code: str, now: int) -> PairingRow | None: ...
    def list_pairing(self) -> list[PairingRow]: ...
    def mark_thread(self, platform: str, chat_id: str, thread_id: str, now: int) -> None: ...
    def has_thread(self, platform: str, chat_id: str, thread_id: str) -> bool: ...
    def record_send(
        self, platform: str, turn_id: int, state: str, detail: str | None, now: int
    ) -> None: ...
    def begin_send(
        self, platform: str, turn_id: int, now: int
    ) -> tuple[str, str | None] | None: ...
    def get_send(self, platform: str, turn_id: int) -> tuple[str, str | None] | None: ...
    def get_cursor(self, platform: str, account: str) -> str | None: ...
    def set_cursor(self, platform: str, account: str, cursor: str, now: int) -> None: ...


class JobsTx(Protocol):
    """Scheduled jobs and their claimed slots (`store/jobs.py` states the rules). Every method
    runs in the caller's transaction; times are microseconds.

    The exactly-once fence is `claim_job_slot`: one row per (job, slot) under a unique key, so
    of several instances (or a process and its own restart) exactly one ever holds a slot.
    """

    def insert_job(self, row: JobRow) -> bool:
        """Add a job; False (and nothing written) when its id is taken."""
        ...

    def get_job(self, job_id: str, *, lock: bool = False) -> JobRow | None:
        """One job; with `lock`, its row stays locked until the transaction ends (PostgreSQL:
        `FOR UPDATE`, so concurrent schedulers of one job take turns)."""
        ...

    def list_jobs(self) -> list[JobRow]:
        """Every job, by id."""
        ...

    def update_job(self, job_id: str, *, spec: str, paused: bool, at: int) -> bool:
        """Replace a job's spec and paused flag; False when there is no such job."""
        ...

    def set_job_cursor(self, job_id: str, cursor_at: int) -> None:
        """Move the job's cursor forward to `cursor_at` (never back)."""
        ...

    def delete_job(self, job_id: str) -> bool:
        """Remove a job and its run history; False when there is no such job."""
        ...

    def claim_job_slot(
        self, job_id: str, slot_at: int, *, owner: str, at: int, skipped: int
    ) -> int | None:
        """Insert the run of (job, slot) as `claimed`; its id, or None when the slot is
        already claimed (by anyone, ever)."""
        ...

    def update_job_run(
        self,
        run_id: int,
        *,
        state: str,
        session_key: str | None = None,
        turn_id: int | None = None,
        detail: str | None = None,
    ) -> None:
        """Move a run to `state`, setting the given columns (None leaves one as it was)."""
        ...

    def job_runs(self, job_id: str, limit: int) -> list[JobRunRow]:
        """A job's runs, the latest slot first."""
        ...

    def unfinished_job_runs(self) -> list[JobRunRow]:
        """Runs claimed but not yet accepted (`claimed`, `prepared`), oldest slot first."""
        ...

    def job_run_of_turn(self, turn_id: int) -> JobRunRow | None:
        """The run whose turn is `turn_id`, if any."""


class DeliveryTx(Protocol):
    """The deliveries table (`store/deliveries.py` states the rules): one row per outbound
    message, `pending` -> `sent` | `failed` -> ... -> `dead`. Times are integer microseconds;
    `source` is JSON text."""

    def insert_delivery(
        self,
        *,
        kind: str,
        turn_id: int | None,
        session_key: str | None,
        platform: str,
        source: str,
        text: str,
        at: int,
        next_at: int | None = None,
    ) -> int:
        """A new `pending` row written at `at`, due at `next_at` (`at` by default); for a
        turn's reply that has one already, its id."""
        ...

    def get_delivery(self, delivery_id: int) -> DeliveryRow | None: ...
    def delivery_of_turn(self, turn_id: int) -> DeliveryRow | None:
        """The reply row of the turn, if any."""
        ...

    def list_deliveries(self, statuses: Sequence[str], limit: int) -> list[DeliveryRow]:
        """The newest first; every status when `statuses` is empty."""
        ...

    def due_deliveries(self, now: int, limit: int) -> list[DeliveryRow]:
        """`pending` and `failed` rows whose `next_at` is not after `now`, the oldest first."""
        ...

    def set_delivery(
        self,
        delivery_id: int,
        *,
        status: str,
        attempts: int,
        message_id: str | None,
        reason: str | None,
        next_at: int,
        at: int,
    ) -> bool: ...
    def reopen_delivery(self, delivery_id: int, at: int) -> bool:
        """A `failed` or `dead` row back to `pending`, due at `at`, its tries and reason
        forgotten and its age counted from `at`; False when it is neither."""
        ...

    def prune_sent(self, before: int) -> int:
        """Forget sent deliveries and sent webhook events last written before `before`;
        how many rows went."""
        ...

    def count_deliveries(self) -> dict[str, int]: ...


class OutboxTx(Protocol):
    """The outbox of outbound webhook events (`store/outbox.py` states the rules): rows are
    `pending` until `sent` or `dead`; times are integer microseconds."""

    def insert_outbox(
        self,
        *,
        event_id: str,
        target: str,
        event: str,
        session_key: str | None,
        body: str,
        at: int,
    ) -> None: ...
    def unsent_outbox(self, limit: int) -> list[OutboxRow]:
        """`pending` rows, the oldest first (due or not: order per session is the caller's)."""
        ...

    def list_outbox(self, statuses: Sequence[str], limit: int) -> list[OutboxRow]:
        """The newest first; every status when `statuses` is empty."""
        ...

    def get_outbox(self, outbox_id: int) -> OutboxRow | None: ...
    def set_outbox(
        self,
        outbox_id: int,
        *,
        status: str,
        attempts: int,
        reason: str | None,
        next_at: int,
        at: int,
    ) -> None: ...
    def reopen_outbox(self, outbox_id: int, at: int) -> bool:
        """A `dead` row back to `pending`, due at `at`, its tries forgotten."""
        ...


class ErasureTx(Protocol):
    """What erasure and retention read and remove (`store/erasure.py` and `store/retention.py`
    state the rules). Times are integer microseconds; JSON crosses as text."""

    def aliases_of(self, platform: str, canonical: str) -> list[str]:
        """The aliases that point at `canonical`."""
        ...

    def sessions_forked_from(self, session_ids: Sequence[str]) -> list[tuple[int, str, str | None]]:
        """(sid, session id, key) of the sessions whose parent is one of `session_ids`."""
        ...

    def all_session_ids(self) -> list[tuple[int, str, str | None]]:
        """(sid, session id, key) of every session."""
        ...

    def redact_entry(
        self, entry_id: int, *, role: str | None, content: str | None, payload: str | None
    ) -> None:
        """Overwrite one entry's role, text and payload in place (its place in the tree
        stays); the search index is the caller's to rebuild."""
        ...

    def erase_person_records(
        self, platform: str, ids: Sequence[str], keys: Sequence[str]
    ) -> dict[str, int]:
        """Delete what the gateway keeps of a person outside transcripts: inbox and dedup
        rows and journal turns of `keys` or sent by `ids`, restart counters and tombstones of
        `keys`, identity aliases naming `ids`, pairing rows of `ids`; counts by kind."""
        ...

    def insert_erasure(self, *, at: int, subject_hash: str, counts: str) -> int: ...
    def list_erasures(self, limit: int) -> list[tuple[int, int, str, str]]:
        """(id, at, subject hash, counts JSON), newest first."""
        ...

    def lane_sizes(self) -> dict[str, int]:
        """Bytes of transcript text and payload per session key (an estimate of its share)."""
        ...

    def busy_lanes(self) -> set[str]:
        """Keys with a turn accepted or running, or inbound rows waiting."""
        ...


class ApprovalTx(Protocol):
    """Tool calls waiting for a person's approval (`store/approvals.py` states the rules):
    one row per call of a turn, holding the exact arguments shown and their SHA-256. Times
    are integer microseconds; `approvers` crosses as JSON text."""

    def insert_approval(self, row: ApprovalRow) -> bool:
        """Store a new approval; False when its call (turn id, call id) has one already."""
        ...

    def get_approval(self, approval_id: str) -> ApprovalRow | None: ...
    def approval_for_call(self, turn_id: int, call_id: str) -> ApprovalRow | None: ...
    def list_approvals(self, status: str | None, limit: int) -> list[ApprovalRow]:
        """Newest first; every status when `status` is None."""
        ...

    def decide_approval(
        self, approval_id: str, *, status: str, by: str | None, sha256: str, now: int
    ) -> bool:
        """One conditional update: a `pending` approval of arguments hashing to `sha256` moves
        to `status`; False (nothing changed) when it is no longer pending or the hash differs,
        so of two concurrent decisions exactly one wins."""
        ...

    def use_approval(self, approval_id: str) -> bool:
        """Mark an `approved` call as started; False when it was started before (a resumed
        turn then never runs it a second time)."""
        ...

    def cancel_approvals(self, session_key: str, by: str, now: int) -> list[str]:
        """Cancel the `pending` approvals of a session key; the ids cancelled."""
        ...

    def due_approvals(self, now: int) -> list[ApprovalRow]:
        """`pending` approvals whose `expires_at` is at or before `now`."""
        ...


class TakeoverTx(Protocol):
    """Lanes an operator took over (`store/takeover.py` states the rules): one row per
    session key while it is taken over. Times are integer microseconds."""

    def put_takeover(self, row: TakeoverRow) -> bool:
        """Take the lane over; False (nothing changed) when it is taken over already."""
        ...

    def get_takeover(self, session_key: str) -> TakeoverRow | None: ...
    def list_takeovers(self) -> list[TakeoverRow]:
        """Every lane taken over, oldest first."""
        ...

    def delete_takeover(self, session_key: str) -> TakeoverRow | None:
        """Give the lane back; the row it had, or None when it was not taken over."""
        ...


class Tx(
    PlatformStateTx, ErasureTx, JobsTx, ApprovalTx, DeliveryTx, OutboxTx, TakeoverTx, Protocol
):
    """The statements of one transaction (or one consistent read)."""

    # -- routes: one SessionEntry per session key
    def get_route(self, session_key: str) -> SessionEntry | None: ...
    def prefetch_route(self, session_key: str) -> None:
        """A hint that the transaction will read this route: a backend whose every read is a
        round trip sends it now, to be answered with the next statement that is read."""
        ...

    def expect_route(self, entry: SessionEntry) -> None:
        """A hint that the route is `entry`, as the caller last saw it written: a backend whose
        every read is a round trip answers the transaction's reads of it with `entry`, and
        checks it at the server instead, with the write or before the commit. If the route is
        no longer `entry`, the commit raises `RouteChangedError` and nothing of the
        transaction is committed; the caller then runs it again without the hint."""
        ...

    def get_route_with_parts(self, session_key: str) -> tuple[SessionEntry, KeyParts] | None: ...
    def get_route_parts(self, session_key: str) -> KeyParts | None: ...
    def upsert_route(self, entry: SessionEntry, parts: KeyParts | None) -> None: ...
    def put_route(self, entry: SessionEntry, parts: KeyParts | None = None) -> None: ...
    def delete_route(self, session_key: str) -> bool: ...
    def route_by_session_id(self, session_id: str) -> SessionEntry | None: ...
    def iter_routes(self, *, since: datetime | None = None) -> Iterator[SessionEntry]: ...
    def count_routes(self) -> int: ...
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
    ) -> tuple[list[SessionEntry], int]: ...
    def label_taken(self, label: str, *, except_key: str | None = None) -> bool: ...

    # -- tombstones and identity aliases
    def tombstone_reason(self, session_key: str) -> str | None: ...
    def add_tombstone(self, session_key: str, *, reason: str, at: int) -> None: ...
    def alias_of(self, platform: str, alias: str) -> str | None: ...
    def is_alias_target(self, platform: str, ident: str) -> bool: ...
    def keys_a_lane(self, platform: str, ident: str) -> bool: ...
    def insert_alias(self, platform: str, alias: str, canonical: str, *, at: int) -> None: ...

    # -- session rows and the transcript tree
    def get_session_row(self, session_id: str) -> SessionRow | None: ...
    def unused_session_id(self, make: Callable[[], str]) -> str: ...
    def create_session_row(
        self,
        *,
        session_id: str,
        session_key: str | None,
        parent_session_id: str | None,
        started_at: int,
        header: dict[str, Any],
    ) -> SessionRow: ...
    def create_fresh_session_row(
        self,
        make_id: Callable[[], str],
        *,
        session_key: str | None,
        parent_session_id: str | None,
        started_at: int,
        header: Callable[[str], dict[str, Any]],
    ) -> str: ...
    def end_session_row(self, sid: int, *, at: int | None, reason: str | None) -> None: ...
    def save_counters(self, sid: int, counters: dict[str, Any]) -> None: ...
    def load_counters(self, sid: int) -> dict[str, Any] | None: ...
    def has_any_sessions(self) -> bool: ...
    def key_has_history(self, session_key: str) -> bool: ...
    def session_ids_of_key(self, session_key: str) -> list[str]: ...
    def sessions_of_lane(self, session_key: str, session_id: str) -> list[tuple[int, str, str]]: ...
    def delete_session_rows(self, sid: int) -> None: ...
    def insert_entries(
        self, session: SessionRow, records: Sequence[EntryRecord]
    ) -> tuple[list[int | None], SessionRow]: ...
    def append_entries(
        self, session_id: str, records: Sequence[EntryRecord]
    ) -> tuple[SessionRow, list[int | None]] | None:
        """`get_session_row` then `insert_entries`: the session as read before the append,
        and the new ids; None (nothing written) when there is no such session. One statement
        where the backend can (a transcript append is on every turn's path)."""
        ...

    def sends_ahead(self) -> bool:
        """Whether a write sent ahead (`append_entry_ahead`) saves a round trip here: in a
        transaction on a backend whose statements are round trips."""
        ...

    def append_entry_ahead(
        self, session_id: str, record: EntryRecord
    ) -> Callable[[], tuple[SessionRow, int | None] | None] | None:
        """`append_entries` of one record, sent without waiting for its answer (where
        `sends_ahead`): the returned function tells the result once the transaction
        committed (and waits for it before). None, with nothing sent, when the statement
        could fail on the record's text (its error would come with a later statement, where
        nothing can catch it alone): the caller appends it the usual way."""
        ...

    def entry_row(self, entry_id: int) -> EntryTuple | None: ...
    def all_entries(self, sid: int) -> list[EntryTuple]: ...
    def tips_with_headlines(
        self, tip_ids: list[int], max_hops: int
    ) -> dict[int, tuple[EntryTuple, EntryTuple]]: ...
    def load_path(
        self, sid: int, *, limit: int | None = None, messages_only: bool = True
    ) -> list[EntryTuple]: ...
    def user_turns_above(self, sid: int, depth: int) -> Iterable[EntryTuple]: ...
    def last_completed_depth(self, sid: int, leaf_depth: int) -> int: ...
    def move_leaf(
        self, session: SessionRow, target_id: int | None, *, release_keys: bool = False
    ) -> SessionRow: ...
    def release_off_path_keys(self, sid: int, keys: Sequence[str]) -> None: ...
    def list_tips(self, sid: int) -> list[int]: ...
    def latest_reset_depth(self, sid: int) -> int: ...
    def copy_path(self, source: SessionRow, target: SessionRow, upto_depth: int) -> SessionRow: ...
    def load_context_events(self, sid: int) -> list[dict[str, Any]]: ...
    def prefetch_context(
        self, session_id: str, max_depth: int | None, after: tuple[int, int] | None
    ) -> None:
        """A hint: `session_context_events` of the session (`session_context_tail` from
        `after`, an entry id and its depth, when given) is read right after this transaction
        commits. A backend whose reads are round trips sends it now, answered with the
        commit; the next transaction on the connection drops it unread."""
        ...

    def session_context_tail(
        self, session_id: str, max_depth: int | None, after_id: int, after_depth: int
    ) -> tuple[int, list[dict[str, Any]], bool] | None:
        """(leaf depth, events, continued): while the entry `after_id` is on the active path
        at `after_depth`, the events below it (`continued`); otherwise the whole path, as
        `session_context_events` gives it. No events when the leaf is deeper than
        `max_depth`; None when there is no such session."""
        ...

    def session_context_events(
        self, session_id: str, max_depth: int | None = None
    ) -> tuple[int, list[dict[str, Any]]] | None:
        """`get_session_row`, then `load_context_events` of it: the session's leaf depth and
        its active path's events ([] when the depth passes `max_depth`); None when there is
        no such session. One statement where the backend can (every turn reads its context)."""
        ...

    def keyed_path_messages(self, sid: int, prefix: str) -> list[tuple[str, EntryTuple]]: ...

    # -- the full-text side index
    def search_is_stale(self) -> bool: ...
    def mark_search_stale(self, reason: BaseException) -> None: ...
    def catch_up_search(self) -> int: ...
    def drop_session_from_search(self, sid: int) -> None: ...
    def lower_search_cursor(self) -> None: ...
    # `key_prefix` keeps only the sessions whose key starts with it (one agent's, `agent:<id>:`);
    # `tree_of` only that key's session and its forks' (keys starting `<key>:%f`). Both filter
    # in the query itself, so `limit` hits are the best-ranked of what may be seen.
    def search_index(
        self, query: str, limit: int, *, key_prefix: str | None = None, tree_of: str | None = None
    ) -> list[dict[str, Any]]: ...
    def search_scan(
        self, query: str, limit: int, *, key_prefix: str | None = None, tree_of: str | None = None
    ) -> list[dict[str, Any]]: ...
    def rebuild_search_index(self) -> int: ...
    def search_index_status(self) -> dict[str, Any]: ...
    def search_integrity_check(self) -> str | None: ...

    # -- the inbound queue and dedup records
    def get_inbox_row(self, inbox_id: int) -> InboxRow | None: ...
    def pending_slot(self, session_key: str) -> InboxRow | None: ...
    def next_pending(self, session_key: str) -> InboxRow | None: ...
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
    ) -> int: ...
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
        """`count_pending`, then `insert_inbox_row` when it found none: (the count, the new
        row's id or None when the lane had pending rows and nothing was written). One
        statement where the backend can (most messages find their lane idle)."""
        ...

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
    ) -> None: ...
    def claim_inbox_row(self, inbox_id: int, turn_id: int) -> None: ...
    def delete_inbox_row(self, inbox_id: int) -> None: ...
    def delete_pending_row(self, inbox_id: int) -> bool: ...
    def delete_pending(self, session_key: str) -> list[int]: ...
    def delete_pending_events(self, session_key: str, *, keep: int | None = None) -> list[int]: ...
    def has_pending(self, session_key: str) -> bool: ...
    def prefetch_pending(self, session_key: str) -> None:
        """A hint, as `prefetch_context`: `has_pending` of the lane right after the commit."""
        ...

    def count_pending(self, session_key: str) -> int: ...
    def count_pending_later(self, session_key: str) -> Callable[[], int]:
        """`count_pending` here, told by the returned function once the transaction committed
        (on a backend whose reads are round trips, it comes with the commit's answer)."""
        ...

    def lock_lane(self, session_key: str) -> None:
        """The lane's writer lock to the end of the transaction (a row lock on PostgreSQL,
        where several instances accept into one lane): accepts of a lane commit in order."""
        ...

    def count_pending_all(self) -> int: ...
    def lanes_with_pending(self) -> list[str]: ...
    def select_seen(
        self, platform: str, chat_id: str, message_id: str, *, session_key: str, sender_id: str
    ) -> SeenRow | None: ...
    def insert_seen(self, row: SeenRow) -> bool: ...
    def link_seen_to_turn(self, inbox_id: int, turn_id: int) -> None: ...
    def delete_seen_of_row(self, inbox_id: int) -> int: ...
    def prune_seen(self, before: int) -> int: ...

    # -- the turn journal, stuck-loop counters and markers
    def get_turn(self, turn_id: int) -> TurnRow | None: ...
    def turn_id_taken(self, turn_id: int) -> Callable[[], bool]:
        """Whether the journal holds a turn `turn_id`, told by the returned function once the
        transaction committed (on a backend whose reads are round trips, it comes with the
        commit's answer)."""
        ...

    def turns_in_state(self, state: TurnState) -> list[TurnRow]: ...
    def insert_turn(
        self,
        *,
        session_key: str,
        session_id: str,
        inbox_id: int,
        source: dict[str, Any],
        accepted_at: int,
        started_at: int,
    ) -> int: ...
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
        """`insert_inbox_row_if_idle`, then, when it wrote the row, `start_turn` of it for
        `session_id`: (the count, the row's id, the turn's id), or (count, None, None). One
        statement where the backend can (the first message of an idle lane starts so)."""
        ...

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
        """`insert_turn`, then `claim_inbox_row(inbox_id, <the turn>)`: the turn journaled
        running and its row claimed by it; the turn's id. Raises `LookupError` when the row is
        not pending (the caller's transaction then takes the turn back). One statement where
        the backend can (every turn starts so)."""
        ...

    def transition_turn(
        self,
        turn_id: int,
        to: TurnState,
        *,
        at: int,
        reply: str | None = None,
        error: str | None = None,
        resume: bool = False,
    ) -> None: ...
    def finish_reply(self, turn_id: int, *, at: int, reply: str, delivered: bool) -> None: ...
    def prune_turns(self, before: int) -> int: ...
    def get_restart_count(self, session_key: str) -> int: ...
    def bump_restart_count(self, session_key: str, *, at: int) -> int: ...
    def reset_restart_count(self, session_key: str) -> bool: ...
    def reset_restart_count_later(self, session_key: str) -> Callable[[], bool]:
        """`reset_restart_count`, whose answer (whether there was one) may be known only
        after the commit: call the result then."""
        ...

    def merge_restart_counts(self, counts: dict[str, int], *, at: int) -> None: ...
    def restart_counts(self) -> dict[str, int]: ...
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def pop_meta(self, key: str) -> str | None: ...

    # -- the change feed (`store/changes.py`)
    def note(self, change: object) -> None:
        """Record what this transaction changed; the backend tells its `on_commit` once the
        outermost transaction commits, and a rolled-back savepoint takes its notes back.
        Only inside `transaction()`: a read has nothing to tell. A function is called after
        the commit, and what it returns is told (`changes.told`)."""
        ...


class Backend(Protocol):
    """One database: its connections, transactions and lifetime.

    `transaction()` commits whole or rolls back and re-raises; a nested call is a savepoint.
    The driver's errors never leave the backend: they arrive as `StoreUnavailableError`,
    `StoreCorruptError`, `ConflictError` or `InvalidEntryError`.
    """

    # Where it lives, for messages and `sessiongate db status` (never holds a password).
    url: str
    # Whether several instances can share it (and so `Ownership` applies): PostgreSQL.
    shared: bool
    # Told the notes of each committed transaction (`Tx.note`), after the commit and outside
    # the backend's lock; None tells no one.
    on_commit: Callable[[list[object]], None] | None
    # Called inside the transaction, with its notes, just before a commit that noted changes:
    # what it writes commits with them (or nothing does). Any `Tx`-typed callable fits.
    before_commit: Any

    def transaction(self, *, savepoints: bool = True) -> contextlib.AbstractContextManager[Tx]:
        """With `savepoints=False` nested calls make none (except `savepoint()`), and one
        that fails having written dooms the transaction (its commit refuses): for groups
        whose callers never go on after a failed call inside them."""
        ...

    def savepoint(self) -> contextlib.AbstractContextManager[Tx]:
        """`transaction()`, rolled back alone when nested, also in a transaction whose nested
        calls make no savepoints: for a call whose caller handles its failure and goes on."""
        ...

    def read(self) -> contextlib.AbstractContextManager[Tx]: ...
    def snapshot(self) -> contextlib.AbstractContextManager[Tx]: ...
    def stream_routes(self, consume: Callable[[Iterable[tuple[str, str]]], None]) -> None:
        """Feed (session_key, entry JSON) pairs to `consume` from one consistent read, without
        holding them all in memory (the `sessions.json` mirror)."""
        ...

    def count_rows(self, table: TableSpec) -> int: ...
    def read_rows(
        self, table: TableSpec, after: Sequence[Any] | None, limit: int
    ) -> list[tuple[Any, ...]]:
        """A table's rows in key order after `after`, in seam values (`db copy`)."""
        ...

    def holds(self, tx: Tx) -> bool:
        """Whether `tx` is a transaction of this backend."""
        ...

    def scrub(self) -> None:
        """After an erasure committed: leave none of the deleted or overwritten text in the
        files (SQLite: VACUUM, then a TRUNCATE checkpoint of the log). Outside a
        transaction; may take long on a big database."""
        ...

    def give_back_space(self) -> None:
        """After deletions committed: return free pages to the file system where the
        backend can (SQLite's incremental vacuum); outside a transaction."""
        ...

    def disk_bytes(self) -> int:
        """What the database occupies (file and log, or the tables' total relation size)."""
        ...

    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...


class LeaseTx(Tx, Protocol):
    """The statements of many instances on one database (`postgres/leases.py` states the
    rules); times are the database's clock, TTLs in seconds."""

    def register_instance(self, instance_id: str, host: str, pid: int) -> None: ...
    def heartbeat(self, instance_id: str, ttl: float) -> int: ...
    def stop_instance(self, instance_id: str) -> None: ...
    def mark_dead(self, stale_after: float) -> list[str]: ...
    def list_instances(self) -> list[dict[str, Any]]: ...
    def claim_lane(self, key: str, owner: str, ttl: float) -> int | None: ...
    def fence_lane(self, key: str, owner: str, epoch: int, ttl: float) -> None:
        """Renew the lane's lease at `epoch` as the transaction's first statement, or fail the
        transaction with `LeaseLostError`: here, at a later statement, or at the commit (the
        renewal's answer is not waited for before the next statements are sent)."""
        ...

    def release_lane(self, key: str, owner: str, epoch: int) -> bool: ...
    def lanes_wanting_owner(self, owner: str, limit: int) -> list[str]: ...
    def lane_in_flight(self, key: str) -> list[int]: ...
    def nudge_lane_owner(self, key: str, me: str) -> bool: ...
    def reap_vanished(self, me: str, late: float, grace: float) -> list[str]: ...
    def claim_leader(self, name: str, owner: str, ttl: float) -> int | None: ...
    def hold_leader(self, name: str, owner: str, epoch: int, ttl: float) -> bool: ...
    def release_leader(self, name: str, owner: str, epoch: int) -> bool: ...


class LeaseBackend(Protocol):
    """A backend several instances can share (PostgreSQL); SQLite is one instance's own."""

    url: str

    def transaction(self, *, savepoints: bool = True) -> contextlib.AbstractContextManager[LeaseTx]:
        """With `savepoints=False` nested calls make none (except `savepoint()`), and one
        that fails dooms the transaction: for the fence, whose callers never go on after a
        failed call inside it."""
        ...

    def read(self) -> contextlib.AbstractContextManager[LeaseTx]:
        """Statements outside a transaction, each committed on its own: for a lease statement
        that needs no transaction around it (it saves the `BEGIN` and `COMMIT` round trips)."""
        ...
