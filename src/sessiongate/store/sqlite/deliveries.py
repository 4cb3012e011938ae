"""SQL for deliveries: every outbound message and its outcome (`store/deliveries.py`).

`SqliteDeliveries` is the `DeliveryTx` half of `SqliteTx`; every method runs inside the
caller's transaction, and `store.deliveries.DeliveryStore` is the only caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.store.records import DeliveryRow

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

__all__ = ["SqliteDeliveries"]

_COLUMNS = (
    "id, kind, turn_id, session_key, platform, source, text, status, attempts, message_id, "
    "reason, created_at, updated_at, next_at"
)


def _row(row: tuple[object, ...] | None) -> DeliveryRow | None:
    return None if row is None else DeliveryRow(*row)  # type: ignore[arg-type]  # column order


class SqliteDeliveries:
    __slots__ = ()
    conn: sqlite3.Connection

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
        """A new `pending` row, due at `next_at` (at once by default); a turn's second reply
        row is the first's id."""
        row = self.conn.execute(
            "INSERT INTO deliveries (kind, turn_id, session_key, platform, source, text, "
            "status, created_at, updated_at, next_at) "
            "VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT DO NOTHING RETURNING id",
            (
                kind,
                turn_id,
                session_key,
                platform,
                source,
                text,
                at,
                at,
                at if next_at is None else next_at,
            ),
        ).fetchone()
        if row is not None:
            return int(row[0])
        found = self.delivery_of_turn(turn_id) if turn_id is not None else None
        if found is None:  # pragma: no cover - only the reply index can conflict
            raise LookupError("delivery conflict without a reply row")
        return found.id

    def get_delivery(self, delivery_id: int) -> DeliveryRow | None:
        return _row(
            self.conn.execute(
                f"SELECT {_COLUMNS} FROM deliveries WHERE id = ?",  # noqa: S608  # constant columns
                (delivery_id,),
            ).fetchone()
        )

    def delivery_of_turn(self, turn_id: int) -> DeliveryRow | None:
        return _row(
            self.conn.execute(
                f"SELECT {_COLUMNS} FROM deliveries WHERE turn_id = ? AND kind = 'reply'",  # noqa: S608  # constant columns
                (turn_id,),
            ).fetchone()
        )

    def list_deliveries(self, statuses: Sequence[str], limit: int) -> list[DeliveryRow]:
        """The newest first; every status when `statuses` is empty."""
        marks = ", ".join("?" for _ in statuses)
        where = f"WHERE status IN ({marks}) " if statuses else ""
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM deliveries {where}ORDER BY id DESC LIMIT ?",  # noqa: S608  # placeholders only
            (*statuses, limit),
        ).fetchall()
        return [DeliveryRow(*row) for row in rows]

    def due_deliveries(self, now: int, limit: int) -> list[DeliveryRow]:
        """`pending` and `failed` rows whose next try is due, the oldest first."""
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM deliveries WHERE status IN ('pending', 'failed') "  # noqa: S608  # constant columns
            "AND next_at <= ? ORDER BY id LIMIT ?",
            (now, limit),
        ).fetchall()
        return [DeliveryRow(*row) for row in rows]

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
        return bool(
            self.conn.execute(
                "UPDATE deliveries SET status = ?, attempts = ?, message_id = ?, reason = ?, "
                "next_at = ?, updated_at = ? WHERE id = ?",
                (status, attempts, message_id, reason, next_at, at, delivery_id),
            ).rowcount
        )

    def reopen_delivery(self, delivery_id: int, at: int) -> bool:
        """A `failed` or `dead` row back to `pending`, due at `at`, its tries and reason
        forgotten and its age counted from `at` (the operator chose to send it)."""
        return bool(
            self.conn.execute(
                "UPDATE deliveries SET status = 'pending', attempts = 0, message_id = NULL, "
                "reason = NULL, created_at = ?, updated_at = ?, next_at = ? "
                "WHERE id = ? AND status IN ('failed', 'dead')",
                (at, at, at, delivery_id),
            ).rowcount
        )

    def prune_sent(self, before: int) -> int:
        """Forget sent deliveries and sent webhook events last written before `before`
        (what failed stays listed until retried or erased)."""
        deliveries = self.conn.execute(
            "DELETE FROM deliveries WHERE status = 'sent' AND updated_at < ?", (before,)
        ).rowcount
        events = self.conn.execute(
            "DELETE FROM webhook_outbox WHERE status = 'sent' AND updated_at < ?", (before,)
        ).rowcount
        return int(deliveries) + int(events)

    def count_deliveries(self) -> dict[str, int]:
        rows = self.conn.execute("SELECT status, count(*) FROM deliveries GROUP BY status")
        return {str(status): int(n) for status, n in rows}
