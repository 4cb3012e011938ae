"""The outbox of outbound webhook events (`webhooks.outbound`).

`OutboxWriter` is the main database's `before_commit`: for each change a transaction noted
(`store/changes.py`) whose kind a receiver subscribed to, it writes one row per receiver in
that same transaction, with a new event id and the JSON body to POST. So an event exists if
and only if its change committed, and no restart loses one. `OutboxStore` reads and settles
the rows for the sender (`gateway/webhooks.py`): `pending` until the receiver answers 2xx
(`sent`) or the tries run out (`dead`: the webhook dead-letter list, `reopen` to try again).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sessiongate.core.clock import isoformat
from sessiongate.store.changes import Change
from sessiongate.store.deliveries import backoff_seconds
from sessiongate.store.records import from_us, to_us

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    from sessiongate.core.clock import Clock
    from sessiongate.store.protocol import Tx
    from sessiongate.store.records import OutboxRow
    from sessiongate.store.session_store import SessionStore

__all__ = ["DEAD", "PENDING", "SENT", "OutboxEvent", "OutboxStore", "OutboxWriter"]

PENDING, SENT, DEAD = "pending", "sent", "dead"


class OutboxWriter:
    """Writes the rows of subscribed changes inside the committing transaction."""

    def __init__(self, subscriptions: Mapping[str, Sequence[str]], clock: Clock) -> None:
        # Event type -> the receivers' urls, in configuration order.
        self._targets: dict[str, list[str]] = {}
        for url, events in subscriptions.items():
            for event in events:
                self._targets.setdefault(event, []).append(url)
        self._clock = clock

    def __call__(self, tx: Tx, notes: list[object]) -> None:
        now = self._clock.now()
        for note in notes:
            if not isinstance(note, Change):
                continue
            event = str(note.kind)
            for url in self._targets.get(event, ()):
                event_id = uuid.uuid4().hex
                body = {
                    "id": event_id,
                    "type": event,
                    "created_at": isoformat(now),
                    "data": note.as_data(),
                }
                tx.insert_outbox(
                    event_id=event_id,
                    target=url,
                    event=event,
                    session_key=note.session_key,
                    body=json.dumps(body, separators=(",", ":"), ensure_ascii=False),
                    at=to_us(now),
                )


@dataclass(frozen=True, slots=True)
class OutboxEvent:
    id: int
    event_id: str
    target: str
    event: str
    session_key: str | None
    body: str
    status: str
    attempts: int
    reason: str | None
    created_at: datetime
    updated_at: datetime
    next_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "event_id": self.event_id,
            "target": self.target,
            "event": self.event,
            "session_key": self.session_key,
            "status": self.status,
            "attempts": self.attempts,
            "reason": self.reason,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "next_at": self.next_at.isoformat(),
        }


def _event(row: OutboxRow) -> OutboxEvent:
    return OutboxEvent(
        id=row.id,
        event_id=row.event_id,
        target=row.target,
        event=row.event,
        session_key=row.session_key,
        body=row.body,
        status=row.status,
        attempts=row.attempts,
        reason=row.reason,
        created_at=from_us(row.created_at),
        updated_at=from_us(row.updated_at),
        next_at=from_us(row.next_at),
    )


class OutboxStore:
    """The outbox of one `SessionStore`'s database."""

    def __init__(self, store: SessionStore, clock: Clock | None = None) -> None:
        self._db = store.database
        self._clock = clock or store.clock

    def subscribe(self, subscriptions: Mapping[str, Sequence[str]]) -> None:
        """From now on, each committing transaction writes the events of its changes that
        these receivers (url -> event types) subscribed to (`OutboxWriter`)."""
        self._db.before_commit = OutboxWriter(subscriptions, self._clock)

    def unsent(self, limit: int) -> list[OutboxEvent]:
        """`pending` events, the oldest first."""
        with self._db.read() as conn:
            return [_event(row) for row in conn.unsent_outbox(limit)]

    def find(self, statuses: Sequence[str] = (), *, limit: int = 100) -> list[OutboxEvent]:
        with self._db.read() as conn:
            return [_event(row) for row in conn.list_outbox(list(statuses), limit)]

    def get(self, outbox_id: int) -> OutboxEvent | None:
        with self._db.read() as conn:
            row = conn.get_outbox(outbox_id)
        return None if row is None else _event(row)

    def mark_sent(self, event: OutboxEvent) -> None:
        now = to_us(self._clock.now())
        with self._db.transaction() as conn:
            conn.set_outbox(
                event.id,
                status=SENT,
                attempts=event.attempts + 1,
                reason=None,
                next_at=now,
                at=now,
            )

    def mark_failed(
        self,
        event: OutboxEvent,
        reason: str,
        *,
        max_attempts: int,
        backoff: float,
        backoff_max: float,
    ) -> str:
        """One more refused POST: still `pending`, due after the back-off, or `dead` when it
        was the last try. Returns the new status."""
        attempts = event.attempts + 1
        now = self._clock.now()
        status = DEAD if attempts >= max_attempts else PENDING
        due = now + timedelta(seconds=backoff_seconds(attempts, backoff, backoff_max))
        with self._db.transaction() as conn:
            conn.set_outbox(
                event.id,
                status=status,
                attempts=attempts,
                reason=reason,
                next_at=to_us(due),
                at=to_us(now),
            )
        return status

    def reopen(self, outbox_id: int) -> bool:
        """A dead event back to `pending`, due now (the operator's retry)."""
        now = to_us(self._clock.now())
        with self._db.transaction() as conn:
            return conn.reopen_outbox(outbox_id, now)
