"""`HookReceiptStore`: the delivery ids inbound webhook routes took, one transaction per call.

The rules (a sender retries a delivery it saw no answer to):
- A delivery id is taken by a row unique per (route, id), committed before its turn is
  handed over; a second take finds the row and is a duplicate that runs nothing, on this
  process after a restart or on another instance sharing a PostgreSQL database.
- The row records the turn once it was accepted. A row with no turn is a take whose hand-off
  failed (the take is then given back, so a retry runs) or was cut short by a crash: after
  `ABANDONED` it may be taken again, keeping its time. The turn goes in under a message id
  made of the route, the id and that time, so a turn the crash did accept (or a second
  retake at the same moment) is the runner's duplicate, not a second turn; a delivery id
  taken again after its receipt was purged is a new delivery with a new message id.
- Rows are kept at least `hooks.dedupe_hours` (24 h or more) from their take; housekeeping
  purges older ones. Times are the injected clock's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from sessiongate.store.records import from_us, to_us

if TYPE_CHECKING:
    from datetime import datetime

    from sessiongate.core.clock import Clock
    from sessiongate.store.records import HookReceiptRow
    from sessiongate.store.session_store import SessionStore

__all__ = ["ABANDONED", "HookReceipt", "HookReceiptStore"]

# A take whose turn was not recorded this long after is one a crash cut short.
ABANDONED = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class HookReceipt:
    route: str
    delivery_id: str
    received_at: datetime
    turn_id: int | None
    session_key: str | None


def _receipt(row: HookReceiptRow) -> HookReceipt:
    return HookReceipt(
        row.route, row.delivery_id, from_us(row.received_at), row.turn_id, row.session_key
    )


class HookReceiptStore:
    def __init__(self, store: SessionStore, *, clock: Clock | None = None) -> None:
        self._db = store.database
        self._clock: Clock = clock or store.clock

    def take(self, route: str, delivery_id: str) -> tuple[bool, HookReceipt]:
        """Take a delivery id: (True, its receipt) when it is new or an abandoned take, taken
        again; (False, the earlier take's receipt) for a duplicate."""
        now = self._clock.now()
        with self._db.transaction() as conn:
            row = None
            if not conn.insert_hook_receipt(route, delivery_id, to_us(now)):
                row = conn.get_hook_receipt(route, delivery_id)
            if row is None:
                return True, HookReceipt(route, delivery_id, now, None, None)
            if row.turn_id is None and now - from_us(row.received_at) >= ABANDONED:
                return True, _receipt(row)
            return False, _receipt(row)

    def accepted(
        self, route: str, delivery_id: str, *, turn_id: int | None, session_key: str | None
    ) -> None:
        with self._db.transaction() as conn:
            conn.set_hook_receipt_turn(route, delivery_id, turn_id=turn_id, session_key=session_key)

    def give_back(self, route: str, delivery_id: str) -> None:
        """Its turn was not accepted: a retry of the delivery runs."""
        with self._db.transaction() as conn:
            conn.delete_hook_receipt(route, delivery_id)

    def get(self, route: str, delivery_id: str) -> HookReceipt | None:
        with self._db.read() as conn:
            row = conn.get_hook_receipt(route, delivery_id)
        return None if row is None else _receipt(row)

    def purge(self, keep: timedelta) -> int:
        """Forget receipts taken longer than `keep` ago; how many went."""
        before = to_us(self._clock.now() - keep)
        with self._db.transaction() as conn:
            return conn.purge_hook_receipts(before)
