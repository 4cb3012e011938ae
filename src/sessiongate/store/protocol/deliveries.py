"""The `deliveries` family: outbound messages (`store/deliveries.py`) and outbound webhook
events (`store/outbox.py`). SQLite: `sqlite/deliveries.py`, `sqlite/outbox.py`; PostgreSQL:
`postgres/deliveries.py`, `postgres/outbox.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sessiongate.store.records import DeliveryRow, OutboxRow

__all__ = ["DeliveryTx", "OutboxTx"]


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

    def get_delivery(self, delivery_id: int) -> DeliveryRow | None:
        """One row; None when there is no such row."""
        ...

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
    ) -> bool:
        """Write the outcome of a try: status, tries, the platform's message id, the reason
        and when it is due next, written at `at`; False when there is no such row."""
        ...

    def reopen_delivery(self, delivery_id: int, at: int) -> bool:
        """A `failed` or `dead` row back to `pending`, due at `at`, its tries and reason
        forgotten and its age counted from `at`; False when it is neither."""
        ...

    def prune_sent(self, before: int) -> int:
        """Forget sent deliveries and sent webhook events last written before `before`;
        how many rows went."""
        ...

    def count_deliveries(self) -> dict[str, int]:
        """How many rows per status (a status without rows is left out)."""
        ...


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
    ) -> None:
        """A new `pending` event for `target`, written and due at `at`; `body` is its JSON
        text and `event_id` its unique id (a second insert of it raises `ConflictError`)."""
        ...

    def unsent_outbox(self, limit: int) -> list[OutboxRow]:
        """`pending` rows, the oldest first (due or not: order per session is the caller's)."""
        ...

    def list_outbox(self, statuses: Sequence[str], limit: int) -> list[OutboxRow]:
        """The newest first; every status when `statuses` is empty."""
        ...

    def get_outbox(self, outbox_id: int) -> OutboxRow | None:
        """One row; None when there is no such row."""
        ...

    def set_outbox(
        self,
        outbox_id: int,
        *,
        status: str,
        attempts: int,
        reason: str | None,
        next_at: int,
        at: int,
    ) -> None:
        """Write the outcome of a try: status, tries, reason and when it is due next,
        written at `at` (nothing when there is no such row)."""
        ...

    def reopen_outbox(self, outbox_id: int, at: int) -> bool:
        """A `dead` row back to `pending`, due at `at`, its tries forgotten."""
        ...
