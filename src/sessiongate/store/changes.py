"""What a committed transaction changed, told to whoever follows the store (the gateway's
event feed).

The store notes each change inside the transaction that makes it (`Tx.note`), and the backend
(SQLite or PostgreSQL) hands the list to the store's listeners after the commit, so a
rolled-back write is never told and a told one is durable. Listeners run on the committing
thread and must be quick: the feed only appends to a ring buffer. A note may be a function,
for a change whose figures come with the commit's answer (on PostgreSQL, a count read with
the commit instead of before it): `told` calls it once the transaction committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Change", "ChangeKind", "told"]


class ChangeKind(StrEnum):
    SESSION_CREATED = "session.created"
    SESSION_UPDATED = "session.updated"
    SESSION_ARCHIVED = "session.archived"
    SESSION_DELETED = "session.deleted"
    TRANSCRIPT_APPENDED = "transcript.appended"
    TURN_STARTED = "turn.started"
    TURN_FINISHED = "turn.finished"
    QUEUE_CHANGED = "queue.changed"
    APPROVAL_REQUESTED = "approval.requested"
    APPROVAL_DECIDED = "approval.decided"
    APPROVAL_EXPIRED = "approval.expired"
    # A delivery's try failed (`status` `failed`: it is tried again) or it was given up
    # (`dead`); `delivery_id` names it.
    DELIVERY_FAILED = "delivery.failed"
    # An operator took the lane over (`by` who), or gave it back (`reason`: `handback` or
    # `timeout`).
    SESSION_TAKEOVER = "session.takeover"
    SESSION_HANDBACK = "session.handback"


@dataclass(frozen=True, slots=True)
class Change:
    """One change; the fields a kind does not use stay None."""

    kind: ChangeKind
    session_key: str | None
    session_id: str | None = None
    entry_id: int | None = None
    entry_type: str | None = None
    turn_id: int | None = None
    status: str | None = None
    depth: int | None = None
    approval_id: str | None = None
    tool: str | None = None
    delivery_id: int | None = None
    reason: str | None = None
    by: str | None = None

    def as_data(self) -> dict[str, object]:
        """The change's fields that are set, as an event's `data` (the feed, webhooks)."""
        data: dict[str, object] = {"session_key": self.session_key}
        for name in ("session_id", "entry_id", "entry_type", "turn_id", "status", "depth"):
            value = getattr(self, name)
            if value is not None or (name == "entry_type" and self.entry_id is not None):
                data[name] = value
        if self.approval_id is not None:
            data["approval_id"] = self.approval_id
            data["tool"] = self.tool
        if self.delivery_id is not None:
            data["delivery_id"] = self.delivery_id
        if self.reason is not None:
            data["reason"] = self.reason
        if self.by is not None:
            data["by"] = self.by
        return data


def told(notes: list[object]) -> list[object]:
    """The committed transaction's notes as its listeners get them (see the module docstring):
    a function's answer in its place, or nothing when it answers None."""
    answers = (note() if callable(note) else note for note in notes)
    return [note for note in answers if note is not None]
