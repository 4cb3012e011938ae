"""Dashboard sign-ins: an opaque cookie names a server-side session holding its CSRF token.

The cookie is HttpOnly (no script can read it) and SameSite=Strict (no other site can make the
browser send it); the CSRF token is handed to the page's script by `GET /ui/session` and must
come back in `X-CSRF-Token` on every state-changing request, so a forged form post fails even
where SameSite is not honoured. Sessions live in memory: a restart signs everyone out, which is
the safe direction.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datetime import datetime

    from sessiongate.core.clock import Clock

__all__ = [
    "CSRF_HEADER",
    "SESSION_COOKIE",
    "SESSION_TTL",
    "UiSession",
    "UiSessions",
    "csrf_matches",
]

SESSION_COOKIE = "sessiongate_ui"
CSRF_HEADER = "X-CSRF-Token"
# An operator who walks away is signed out within a working day; each request extends it.
SESSION_TTL = timedelta(hours=12)
# Sign-ins kept at most: a flood of logins evicts the oldest, never grows memory without bound.
MAX_SESSIONS = 1_000


@dataclass(slots=True)
class UiSession:
    id: str
    csrf_token: str
    expires_at: datetime


class UiSessions:
    """The signed-in browsers of one gateway process."""

    def __init__(self, clock: Clock, *, ttl: timedelta = SESSION_TTL) -> None:
        self._clock = clock
        self._ttl = ttl
        self._sessions: dict[str, UiSession] = {}

    def create(self) -> UiSession:
        now = self._clock.now()
        self._drop_expired(now)
        while len(self._sessions) >= MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        session = UiSession(
            id=secrets.token_urlsafe(32),
            csrf_token=secrets.token_urlsafe(32),
            expires_at=now + self._ttl,
        )
        self._sessions[session.id] = session
        return session

    def get(self, session_id: str | None) -> UiSession | None:
        """The live session named by a cookie value (and its expiry pushed back), or None."""
        if not session_id:
            return None
        session = self._sessions.get(session_id)
        if session is None:
            return None
        now = self._clock.now()
        if session.expires_at <= now:
            del self._sessions[session_id]
            return None
        session.expires_at = now + self._ttl
        return session

    def end(self, session_id: str | None) -> None:
        if session_id:
            self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)

    def _drop_expired(self, now: datetime) -> None:
        for key in [k for k, s in self._sessions.items() if s.expires_at <= now]:
            del self._sessions[key]


def csrf_matches(session: UiSession, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(
        given.encode("utf-8"), session.csrf_token.encode("utf-8")
    )
