"""The `hook_receipts` family: the delivery ids inbound webhook routes took
(`store/hook_receipts.py` states the rules). SQLite: `sqlite/hook_receipts.py`; PostgreSQL:
`postgres/hook_receipts.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sessiongate.store.records import HookReceiptRow

__all__ = ["HookReceiptTx"]


class HookReceiptTx(Protocol):
    """Delivery ids inbound webhook routes took, one row per (route, delivery id); every
    method runs in the caller's transaction, and times are integer microseconds."""

    def get_hook_receipt(self, route: str, delivery_id: str) -> HookReceiptRow | None:
        """The receipt of `delivery_id` on `route`, or None when it was never taken (or was
        given back or purged). Never fails for an unknown pair."""
        ...

    def insert_hook_receipt(self, route: str, delivery_id: str, at: int) -> bool:
        """Take `delivery_id` on `route`, received at `at`: True when this call took it, False
        when the route already has that delivery id (the unique key decides, so of two racing
        requests exactly one gets True)."""
        ...

    def set_hook_receipt_turn(
        self, route: str, delivery_id: str, *, turn_id: int | None, session_key: str | None
    ) -> None:
        """Record the turn (and its session key) a taken delivery id was handed to; a missing
        receipt is left missing (no error)."""
        ...

    def delete_hook_receipt(self, route: str, delivery_id: str) -> None:
        """Give a delivery id back (its request was refused after it was taken), so the
        sender's retry runs; a missing receipt is no error."""
        ...

    def purge_hook_receipts(self, before: int) -> int:
        """Forget the receipts received before `before`; returns how many went."""
        ...
