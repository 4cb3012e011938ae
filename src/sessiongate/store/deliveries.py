"""Deliveries: every outbound message as a row that tells the truth (DESIGN decision 19).

A reply, a notice or a job's output is written `pending` before it is sent. The platform's
confirmation makes it `sent` (with the platform's message id when the adapter returns one) and,
for a reply, journals its turn `delivered` in the same transaction: a turn is delivered only when
its delivery is. A refused send makes it `failed`, with the platform's reason and the time of
the next try (`backoff_seconds`); after `delivery.max_attempts` tries it is `dead`, and so is one
still unconfirmed `delivery.max_age_seconds` after it was written (reason `stale`): a late
reply is reported, never sent. `failed` and `dead` rows are the dead-letter list; `reopen`
puts one back to `pending` for the operator's retry. Each failure is noted as a
`delivery.failed` change (the event feed, outbound webhooks).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sessiongate.core.source import SessionSource
from sessiongate.store.changes import Change, ChangeKind
from sessiongate.store.records import (
    DeliveryRow,
    DeliveryStatus,
    TurnState,
    from_us,
    to_us,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime

    from sessiongate.store.session_store import SessionStore

__all__ = [
    "STALE_REASON",
    "UNDELIVERED",
    "DeliveryKind",
    "DeliveryRecord",
    "DeliveryStore",
    "backoff_seconds",
    "platform_reason",
]

# The reason of a delivery given up because it was too old to send.
STALE_REASON = "stale"
# The dead-letter list: deliveries whose last try failed, still retried or given up.
UNDELIVERED = (DeliveryStatus.FAILED, DeliveryStatus.DEAD)
# Caps the exponent of the doubling, far past the point where any cap applies.
_MAX_DOUBLINGS = 16
_REASON_CHARS = 500
_URL = re.compile(r"(https?://[^/\s]+)\S*")


class DeliveryKind:
    REPLY = "reply"  # a turn's reply (one per turn)
    NOTICE = "notice"  # an error notice or a command's answer
    JOB = "job"  # a scheduled job's output
    OPERATOR = "operator"  # an operator's reply in a lane taken over from the agent


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    id: int
    kind: str
    turn_id: int | None
    session_key: str | None
    source: SessionSource
    text: str
    status: DeliveryStatus
    attempts: int
    message_id: str | None
    reason: str | None
    created_at: datetime
    updated_at: datetime
    next_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """The wire form (HTTP, `--json`): the chat, not the text of the message."""
        return {
            "id": self.id,
            "kind": self.kind,
            "turn_id": self.turn_id,
            "session_key": self.session_key,
            "platform": str(self.source.platform),
            "chat_id": self.source.chat_id,
            "status": str(self.status),
            "attempts": self.attempts,
            "message_id": self.message_id,
            "reason": self.reason,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "next_at": self.next_at.isoformat(),
        }


def backoff_seconds(attempts: int, base: float, cap: float) -> float:
    """The wait after the `attempts`-th failed try: `base`, then doubled each time, at most
    `cap`."""
    return float(min(base * 2 ** min(max(attempts - 1, 0), _MAX_DOUBLINGS), cap))


def platform_reason(exc: BaseException) -> str:
    """A failed send's reason as stored and shown: the error's type and message, with any
    URL cut to its host (a platform's URL may carry a token) and the length bounded."""
    text = _URL.sub(r"\1/…", f"{type(exc).__name__}: {exc}".strip())
    return text[:_REASON_CHARS]


def _record(row: DeliveryRow) -> DeliveryRecord:
    return DeliveryRecord(
        id=row.id,
        kind=row.kind,
        turn_id=row.turn_id,
        session_key=row.session_key,
        source=SessionSource.from_dict(json.loads(row.source)),
        text=row.text,
        status=DeliveryStatus(row.status),
        attempts=row.attempts,
        message_id=row.message_id,
        reason=row.reason,
        created_at=from_us(row.created_at),
        updated_at=from_us(row.updated_at),
        next_at=from_us(row.next_at),
    )


class DeliveryStore:
    """The deliveries of one `SessionStore`'s database (incognito lanes keep none: nothing of
    theirs reaches the disk)."""

    def __init__(self, store: SessionStore) -> None:
        self._db = store.database
        self._placement = store.placement
        self._clock = store.clock

    def keeps_turn(self, turn_id: int) -> bool:
        """Whether a delivery of this turn's reply gets a row: not for an incognito lane's turn
        (`Placement.is_durable_row`)."""
        return self._placement.is_durable_row(turn_id)

    def open(
        self,
        kind: str,
        source: SessionSource,
        text: str,
        *,
        turn_id: int | None = None,
        session_key: str | None = None,
        at: datetime | None = None,
        first_try_after: float = 0.0,
    ) -> DeliveryRecord:
        """A new `pending` delivery written at `at` (now by default), not tried by a retry
        before `first_try_after` seconds (its sender is trying it meanwhile); a turn's reply
        that has a row already gets that row back."""
        written = at or self._clock.now()
        due = written + timedelta(seconds=first_try_after)
        with self._db.transaction() as conn:
            delivery_id = conn.insert_delivery(
                kind=kind,
                turn_id=turn_id,
                session_key=session_key,
                platform=str(source.platform),
                source=json.dumps(source.to_dict(), separators=(",", ":")),
                text=text,
                at=to_us(written),
                next_at=to_us(due),
            )
            row = conn.get_delivery(delivery_id)
        assert row is not None  # written just above
        return _record(row)

    def get(self, delivery_id: int) -> DeliveryRecord | None:
        with self._db.read() as conn:
            row = conn.get_delivery(delivery_id)
        return None if row is None else _record(row)

    def of_turn(self, turn_id: int) -> DeliveryRecord | None:
        with self._db.read() as conn:
            row = conn.delivery_of_turn(turn_id)
        return None if row is None else _record(row)

    def find(
        self, statuses: Sequence[DeliveryStatus] = (), *, limit: int = 100
    ) -> list[DeliveryRecord]:
        with self._db.read() as conn:
            rows = conn.list_deliveries([str(s) for s in statuses], limit)
        return [_record(row) for row in rows]

    def due(self, now: datetime, *, limit: int = 500) -> list[DeliveryRecord]:
        with self._db.read() as conn:
            rows = conn.due_deliveries(to_us(now), limit)
        return [_record(row) for row in rows]

    def counts(self) -> dict[str, int]:
        with self._db.read() as conn:
            return conn.count_deliveries()

    def mark_sent(self, record: DeliveryRecord, message_id: str | None) -> None:
        """Confirmed by the platform; a reply's turn is journalled delivered with it."""
        now = to_us(self._clock.now())
        with self._db.transaction() as conn:
            conn.set_delivery(
                record.id,
                status=DeliveryStatus.SENT,
                attempts=record.attempts + 1,
                message_id=message_id,
                reason=None,
                next_at=now,
                at=now,
            )
            if record.kind == DeliveryKind.REPLY and record.turn_id is not None:
                turn = conn.get_turn(record.turn_id)
                if turn is not None and turn.state == TurnState.REPLIED:
                    conn.transition_turn(record.turn_id, TurnState.DELIVERED, at=now)

    def mark_failed(
        self,
        record: DeliveryRecord,
        reason: str,
        *,
        max_attempts: int,
        backoff: float,
        backoff_max: float,
    ) -> DeliveryRecord:
        """One more failed try: `failed` and due again after the back-off, or `dead` when it
        was the last one."""
        attempts = record.attempts + 1
        now = self._clock.now()
        dead = attempts >= max_attempts
        wait = backoff_seconds(attempts, backoff, backoff_max)
        status = DeliveryStatus.DEAD if dead else DeliveryStatus.FAILED
        return self._settle(record, status, reason, attempts, now + timedelta(seconds=wait))

    def mark_dead(self, record: DeliveryRecord, reason: str) -> DeliveryRecord:
        """Given up without a try (`stale`): reported, not sent."""
        return self._settle(record, DeliveryStatus.DEAD, reason, record.attempts, self._clock.now())

    def _settle(
        self,
        record: DeliveryRecord,
        status: DeliveryStatus,
        reason: str,
        attempts: int,
        next_at: datetime,
    ) -> DeliveryRecord:
        now = to_us(self._clock.now())
        with self._db.transaction() as conn:
            conn.set_delivery(
                record.id,
                status=status,
                attempts=attempts,
                message_id=None,
                reason=reason,
                next_at=to_us(next_at),
                at=now,
            )
            conn.note(
                Change(
                    ChangeKind.DELIVERY_FAILED,
                    record.session_key,
                    turn_id=record.turn_id,
                    status=str(status),
                    delivery_id=record.id,
                    reason=reason,
                )
            )
            row = conn.get_delivery(record.id)
        assert row is not None  # updated just above
        return _record(row)

    def reopen(self, delivery_id: int) -> DeliveryRecord | None:
        """Back to `pending`, due now, its tries forgotten and its age counted from now: the
        operator's retry of a `failed` or `dead` delivery, stale ones too (a `pending` one is
        returned as it is). None when there is no such delivery or it was sent already."""
        now = to_us(self._clock.now())
        with self._db.transaction() as conn:
            row = conn.get_delivery(delivery_id)
            if row is None or row.status == DeliveryStatus.SENT:
                return None
            if conn.reopen_delivery(delivery_id, now):
                row = conn.get_delivery(delivery_id)
        return None if row is None else _record(row)
