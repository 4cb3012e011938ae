"""`TakeoverStore`: lanes an operator took over, one transaction per call.

While a session key is taken over the agent does not answer it: the gateway stores people's
messages in the transcript and the operator answers (`gateway/takeover.py`). The state is one
row per key (who took it over, since when, and when it goes back by itself), so it survives a
restart; handing back deletes the row. Each change is told after its commit as
`session.takeover` or `session.handback` (the feed, outbound webhooks).

An incognito lane's row lives beside its journal, in the in-memory database
(`SessionStore.database_for`), so nothing of it reaches the disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sessiongate.store.changes import Change, ChangeKind
from sessiongate.store.records import TakeoverRow, from_us, to_us

if TYPE_CHECKING:
    from datetime import datetime

    from sessiongate.core.clock import Clock
    from sessiongate.store.protocol import LaneBackend
    from sessiongate.store.session_store import SessionStore

__all__ = ["Takeover", "TakeoverStore"]


@dataclass(frozen=True, slots=True)
class Takeover:
    """A lane taken over: by whom (`operator`, or `<platform>:<user_id>` from the chat),
    since when, and when it goes back by itself (None: only when handed back)."""

    session_key: str
    taken_by: str
    since: datetime
    resume_at: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_key": self.session_key,
            "taken_over": True,
            "taken_by": self.taken_by,
            "since": self.since.isoformat(),
            "resume_at": None if self.resume_at is None else self.resume_at.isoformat(),
        }


def _takeover(row: TakeoverRow) -> Takeover:
    return Takeover(
        session_key=row.session_key,
        taken_by=row.taken_by,
        since=from_us(row.since),
        resume_at=None if row.resume_at is None else from_us(row.resume_at),
    )


class TakeoverStore:
    def __init__(self, store: SessionStore, *, clock: Clock | None = None) -> None:
        self._store = store
        self._clock: Clock = clock or store.clock

    def _databases(self) -> list[LaneBackend]:
        return self._store.placement.databases()

    def start(
        self, session_key: str, *, by: str, resume_after_minutes: float = 0.0
    ) -> tuple[Takeover, bool]:
        """Take the lane over (True), or the takeover it has already (False: nothing changes,
        so a second operator never steals the first one's deadline). `resume_after_minutes`
        of 0 means it goes back only by hand."""
        now = self._clock.now()
        resume_at = (
            to_us(now + timedelta(minutes=resume_after_minutes))
            if resume_after_minutes > 0
            else None
        )
        row = TakeoverRow(session_key, by, to_us(now), resume_at)
        with self._store.database_for(session_key).transaction() as conn:
            if not conn.put_takeover(row):
                found = conn.get_takeover(session_key)
                assert found is not None  # the conflict was this key's row
                return _takeover(found), False
            conn.note(Change(ChangeKind.SESSION_TAKEOVER, session_key, by=by))
        return _takeover(row), True

    def end(self, session_key: str, *, by: str, reason: str) -> Takeover | None:
        """Give the lane back to the agent; the takeover it ended, or None when it was not
        taken over. `reason`: `handback` (by hand) or `timeout`."""
        with self._store.database_for(session_key).transaction() as conn:
            row = conn.delete_takeover(session_key)
            if row is None:
                return None
            conn.note(Change(ChangeKind.SESSION_HANDBACK, session_key, by=by, reason=reason))
        return _takeover(row)

    def get(self, session_key: str) -> Takeover | None:
        with self._store.database_for(session_key).read() as conn:
            row = conn.get_takeover(session_key)
        return None if row is None else _takeover(row)

    def all(self) -> list[Takeover]:
        """Every lane taken over, oldest first."""
        rows: list[TakeoverRow] = []
        for db in self._databases():
            with db.read() as conn:
                rows.extend(conn.list_takeovers())
        return [_takeover(row) for row in sorted(rows, key=lambda r: (r.since, r.session_key))]

    def due(self, now: datetime) -> list[Takeover]:
        """Takeovers whose `resume_at` is at or before `now`."""
        return [t for t in self.all() if t.resume_at is not None and t.resume_at <= now]
