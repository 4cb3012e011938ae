"""The `inbox` family: the inbound queue of each lane and the dedup records of inbound
message ids.

A lane has at most one pending `slot` (follow-ups merge into it) and any number of queued
rows; a turn claims one pending row, and a claimed row is deleted with its turn's outcome.
SQLite: `sqlite/inbox.py`; PostgreSQL: `postgres/inbox.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sessiongate.store.records import InboxKind, InboxRow, SeenRow

__all__ = ["InboxTx"]


class InboxTx(Protocol):
    """Inbox rows and seen records; times are integer microseconds."""

    def get_inbox_row(self, inbox_id: int) -> InboxRow | None:
        """One row, pending or claimed; None when there is no such row."""
        ...

    def pending_slot(self, session_key: str) -> InboxRow | None:
        """The lane's pending slot, if any."""
        ...

    def next_pending(self, session_key: str) -> InboxRow | None:
        """The row the lane runs next: its slot, else its oldest queued row; None when
        nothing is pending."""
        ...

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
        """Add a pending row holding one part (`part["text"]` is its text); its id."""
        ...

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
    ) -> None:
        """Merge one follow-up into the pending slot (parts, media and message ids are
        appended, never overwritten); `LookupError` when `slot` is no longer a pending
        slot."""
        ...

    def claim_inbox_row(self, inbox_id: int, turn_id: int) -> None:
        """Mark a pending row claimed by `turn_id`; `LookupError` when it is not pending."""
        ...

    def delete_inbox_row(self, inbox_id: int) -> None:
        """Delete a row (its turn's outcome is written); nothing when it is gone."""
        ...

    def delete_pending_row(self, inbox_id: int) -> bool:
        """Delete one row if it is still pending (never a claimed one); whether it was."""
        ...

    def delete_pending(self, session_key: str) -> list[int]:
        """Delete the lane's pending rows (slot and queue, for `/new`); their ids, sorted."""
        ...

    def delete_pending_events(self, session_key: str, *, keep: int | None = None) -> list[int]:
        """Delete the lane's pending system events except row `keep`; their ids, sorted."""
        ...

    def has_pending(self, session_key: str) -> bool:
        """Whether the lane has a pending row."""
        ...

    def count_pending(self, session_key: str) -> int:
        """How many rows the lane has pending."""
        ...

    def lock_lane(self, session_key: str) -> None:
        """The lane's writer lock to the end of the transaction (a row lock on PostgreSQL,
        where several instances accept into one lane; nothing on SQLite, whose writer lock
        is the database's): accepts of a lane commit in order."""
        ...

    def count_pending_all(self) -> int:
        """How many rows are pending over all lanes."""
        ...

    def lanes_with_pending(self) -> list[str]:
        """The keys of lanes with pending rows, the one waiting longest first."""
        ...

    def select_seen(
        self, platform: str, chat_id: str, message_id: str, *, session_key: str, sender_id: str
    ) -> SeenRow | None:
        """The record of this message id from this sender in this lane; None when unseen."""
        ...

    def insert_seen(self, row: SeenRow) -> bool:
        """Remember one inbound message id; False (nothing written) when already seen."""
        ...

    def link_seen_to_turn(self, inbox_id: int, turn_id: int) -> None:
        """Name `turn_id` on the seen records of the row that has none yet."""
        ...

    def delete_seen_of_row(self, inbox_id: int) -> int:
        """Forget the seen records of a row dropped unrun, so a retry of its messages is
        accepted again; how many."""
        ...

    def prune_seen(self, before: int) -> int:
        """Forget seen records older than `before` whose row is gone; how many."""
        ...
