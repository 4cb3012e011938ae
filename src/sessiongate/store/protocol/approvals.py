"""The `approvals` family: tool calls waiting for a person's approval (`store/approvals.py`
states the rules). SQLite: `sqlite/approvals.py`; PostgreSQL: `postgres/approvals.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sessiongate.store.records import ApprovalRow

__all__ = ["ApprovalTx"]


class ApprovalTx(Protocol):
    """Tool calls waiting for a person's approval (`store/approvals.py` states the rules):
    one row per call of a turn, holding the exact arguments shown and their SHA-256. Times
    are integer microseconds; `approvers` crosses as JSON text."""

    def insert_approval(self, row: ApprovalRow) -> bool:
        """Store a new approval; False when its call (turn id, call id) has one already."""
        ...

    def get_approval(self, approval_id: str) -> ApprovalRow | None:
        """One approval; None when there is no such approval."""
        ...

    def approval_for_call(self, turn_id: int, call_id: str) -> ApprovalRow | None:
        """The approval of a turn's tool call; None when it has none."""
        ...

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
