"""`ApprovalBook`: tool calls waiting for a person's approval, one transaction per call.

DESIGN decision 18: a decision binds to what was shown. An approval is one row per tool call
of a turn (unique on turn id + call id), holding the exact tool name and arguments the prompt
showed and their SHA-256; it starts `pending` and leaves it once, by one conditional update,
to `approved`, `denied`, `expired` or `cancelled`, so two presses (or two devices) make one
decision. An approved call is marked `used` when it starts, so a turn resumed after a restart
never runs it twice. Each change is told on the feed after its commit (`approval.requested`,
`approval.decided`, `approval.expired`).

An incognito lane's approvals live beside its journal, in the in-memory database
(`SessionStore.database_for`), so nothing of its calls reaches the disk.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING

from sessiongate.store.changes import Change, ChangeKind
from sessiongate.store.records import ApprovalRow, to_us

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sessiongate.core.clock import Clock
    from sessiongate.store.protocol import LaneBackend, Tx
    from sessiongate.store.session_store import SessionStore

__all__ = ["DECIDED", "PENDING", "ApprovalBook", "arguments_sha256"]

PENDING = "pending"
APPROVED = "approved"
DENIED = "denied"
EXPIRED = "expired"
CANCELLED = "cancelled"
DECIDED = frozenset({APPROVED, DENIED, EXPIRED, CANCELLED})
# Short enough to type from a phone after `/approve `; drawn fresh until unused.
_ID_BYTES = 4


def arguments_sha256(tool: str, arguments: str) -> str:
    """The hash a decision binds to: the tool's name and its arguments, exactly as shown."""
    return hashlib.sha256(f"{tool}\n{arguments}".encode()).hexdigest()


def _note(conn: Tx, kind: ChangeKind, row: ApprovalRow, status: str) -> None:
    conn.note(
        Change(
            kind,
            row.session_key,
            turn_id=row.turn_id,
            status=status,
            approval_id=row.id,
            tool=row.tool,
        )
    )


class ApprovalBook:
    def __init__(self, store: SessionStore, *, clock: Clock | None = None) -> None:
        self._store = store
        self._clock: Clock = clock or store.clock

    def _databases(self) -> list[LaneBackend]:
        return self._store.placement.databases()

    def _holding(self, approval_id: str) -> tuple[LaneBackend, ApprovalRow] | None:
        for db in self._databases():
            with db.transaction() as conn:
                row = conn.get_approval(approval_id)
            if row is not None:
                return db, row
        return None

    def request(
        self,
        *,
        turn_id: int,
        call_id: str,
        session_key: str,
        tool: str,
        arguments: str,
        approvers: Sequence[str],
        timeout_seconds: float,
    ) -> tuple[ApprovalRow, bool]:
        """The approval of one call: a new `pending` one (True), or the one the call already
        has (False; a resumed turn asks again and finds it)."""
        now = self._clock.now()
        with self._store.database_for(session_key).transaction() as conn:
            found = conn.approval_for_call(turn_id, call_id)
            if found is not None:
                return found, False
            while True:
                row = ApprovalRow(
                    id=secrets.token_hex(_ID_BYTES),
                    turn_id=turn_id,
                    call_id=call_id,
                    session_key=session_key,
                    tool=tool,
                    arguments=arguments,
                    arguments_sha256=arguments_sha256(tool, arguments),
                    approvers=json.dumps(list(approvers)),
                    status=PENDING,
                    requested_at=to_us(now),
                    expires_at=to_us(now + timedelta(seconds=timeout_seconds)),
                )
                if conn.get_approval(row.id) is None and conn.insert_approval(row):
                    break
            _note(conn, ChangeKind.APPROVAL_REQUESTED, row, PENDING)
            return row, True

    def get(self, approval_id: str) -> ApprovalRow | None:
        held = self._holding(approval_id)
        return None if held is None else held[1]

    def for_call(self, session_key: str, turn_id: int, call_id: str) -> ApprovalRow | None:
        with self._store.database_for(session_key).transaction() as conn:
            return conn.approval_for_call(turn_id, call_id)

    def listed(self, *, status: str | None = None, limit: int = 100) -> list[ApprovalRow]:
        """Newest first, incognito lanes' included."""
        rows: list[ApprovalRow] = []
        for db in self._databases():
            with db.transaction() as conn:
                rows.extend(conn.list_approvals(status, limit))
        rows.sort(key=lambda row: (-row.requested_at, row.id))
        return rows[:limit]

    def decide(
        self, approval_id: str, *, approve: bool, by: str | None, sha256: str
    ) -> ApprovalRow | None:
        """Decide a pending approval of arguments hashing to `sha256`: the row as decided, or
        None when it was no longer pending (decided before, expired, cancelled) or the
        hash differs; nothing changes then."""
        status = APPROVED if approve else DENIED
        now = to_us(self._clock.now())
        held = self._holding(approval_id)
        if held is None:
            return None
        with held[0].transaction() as conn:
            if not conn.decide_approval(approval_id, status=status, by=by, sha256=sha256, now=now):
                return None
            row = conn.get_approval(approval_id)
            assert row is not None  # just updated, in this transaction
            _note(conn, ChangeKind.APPROVAL_DECIDED, row, status)
            return row

    def use(self, approval_id: str) -> bool:
        """Mark an approved call as started; False when it was started before."""
        held = self._holding(approval_id)
        if held is None:
            return False
        with held[0].transaction() as conn:
            return conn.use_approval(approval_id)

    def cancel(self, session_key: str, *, by: str) -> list[str]:
        """Cancel the session key's pending approvals (`/stop`, `/new`); the ids."""
        now = to_us(self._clock.now())
        with self._store.database_for(session_key).transaction() as conn:
            cancelled = conn.cancel_approvals(session_key, by, now)
            for approval_id in cancelled:
                row = conn.get_approval(approval_id)
                if row is not None:
                    _note(conn, ChangeKind.APPROVAL_DECIDED, row, CANCELLED)
            return cancelled

    def expire_due(self) -> list[ApprovalRow]:
        """Expire every pending approval whose time is up; the rows expired."""
        now = to_us(self._clock.now())
        expired: list[ApprovalRow] = []
        for db in self._databases():
            with db.transaction() as conn:
                for row in conn.due_approvals(now):
                    if conn.decide_approval(
                        row.id, status=EXPIRED, by=None, sha256=row.arguments_sha256, now=now
                    ):
                        _note(conn, ChangeKind.APPROVAL_EXPIRED, row, EXPIRED)
                        expired.append(row)
        return expired
