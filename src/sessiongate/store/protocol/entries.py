"""The `entries` family: the transcript tree of a session. Entries hang off their parent;
the active path is the entries marked `on_path` from the root to the session's leaf, and a
branch tip is a leaf the path left behind.

SQLite: `sqlite/entries.py`; PostgreSQL: `postgres/entries.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from sessiongate.store.records import EntryRecord, EntryRow, PathMessageRow, SessionRow

__all__ = ["EntriesTx"]


class EntriesTx(Protocol):
    """Entries are `EntryRow`s; an entry's depth counts the entries from the root down to
    it, its message depth the `message` entries among them. Text that a column cannot hold
    (NUL, a lone surrogate) is refused with `InvalidEntryError`."""

    def insert_entries(
        self, session: SessionRow, records: Sequence[EntryRecord]
    ) -> tuple[list[int | None], SessionRow]:
        """Append `records` as a chain below the session's leaf, each on the active path. A
        record whose idempotency key the session already holds is skipped. The new ids (None
        for a skipped one) and the session with its new leaf."""
        ...

    def append_entries(
        self, session_id: str, records: Sequence[EntryRecord]
    ) -> tuple[SessionRow, list[int | None]] | None:
        """`get_session_row` then `insert_entries`: the session as read before the append,
        and the new ids; None (nothing written) when there is no such session. One statement
        where the backend can (a transcript append is on every turn's path)."""
        ...

    def entry_row(self, entry_id: int) -> EntryRow | None:
        """One entry, of any session; None when there is no such entry."""
        ...

    def all_entries(self, sid: int) -> list[EntryRow]:
        """Every entry of the session, on the path or not, by id."""
        ...

    def tips_with_headlines(
        self, tip_ids: list[int], max_hops: int
    ) -> dict[int, tuple[EntryRow, EntryRow]]:
        """Tip id -> (its entry, the entry its headline comes from: the nearest user message
        at most `max_hops` entries up, else the tip itself); unknown ids are left out."""
        ...

    def load_path(
        self, sid: int, *, limit: int | None = None, messages_only: bool = True
    ) -> list[EntryRow]:
        """The active path, root first: its `message` entries only unless `messages_only` is
        false; with `limit`, only the last `limit` of them."""
        ...

    def tail_messages(self, session_id: str, limit: int | None) -> list[EntryRow] | None:
        """`get_session_row` then `load_path(sid, limit=limit)`: the last `limit` messages of
        the session's active path (all of them with None), root first; None when there is no
        such session. One statement where the backend can (a transcript's tail is the most
        frequent read)."""
        ...

    def user_turns_above(self, sid: int, depth: int) -> Iterable[PathMessageRow]:
        """The active path's messages deeper than `depth`, the deepest first (a rewind walks
        them up to the n-th user message)."""
        ...

    def last_completed_depth(self, sid: int, leaf_depth: int) -> int:
        """The depth just above the first message after the last completed turn (an
        assistant message without tool calls) on the active path: a fork cut there takes no
        dangling tool call. `leaf_depth` when no message follows it."""
        ...

    def move_leaf(
        self, session: SessionRow, target_id: int | None, *, release_keys: bool = False
    ) -> SessionRow:
        """Make the path to `target_id` (None: before the first entry) the active path; the
        old leaf, if it left the path with no child, becomes a branch tip. `release_keys`
        (rewind, rewrite) clears the idempotency keys of the entries leaving the path, so the
        same message sent again lands on the new path. Bumps the session's generation;
        `LookupError` when the target is not an entry of this session. The session as it is
        now."""
        ...

    def release_off_path_keys(self, sid: int, keys: Sequence[str]) -> None:
        """Clear these idempotency keys from the session's entries off the active path (a
        rewrite is the authority on its message ids)."""
        ...

    def list_tips(self, sid: int) -> list[int]:
        """The session's branch tips (entry ids), in id order."""
        ...

    def latest_reset_depth(self, sid: int) -> int:
        """Depth of the latest `reset` on the active path, 0 when there is none: rewinds stay
        below it."""
        ...

    def copy_path(self, source: SessionRow, target: SessionRow, upto_depth: int) -> SessionRow:
        """Copy the source's active path down to `upto_depth` into the empty `target` session
        (ids in the payloads that name copied entries are pointed at the copies); the target
        with its new leaf."""
        ...

    def load_context_events(self, sid: int) -> list[dict[str, Any]]:
        """The active path as the slim events the model-context builder reads (`id`, `type`,
        `role`, `content` and the payload's fields; no timestamps, no tree links)."""
        ...

    def session_context_events(
        self, session_id: str, max_depth: int | None = None
    ) -> tuple[int, list[dict[str, Any]]] | None:
        """`get_session_row`, then `load_context_events` of it: the session's leaf depth and
        its active path's events ([] when the depth passes `max_depth`); None when there is
        no such session. One statement where the backend can (every turn reads its context)."""
        ...

    def session_context_tail(
        self, session_id: str, max_depth: int | None, after_id: int, after_depth: int
    ) -> tuple[int, list[dict[str, Any]], bool] | None:
        """(leaf depth, events, continued): while the entry `after_id` is on the active path
        at `after_depth`, the events below it (`continued`); otherwise the whole path, as
        `session_context_events` gives it. No events when the leaf is deeper than
        `max_depth`; None when there is no such session."""
        ...

    def keyed_path_messages(self, sid: int, prefix: str) -> list[tuple[str, EntryRow]]:
        """(idempotency key, entry) of the active path's messages whose key starts with
        `prefix` (not empty), in no particular order: what a resumed turn already stored."""
        ...
