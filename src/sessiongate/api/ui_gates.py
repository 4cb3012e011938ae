"""The dashboard's sign-in and sign-out forms as body gates (api/body_gates.py).

What their headers prove is checked before the form is read: both must be posted from the
gateway's own page (`Sec-Fetch-Site`, or `Origin` against `Host`); a sign-in from an address
over its failure budget is a 429 (api/auth_limits.py); a sign-out must come from a signed-in
browser (its session cookie; the CSRF token may be in the form, checked by the route). Each
form is at most `MAX_LOGIN_BYTES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import cookie_parser

from sessiongate.api.auth_limits import client_address
from sessiongate.api.body_gates import BodyGate, Refusal
from sessiongate.ui.routes import MAX_LOGIN_BYTES, is_same_origin
from sessiongate.ui.sessions import SESSION_COOKIE

if TYPE_CHECKING:
    from starlette.datastructures import Headers
    from starlette.types import Scope

    from sessiongate.api.auth_limits import FailureLimiter
    from sessiongate.ui.sessions import UiSessions

__all__ = ["dashboard_gates"]


def dashboard_gates(sessions: UiSessions, failures: FailureLimiter) -> list[BodyGate]:
    def sign_in(scope: Scope, headers: Headers) -> Refusal | None:
        if not is_same_origin(headers):
            return Refusal(403, "forbidden", "sign-in from another site is refused")
        wait = failures.retry_after(client_address(scope))
        if wait is not None:
            return Refusal(
                429,
                "too_many_requests",
                f"too many wrong tokens from this address; try again in {wait} seconds",
                headers={"Retry-After": str(wait)},
            )
        return None

    def sign_out(scope: Scope, headers: Headers) -> Refusal | None:
        cookie = cookie_parser(headers.get("cookie", "")).get(SESSION_COOKIE)
        if not is_same_origin(headers) or sessions.get(cookie) is None:
            return Refusal(403, "csrf_failed", "sign-out needs the page's CSRF token")
        return None

    return [
        BodyGate("/ui/login", sign_in, MAX_LOGIN_BYTES),
        BodyGate("/ui/logout", sign_out, MAX_LOGIN_BYTES),
    ]
