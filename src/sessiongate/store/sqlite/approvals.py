"""SQL for tool calls waiting for approval, on SQLite.

`SqliteApprovals` is the `ApprovalTx` half of `SqliteTx`; every method runs inside the
caller's transaction, and `store.approvals.ApprovalBook` is the only caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.store.records import ApprovalRow

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SqliteApprovals"]

_COLUMNS = (
    "id, turn_id, call_id, session_key, tool, arguments, arguments_sha256, approvers, status, "
    "requested_at, expires_at, decided_at, decided_by, used"
)


def _row(row: tuple[object, ...]) -> ApprovalRow:
    values = list(row)
    values[-1] = bool(values[-1])
    return ApprovalRow(*values)  # type: ignore[arg-type]  # columns in declaration order


class SqliteApprovals:
    __slots__ = ()
    conn: sqlite3.Connection

    def insert_approval(self, row: ApprovalRow) -> bool:
        """Store a new pending approval; False when its call (turn, call id) has one already."""
        return bool(
            self.conn.execute(
                f"INSERT INTO approvals ({_COLUMNS}) VALUES "  # noqa: S608  # constant columns
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    row.id,
                    row.turn_id,
                    row.call_id,
                    row.session_key,
                    row.tool,
                    row.arguments,
                    row.arguments_sha256,
                    row.approvers,
                    row.status,
                    row.requested_at,
                    row.expires_at,
                    row.decided_at,
                    row.decided_by,
                    int(row.used),
                ),
            ).rowcount
        )

    def get_approval(self, approval_id: str) -> ApprovalRow | None:
        found = self.conn.execute(
            f"SELECT {_COLUMNS} FROM approvals WHERE id = ?",  # noqa: S608  # constant columns
            (approval_id,),
        ).fetchone()
        return None if found is None else _row(found)

    def approval_for_call(self, turn_id: int, call_id: str) -> ApprovalRow | None:
        found = self.conn.execute(
            f"SELECT {_COLUMNS} FROM approvals WHERE turn_id = ? AND call_id = ?",  # noqa: S608  # constant columns
            (turn_id, call_id),
        ).fetchone()
        return None if found is None else _row(found)

    def list_approvals(self, status: str | None, limit: int) -> list[ApprovalRow]:
        if status is None:
            rows = self.conn.execute(
                f"SELECT {_COLUMNS} FROM approvals ORDER BY requested_at DESC, id LIMIT ?",  # noqa: S608  # constant columns
                (limit,),
            ).fetchall()
        else:
            rows = self.conn.execute(
                f"SELECT {_COLUMNS} FROM approvals WHERE status = ? "  # noqa: S608  # constant columns
                "ORDER BY requested_at DESC, id LIMIT ?",
                (status, limit),
            ).fetchall()
        return [_row(r) for r in rows]

    def decide_approval(
        self, approval_id: str, *, status: str, by: str | None, sha256: str, now: int
    ) -> bool:
        """Move a pending approval of these exact arguments to `status`; False when it is no
        longer pending (decided, expired, cancelled) or the arguments differ."""
        return bool(
            self.conn.execute(
                "UPDATE approvals SET status = ?, decided_at = ?, decided_by = ? "
                "WHERE id = ? AND status = 'pending' AND arguments_sha256 = ?",
                (status, now, by, approval_id, sha256),
            ).rowcount
        )

    def use_approval(self, approval_id: str) -> bool:
        """Mark an approved call as started; False when it was started before."""
        return bool(
            self.conn.execute(
                "UPDATE approvals SET used = 1 WHERE id = ? AND status != 'pending' AND used = 0",
                (approval_id,),
            ).rowcount
        )

    def cancel_approvals(self, session_key: str, by: str, now: int) -> list[str]:
        """Cancel the pending approvals of a session key; their ids."""
        rows = self.conn.execute(
            "UPDATE approvals SET status = 'cancelled', decided_at = ?, decided_by = ? "
            "WHERE session_key = ? AND status = 'pending' RETURNING id",
            (now, by, session_key),
        ).fetchall()
        return sorted(str(r[0]) for r in rows)

    def due_approvals(self, now: int) -> list[ApprovalRow]:
        """Pending approvals whose time is up."""
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM approvals WHERE status = 'pending' AND expires_at <= ? "  # noqa: S608  # constant columns
            "ORDER BY expires_at",
            (now,),
        ).fetchall()
        return [_row(r) for r in rows]
