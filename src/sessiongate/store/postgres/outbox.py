"""The outbox on PostgreSQL of outbound webhook events (`store/outbox.py`).

`PostgresOutbox` is the `OutboxTx` half of `PostgresTx`; every method runs inside the caller's
transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.records import OutboxRow

if TYPE_CHECKING:
    from collections.abc import Sequence

    import psycopg

__all__ = ["PostgresOutbox"]

_COLUMNS = (
    "id, event_id, target, event, session_key, body, status, attempts, reason, "
    "sg_us(created_at), sg_us(updated_at), sg_us(next_at)"
)


class PostgresOutbox:
    __slots__ = ()
    conn: psycopg.Connection[Any]

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
            "created_at, updated_at, next_at) "
            "VALUES (%s, %s, %s, %s, %s, 'pending', sg_ts(%s), sg_ts(%s), sg_ts(%s))",
            (event_id, target, event, session_key, body, at, at, at),
        )

    def unsent_outbox(self, limit: int) -> list[OutboxRow]:
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM webhook_outbox WHERE status = 'pending' "  # noqa: S608  # constant columns
            "ORDER BY id LIMIT %s",
            (limit,),
        ).fetchall()
        return [OutboxRow(*row) for row in rows]

    def list_outbox(self, statuses: Sequence[str], limit: int) -> list[OutboxRow]:
        where = "WHERE status = ANY(%s) " if statuses else ""
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM webhook_outbox {where}ORDER BY id DESC LIMIT %s",  # noqa: S608  # constant text
            (list(statuses), limit) if statuses else (limit,),
        ).fetchall()
        return [OutboxRow(*row) for row in rows]

    def get_outbox(self, outbox_id: int) -> OutboxRow | None:
        row = self.conn.execute(
            f"SELECT {_COLUMNS} FROM webhook_outbox WHERE id = %s",  # noqa: S608  # constant columns
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
            "UPDATE webhook_outbox SET status = %s, attempts = %s, reason = %s, "
            "next_at = sg_ts(%s), updated_at = sg_ts(%s) WHERE id = %s",
            (status, attempts, reason, next_at, at, outbox_id),
        )

    def reopen_outbox(self, outbox_id: int, at: int) -> bool:
        return bool(
            self.conn.execute(
                "UPDATE webhook_outbox SET status = 'pending', attempts = 0, reason = NULL, "
                "next_at = sg_ts(%s), updated_at = sg_ts(%s) WHERE id = %s AND status = 'dead'",
                (at, at, outbox_id),
            ).rowcount
        )
