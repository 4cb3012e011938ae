"""Who may call the API, and where the server may listen.

With `api.token` set, every route except `/healthz` needs `Authorization: Bearer <token>`
(compared in constant time), or the dashboard's session cookie; a request carrying that cookie
must also carry its CSRF token to change anything. Without a token the API is open, which is
only acceptable on a loopback address: `check_bind_address` refuses anything else before the
server binds.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from sessiongate.api.errors import ApiError
from sessiongate.errors import SessiongateError
from sessiongate.ui.sessions import CSRF_HEADER, SESSION_COOKIE, csrf_matches

if TYPE_CHECKING:
    from sessiongate.core.config import GatewayConfig
    from sessiongate.ui.sessions import UiSessions

__all__ = [
    "UnsafeBindError",
    "check_bind_address",
    "check_ui_session",
    "is_loopback_host",
    "require_operator",
]

_bearer = HTTPBearer(
    auto_error=False,
    description="`api.token` from the configuration; required when one is configured",
)


class UnsafeBindError(SessiongateError, ValueError):
    """An address other than loopback was asked for while no API token is configured."""

    code = "unsafe_bind"


def is_loopback_host(host: str) -> bool:
    """True for `localhost` and loopback IP literals (127.0.0.0/8, ::1)."""
    text = host.strip().strip("[]").lower()
    if text == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        # Any other name may resolve to a public interface; assume it does.
        return False


def check_bind_address(host: str, config: GatewayConfig) -> None:
    """Raise `UnsafeBindError` when `host` is not loopback and no API token is set."""
    if config.api.token is None and not is_loopback_host(host):
        raise UnsafeBindError(
            f"refusing to listen on {host!r} without an API token: anyone who can reach it "
            "could read every conversation. Set api.token (SESSIONGATE_API__TOKEN) or listen "
            "on 127.0.0.1.",
            host=host,
        )


def _token_matches(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


async def require_operator(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """The dependency every operator route carries; a no-op when no token is configured."""
    config: GatewayConfig = request.app.state.config
    token = config.api.token
    if credentials is None and check_ui_session(request):
        return
    if token is None:
        return
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        raise ApiError(401, "unauthorized", "missing bearer token", headers=challenge)
    if not _token_matches(credentials.credentials, token.get_secret_value()):
        raise ApiError(401, "unauthorized", "invalid bearer token", headers=challenge)


_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def check_ui_session(request: Request) -> bool:
    """True when the request comes from a signed-in dashboard page: a live session cookie and,
    for anything but a read, that session's CSRF token in `X-CSRF-Token` (403 without it)."""
    sessions: UiSessions | None = getattr(request.app.state, "ui_sessions", None)
    if sessions is None:
        return False
    session = sessions.get(request.cookies.get(SESSION_COOKIE))
    if session is None:
        return False
    if request.method not in _SAFE_METHODS and not csrf_matches(
        session, request.headers.get(CSRF_HEADER)
    ):
        raise ApiError(
            403, "csrf_failed", f"a dashboard request that changes state needs {CSRF_HEADER}"
        )
    return True
