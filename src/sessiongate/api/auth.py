"""Who may call the API, and where the server may listen.

With `api.token` set, every route except `/healthz` (and `/`, a redirect to the dashboard)
needs `Authorization: Bearer <token>`
(compared in constant time): the API's own routes, its description (`/openapi.json`) and the
docs pages alike. The dashboard's session cookie stands in for the token, and a request that
carries it must also carry its CSRF token to change anything. `BearerAuthMiddleware`
(api/middleware.py) applies `authorization_refusal` to every request before anything reads its
body; `require_operator` applies it again as a route dependency, which is also what puts the
bearer scheme into the OpenAPI description.
Platform webhooks (`/hooks/...`) are the other exception: the platform signs them, and the
route checks that signature instead (DESIGN.md), and so are the dashboard's own pages under
`/ui/`, which send a visitor without a session to their sign-in form. Without a token the API is
open, which is only acceptable on a loopback address: `check_bind_address` (api/bind.py)
refuses anything
else before the server binds, and beyond loopback refuses a token shorter than
`MIN_TOKEN_CHARS`. Wrong tokens are limited per client address (api/auth_limits.py), and an
open API answers only its own Host and its own pages (api/guards.py).
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from sessiongate.api.errors import ApiError
from sessiongate.ui.sessions import CSRF_HEADER, SESSION_COOKIE, csrf_matches

if TYPE_CHECKING:
    from pydantic import SecretStr

    from sessiongate.core.config import GatewayConfig
    from sessiongate.ui.sessions import UiSessions

__all__ = [
    "OPEN_PATHS",
    "OPEN_PREFIXES",
    "UNAUTHORIZED_CHALLENGE",
    "authorization_refusal",
    "dashboard_refusal",
    "is_open_path",
    "require_operator",
]

# Answered without the token: liveness for probes, and webhooks verified by their signature.
# The dashboard's pages check its own session (and redirect to sign-in) themselves.
OPEN_PATHS = frozenset({"/", "/healthz", "/ui"})
OPEN_PREFIXES = ("/hooks/", "/ui/")
UNAUTHORIZED_CHALLENGE = {"WWW-Authenticate": "Bearer"}
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_bearer = HTTPBearer(
    auto_error=False,
    description="`api.token` from the configuration; required when one is configured",
)


def is_open_path(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


def authorization_refusal(header: str | None, token: SecretStr | None) -> str | None:
    """Why a request with this `Authorization` header may not call the API, or None if it may
    (always None when no token is configured)."""
    if token is None:
        return None
    scheme, _, credentials = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not credentials.strip():
        return "missing bearer token"
    # Header values arrive decoded as latin-1; encoding back gives the bytes that were sent.
    given = credentials.strip().encode("latin-1", "replace")
    if not hmac.compare_digest(given, token.get_secret_value().encode("utf-8")):
        return "invalid bearer token"
    return None


async def require_operator(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """The dependency every operator route carries; a no-op when no token is configured."""
    config: GatewayConfig = request.app.state.config
    refusal = authorization_refusal(request.headers.get("authorization"), config.api.token)
    if refusal is not None and _credentials is None:
        sessions: UiSessions | None = getattr(request.app.state, "ui_sessions", None)
        signed_in, csrf_refusal = dashboard_refusal(
            request.method,
            request.cookies.get(SESSION_COOKIE),
            request.headers.get(CSRF_HEADER),
            sessions,
        )
        if csrf_refusal is not None:
            raise ApiError(403, "csrf_failed", csrf_refusal)
        if signed_in:
            return
    if refusal is not None:
        raise ApiError(401, "unauthorized", refusal, headers=UNAUTHORIZED_CHALLENGE)


def dashboard_refusal(
    method: str, cookie: str | None, csrf_token: str | None, sessions: UiSessions | None
) -> tuple[bool, str | None]:
    """Whether a request comes from a signed-in dashboard page (a live session cookie), and
    why it is refused anyway: a change (anything but a read) without that session's CSRF token.
    """
    session = sessions.get(cookie) if sessions is not None else None
    if session is None:
        return False, None
    if method not in _SAFE_METHODS and not csrf_matches(session, csrf_token):
        return True, f"a dashboard request that changes state needs {CSRF_HEADER}"
    return True, None
