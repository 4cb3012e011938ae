"""SQL for the delivery ids inbound webhook routes took (`store/hook_receipts.py`).

`SqliteHookReceipts` is the `HookReceiptTx` half of `SqliteTx`; every method runs inside the
caller's transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.store.records import HookReceiptRow

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SqliteHookReceipts"]


class SqliteHookReceipts:
    __slots__ = ()
    conn: sqlite3.Connection

    def get_hook_receipt(self, route: str, delivery_id: str) -> HookReceiptRow | None:
        row = self.conn.execute(
            "SELECT route, delivery_id, received_at, turn_id, session_key FROM hook_receipts "
            "WHERE route = ? AND delivery_id = ?",
            (route, delivery_id),
        ).fetchone()
        return None if row is None else HookReceiptRow(*row)

    def insert_hook_receipt(self, route: str, delivery_id: str, at: int) -> bool:
        cursor = self.conn.execute(
            "INSERT INTO hook_receipts (route, delivery_id, received_at) VALUES (?, ?, ?) "
            "ON CONFLICT (route, delivery_id) DO NOTHING",
            (route, delivery_id, at),
        )
        return cursor.rowcount == 1

    def set_hook_receipt_turn(
        self, route: str, delivery_id: str, *, turn_id: int | None, session_key: str | None
    ) -> None:
        self.conn.execute(
            "UPDATE hook_receipts SET turn_id = ?, session_key = ? "
            "WHERE route = ? AND delivery_id = ?",
            (turn_id, session_key, route, delivery_id),
        )

    def delete_hook_receipt(self, route: str, delivery_id: str) -> None:
        self.conn.execute(
            "DELETE FROM hook_receipts WHERE route = ? AND delivery_id = ?", (route, delivery_id)
        )

    def purge_hook_receipts(self, before: int) -> int:
        cursor = self.conn.execute("DELETE FROM hook_receipts WHERE received_at < ?", (before,))
        return cursor.rowcount
