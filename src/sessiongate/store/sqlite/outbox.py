"""SQL for the outbox of outbound webhook events (`store/outbox.py`).

`SqliteOutbox` is the `OutboxTx` half of `SqliteTx`; every method runs inside the caller's
transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.store.records import OutboxRow

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

__all__ = ["SqliteOutbox"]

_COLUMNS = (
    "id, event_id, target, event, session_key, body, status, attempts, reason, created_at, "
    "updated_at, next_at"
)


class SqliteOutbox:
    __slots__ = ()
    conn: sqlite3.Connection

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
        self.conn.execute(
            "INSERT INTO webhook_outbox (event_id, target, event, session_key, body, status, "
            "created_at, updated_at, next_at) VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?)",
            (event_id, target, event, session_key, body, at, at, at),
        )

    def unsent_outbox(self, limit: int) -> list[OutboxRow]:
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM webhook_outbox WHERE status = 'pending' "  # noqa: S608  # constant columns
            "ORDER BY id LIMIT ?",
            (limit,),
        ).fetchall()
        return [OutboxRow(*row) for row in rows]

    def list_outbox(self, statuses: Sequence[str], limit: int) -> list[OutboxRow]:
        marks = ", ".join("?" for _ in statuses)
        where = f"WHERE status IN ({marks}) " if statuses else ""
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM webhook_outbox {where}ORDER BY id DESC LIMIT ?",  # noqa: S608  # placeholders only
            (*statuses, limit),
        ).fetchall()
        return [OutboxRow(*row) for row in rows]

    def get_outbox(self, outbox_id: int) -> OutboxRow | None:
        row = self.conn.execute(
            f"SELECT {_COLUMNS} FROM webhook_outbox WHERE id = ?",  # noqa: S608  # constant columns
            (outbox_id,),
        ).fetchone()
        return None if row is None else OutboxRow(*row)

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
        self.conn.execute(
            "UPDATE webhook_outbox SET status = ?, attempts = ?, reason = ?, next_at = ?, "
            "updated_at = ? WHERE id = ?",
            (status, attempts, reason, next_at, at, outbox_id),
        )

    def reopen_outbox(self, outbox_id: int, at: int) -> bool:
        return bool(
            self.conn.execute(
                "UPDATE webhook_outbox SET status = 'pending', attempts = 0, reason = NULL, "
                "next_at = ?, updated_at = ? WHERE id = ? AND status = 'dead'",
                (at, at, outbox_id),
            ).rowcount
        )
