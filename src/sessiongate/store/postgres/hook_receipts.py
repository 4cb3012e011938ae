"""SQL on PostgreSQL for the delivery ids inbound webhook routes took (`store/hook_receipts.py`).

`PostgresHookReceipts` is the `HookReceiptTx` half of `PostgresTx`; every method runs inside the
caller's transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.records import HookReceiptRow

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresHookReceipts"]


class PostgresHookReceipts:
    __slots__ = ()
    conn: psycopg.Connection[Any]

    def get_hook_receipt(self, route: str, delivery_id: str) -> HookReceiptRow | None:
        row = self.conn.execute(
            "SELECT route, delivery_id, sg_us(received_at), turn_id, session_key "
            "FROM hook_receipts WHERE route = %s AND delivery_id = %s",
            (route, delivery_id),
        ).fetchone()
        return None if row is None else HookReceiptRow(*row)

    def insert_hook_receipt(self, route: str, delivery_id: str, at: int) -> bool:
        cursor = self.conn.execute(
            "INSERT INTO hook_receipts (route, delivery_id, received_at) "
            "VALUES (%s, %s, sg_ts(%s)) ON CONFLICT (route, delivery_id) DO NOTHING",
            (route, delivery_id, at),
        )
        return cursor.rowcount == 1

    def set_hook_receipt_turn(
        self, route: str, delivery_id: str, *, turn_id: int | None, session_key: str | None
    ) -> None:
        self.conn.execute(
            "UPDATE hook_receipts SET turn_id = %s, session_key = %s "
            "WHERE route = %s AND delivery_id = %s",
            (turn_id, session_key, route, delivery_id),
        )

    def delete_hook_receipt(self, route: str, delivery_id: str) -> None:
        self.conn.execute(
            "DELETE FROM hook_receipts WHERE route = %s AND delivery_id = %s", (route, delivery_id)
        )

    def purge_hook_receipts(self, before: int) -> int:
        cursor = self.conn.execute(
            "DELETE FROM hook_receipts WHERE received_at < sg_ts(%s)", (before,)
        )
        return cursor.rowcount
