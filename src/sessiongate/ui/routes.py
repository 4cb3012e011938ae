"""The dashboard's own routes: its pages, its assets, sign-in and sign-out.

Everything else the dashboard does goes through the JSON API (`/v1/...`), which accepts the
dashboard's session cookie in place of the bearer token (see `api.auth`).
"""

from __future__ import annotations

import hmac
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, Response

import sessiongate
from sessiongate.ui.sessions import SESSION_COOKIE, UiSessions, csrf_matches

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from sessiongate.core.config import GatewayConfig

__all__ = [
    "MAX_LOGIN_BYTES",
    "SECURITY_HEADERS",
    "is_same_origin",
    "root_router",
    "router",
    "static_dir",
]

# No script, style, image or connection may come from anywhere but the gateway itself, and no
# inline script runs: a transcript that smuggles markup past the escaping still cannot act.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}
# A login form is a few hundred bytes; anything larger is not one.
MAX_LOGIN_BYTES = 8_192

router = APIRouter(prefix="/ui", include_in_schema=False)
# `/` itself: a person who opens the gateway's address in a browser lands on the dashboard.
root_router = APIRouter(include_in_schema=False)


def static_dir() -> Path:
    return _package_dir() / "static"


def _package_dir() -> Path:
    # The package is installed as files (hatchling wheel or editable), never zipped.
    return resources.files("sessiongate.ui")  # type: ignore[return-value]


def _page(name: str) -> Response:
    response = FileResponse(_package_dir() / "pages" / name, media_type="text/html")
    response.headers["Cache-Control"] = "no-store"
    return response


def _sessions(request: Request) -> UiSessions:
    sessions: UiSessions = request.app.state.ui_sessions
    return sessions


def _config(request: Request) -> GatewayConfig:
    config: GatewayConfig = request.app.state.config
    return config


def _token_required(request: Request) -> bool:
    return _config(request).api.token is not None


def is_same_origin(headers: Mapping[str, str]) -> bool:
    """Whether a form post comes from the gateway's own page: a sign-in or sign-out posted
    from another site is refused (login CSRF). Checked before the form is read."""
    # Every current browser says where a request comes from in Sec-Fetch-Site; Origin is
    # the fallback for older ones. A client that sends neither is not a browser on another site.
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = headers.get("origin")
    if origin is None:
        return True
    return urlsplit(origin).netloc == headers.get("host", "")


def _same_origin(request: Request) -> bool:
    return is_same_origin(request.headers)


def _set_cookie(request: Request, response: Response, session_id: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


@root_router.get("/")
async def site_root() -> Response:
    return RedirectResponse("/ui/", status_code=303)


@router.get("")
async def ui_root() -> Response:
    return RedirectResponse("/ui/", status_code=303)


@router.get("/")
async def ui_index(request: Request) -> Response:
    if (
        _token_required(request)
        and _sessions(request).get(request.cookies.get(SESSION_COOKIE)) is None
    ):
        return RedirectResponse("/ui/login", status_code=303)
    return _page("index.html")


@router.get("/login")
async def login_page(request: Request) -> Response:
    if not _token_required(request):
        return RedirectResponse("/ui/", status_code=303)
    return _page("login.html")


@router.post("/login")
async def login(request: Request) -> Response:
    if not _same_origin(request):
        return _refused(403, "forbidden", "sign-in from another site is refused")
    token = _config(request).api.token
    if token is None:
        return RedirectResponse("/ui/", status_code=303)
    body = await request.body()
    if len(body) > MAX_LOGIN_BYTES:
        return _refused(413, "body_too_large", "a sign-in form is at most 8 KiB")
    try:
        form = parse_qs(body.decode("utf-8"), max_num_fields=4)
    except (UnicodeDecodeError, ValueError):
        form = {}
    given = (form.get("token") or [""])[0]
    if not hmac.compare_digest(given.encode("utf-8"), token.get_secret_value().encode("utf-8")):
        # Counted against the client's address (api/auth_limits.py, checked before the form
        # is read); the error travels as a flag, never the attempted token.
        failures = getattr(request.app.state, "auth_failures", None)
        if failures is not None:
            failures.record_failure(request.client.host if request.client else "unknown")
        return RedirectResponse("/ui/login?error=1", status_code=303)
    session = _sessions(request).create()
    response = RedirectResponse("/ui/", status_code=303)
    _set_cookie(request, response, session.id)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    sessions = _sessions(request)
    session = sessions.get(request.cookies.get(SESSION_COOKIE))
    body = await request.body()
    try:
        form = parse_qs(body[:MAX_LOGIN_BYTES].decode("utf-8"), max_num_fields=4)
    except (UnicodeDecodeError, ValueError):
        form = {}
    given = (form.get("csrf_token") or [""])[0] or request.headers.get("x-csrf-token")
    if session is None or not csrf_matches(session, given) or not _same_origin(request):
        return _refused(403, "csrf_failed", "sign-out needs the page's CSRF token")
    sessions.end(session.id)
    response = RedirectResponse("/ui/login" if _token_required(request) else "/ui/", 303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.get("/session")
async def session_info(request: Request) -> Response:
    """The page's CSRF token, and how the gateway is protected. Without a configured token the
    API is open on loopback, and so the dashboard starts a session for whoever asks."""
    sessions = _sessions(request)
    session = sessions.get(request.cookies.get(SESSION_COOKIE))
    created = False
    if session is None:
        if _token_required(request):
            return _refused(401, "unauthorized", "sign in at /ui/login")
        session = sessions.create()
        created = True
    config = _config(request)
    response = JSONResponse(
        {
            "csrf_token": session.csrf_token,
            "auth": "token" if config.api.token is not None else "open",
            "version": sessiongate.__version__,
        }
    )
    response.headers["Cache-Control"] = "no-store"
    if created:
        _set_cookie(request, response, session.id)
    return response


def _refused(status: int, code: str, message: str) -> Response:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
