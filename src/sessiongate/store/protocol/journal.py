"""The `journal` family: the turn journal (each turn's state machine, `records.TRANSITIONS`),
the per-lane restart counters of the stuck-loop guard, and the `meta` key-value markers.

SQLite: `sqlite/journal.py`; PostgreSQL: `postgres/journal.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sessiongate.store.records import InboxKind, TurnRow, TurnState

__all__ = ["JournalTx"]


class JournalTx(Protocol):
    """Turns, restart counters and meta; times are integer microseconds. A transition the
    state table does not allow raises `StaleWriteError` (`records.refused_turn`)."""

    def get_turn(self, turn_id: int) -> TurnRow | None:
        """One turn; None when there is no such turn (or it was pruned)."""
        ...

    def turns_in_state(self, state: TurnState) -> list[TurnRow]:
        """The turns now in `state`, by id."""
        ...

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
        """A new turn journalled `running`; its id, which is its inbox row's when that id is
        free (else the next one above the journal's)."""
        ...

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
    ) -> None:
        """Move a turn to `to` when `TRANSITIONS` allows it from its state, stamping the
        time of the state reached at `at` and keeping `reply`/`error` when given; `resume`
        (accepted -> running) counts one more attempt and resume. `StaleWriteError` when it
        is not allowed (or there is no such turn)."""
        ...

    def finish_reply(self, turn_id: int, *, at: int, reply: str, delivered: bool) -> None:
        """`transition_turn` to `replied` (`delivered` when `delivered`) with `reply`, for a
        running turn. A refusal raises `StaleWriteError`, on PostgreSQL possibly only with a
        later statement or the commit (the answer is not waited for)."""
        ...

    def prune_turns(self, before: int) -> int:
        """Forget finished turns (delivered, failed, interrupted) that ended before
        `before`; how many."""
        ...

    def get_restart_count(self, session_key: str) -> int:
        """How many times the lane's turn was restarted by recovery; 0 when never."""
        ...

    def bump_restart_count(self, session_key: str, *, at: int) -> int:
        """Count one more restart of the lane's turn; the new count."""
        ...

    def reset_restart_count(self, session_key: str) -> bool:
        """Forget the lane's restart count; whether it had one."""
        ...

    def merge_restart_counts(self, counts: dict[str, int], *, at: int) -> None:
        """Take the larger of the stored and the given count per key (file mirror ->
        database); counts of 0 are ignored."""
        ...

    def restart_counts(self) -> dict[str, int]:
        """Every lane's restart count, by key."""
        ...

    def get_meta(self, key: str) -> str | None:
        """The meta value of `key`; None when unset."""
        ...

    def set_meta(self, key: str, value: str) -> None:
        """Set (or replace) the meta value of `key`."""
        ...

    def pop_meta(self, key: str) -> str | None:
        """Remove `key` from meta; its value, or None when it was unset."""
        ...
