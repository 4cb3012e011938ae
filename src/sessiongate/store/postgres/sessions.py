"""The `SessionsTx` family on PostgreSQL: session rows, their counters and ends.

Each method does what its twin in `sqlite/sessions.py` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.postgres._tx_base import TxBase
from sessiongate.store.records import (
    SessionRow,
    dumps,
    loads,
)

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = ["GET_SESSION", "PostgresSessions"]

_SESSION = (
    "s.sid, s.session_id, s.session_key, s.parent_session_id, sg_us(s.started_at), "
    "sg_us(s.ended_at), s.end_reason, e.id, coalesce(e.depth, 0), coalesce(e.mdepth, 0), "
    "s.generation, s.header::text"
)

GET_SESSION = f"""
SELECT {_SESSION}
FROM sessions s LEFT JOIN LATERAL (
    SELECT id, depth, mdepth FROM entries WHERE sid = s.sid AND on_path = 1
    ORDER BY depth DESC LIMIT 1) e ON true
WHERE s.session_id = %s
"""  # noqa: S608


class PostgresSessions(TxBase):
    """Session rows of `PostgresTx`."""

    __slots__ = ()

    def get_session_row(self, session_id: str) -> SessionRow | None:
        row = self._one(GET_SESSION, (session_id,))
        return None if row is None else SessionRow(*row)

    def unused_session_id(self, make: Callable[[], str]) -> str:
        for _ in range(16):
            candidate = make()
            if self._one("SELECT 1 FROM sessions WHERE session_id = %s", (candidate,)) is None:
                return candidate
        raise RuntimeError("could not draw an unused session id")

    def create_session_row(
        self,
        *,
        session_id: str,
        session_key: str | None,
        parent_session_id: str | None,
        started_at: int,
        header: dict[str, Any],
    ) -> SessionRow:
        text = dumps(header)
        row = self._one(
            "INSERT INTO sessions (session_id, session_key, parent_session_id, started_at, "
            "header) VALUES (%s, %s, %s, sg_ts(%s), %s::jsonb) RETURNING sid",
            (session_id, session_key, parent_session_id, started_at, text),
        )
        assert row is not None
        return SessionRow(
            row[0], session_id, session_key, parent_session_id, started_at, None, None, None,
            0, 0, 0, text,
        )  # fmt: skip

    def create_fresh_session_row(
        self,
        make_id: Callable[[], str],
        *,
        session_key: str | None,
        parent_session_id: str | None,
        started_at: int,
        header: Callable[[str], dict[str, Any]],
    ) -> str:
        ahead = None if session_key is None else self._fresh_ahead.pop(session_key, None)
        if ahead is not None and parent_session_id is None and ahead[1].fetchone() is not None:
            return ahead[0]  # made with the route's read
        for _ in range(16):
            session_id = make_id()
            row = self._one(
                "INSERT INTO sessions (session_id, session_key, parent_session_id, started_at, "
                "header) VALUES (%s, %s, %s, sg_ts(%s), %s::jsonb) "
                "ON CONFLICT (session_id) DO NOTHING RETURNING sid",
                (session_id, session_key, parent_session_id, started_at, dumps(header(session_id))),
            )
            if row is not None:
                return session_id
        raise RuntimeError("could not draw an unused session id")

    def save_counters(self, sid: int, counters: dict[str, Any]) -> None:
        self.conn.execute(
            "UPDATE sessions SET counters = %s::jsonb WHERE sid = %s", (dumps(counters), sid)
        )

    def load_counters(self, sid: int) -> dict[str, Any] | None:
        raw = self._one("SELECT counters::text FROM sessions WHERE sid = %s", (sid,))
        return None if raw is None or raw[0] is None else dict(loads(raw[0]))

    def end_session_row(self, sid: int, *, at: int | None, reason: str | None) -> None:
        self.conn.execute(
            "UPDATE sessions SET ended_at = sg_ts(%s::bigint), end_reason = %s WHERE sid = %s",
            (at, reason, sid),
        )

    def has_any_sessions(self) -> bool:
        return self._one("SELECT 1 FROM sessions LIMIT 1") is not None

    def key_has_history(self, session_key: str) -> bool:
        row = self._one("SELECT 1 FROM sessions WHERE session_key = %s LIMIT 1", (session_key,))
        return row is not None

    def session_ids_of_key(self, session_key: str) -> list[str]:
        rows = self._all(
            "SELECT session_id FROM sessions WHERE session_key = %s ORDER BY started_at DESC",
            (session_key,),
        )
        return [r[0] for r in rows]

    def sessions_of_lane(self, session_key: str, session_id: str) -> list[tuple[int, str, str]]:
        rows = self._all(
            "SELECT sid, session_id, header::text FROM sessions "
            "WHERE session_key = %s OR session_id = %s",
            (session_key, session_id),
        )
        return [(r[0], r[1], r[2]) for r in rows]

    def delete_session_rows(self, sid: int) -> None:
        self.conn.execute("DELETE FROM entries WHERE sid = %s", (sid,))
        self.conn.execute("DELETE FROM tips WHERE sid = %s", (sid,))
        self.conn.execute("DELETE FROM sessions WHERE sid = %s", (sid,))
