"""ASGI middleware that must see a request before FastAPI parses it.

`BearerAuthMiddleware` refuses a request without the configured token before anything reads
its body: an unauthenticated client cannot make the gateway parse, or even keep, what it sends.
`BodyLimitMiddleware` reads the body within its bounds and hands the app only one it may
parse: at most `api.max_body_bytes` of the bytes actually received (so a chunked body without a
`Content-Length` is cut off too), arrived within `api.body_timeout_seconds` (api/uploads.py),
and, when it is declared JSON, UTF-8 text (the JSON parser would otherwise guess UTF-16 or
UTF-32 from the bytes). `SessionKeyPathMiddleware` keeps the session-key segment of
`/v1/sessions/{key}/...` percent-encoded for routing: servers decode the path before routing,
and a key may contain `/` (a chat id with a slash), which would otherwise split the path.

A body refused as too large is still read to its end, up to `_DRAIN_FACTOR` times the limit
and within the body deadline, and thrown away unparsed before the 413 goes out: closing a
socket with unread data makes the kernel reset the connection, and the client would see a
reset instead of the answer. Past that budget the 413 is sent at once and the connection
closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from starlette.requests import cookie_parser

from sessiongate.api.auth import (
    UNAUTHORIZED_CHALLENGE,
    authorization_refusal,
    dashboard_refusal,
    is_open_path,
)
from sessiongate.api.auth_limits import client_address
from sessiongate.api.errors import error_response
from sessiongate.ui.sessions import CSRF_HEADER, SESSION_COOKIE

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pydantic import SecretStr
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from sessiongate.api.auth_limits import FailureLimiter
    from sessiongate.api.uploads import UploadGate
    from sessiongate.ui.sessions import UiSessions

__all__ = [
    "BearerAuthMiddleware",
    "BodyLimitMiddleware",
    "RequestCounterMiddleware",
    "SessionKeyPathMiddleware",
    "UiHeadersMiddleware",
    "has_body",
    "header",
    "is_declared_json",
    "refuse_unread",
]

_SESSIONS_PREFIX = "/v1/sessions/"

# How much of a refused body is read and discarded so the client gets its answer cleanly.
_DRAIN_FACTOR = 8


class BearerAuthMiddleware:
    """401 for a request without the token (see api/auth.py), sent before its body is read.

    The answer goes out at once, unread body and all. On a connection kept alive the server
    then reads the rest of the body and drops it without handing it to the app, so the client
    gets its 401 cleanly; when the body is too long for that to be worth it (over the drain
    budget, or of unknown length), or the client waits for a `100 Continue`, the connection is
    closed instead.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: SecretStr | None,
        max_body_bytes: int,
        ui_sessions: UiSessions | None = None,
        failures: FailureLimiter | None = None,
    ) -> None:
        self.app = app
        self.token = token
        self.drain_budget = max_body_bytes * _DRAIN_FACTOR
        self.ui_sessions = ui_sessions
        self.failures = failures

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.token is None or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = None
        status, code = 401, "unauthorized"
        given = header(scope, b"authorization")
        if not is_open_path(scope["path"]):
            if given is not None and self.failures is not None:
                # A credential is an attempt: a client over its failure budget is told to wait,
                # whatever it sent (api/auth_limits.py).
                client = client_address(scope)
                wait = self.failures.retry_after(client)
                if wait is not None:
                    await self._too_many(scope, receive, send, wait)
                    return
                refusal = authorization_refusal(given, self.token)
                if refusal is not None:
                    self.failures.record_failure(client)
            else:
                refusal = authorization_refusal(given, self.token)
        if refusal is not None and given is None:
            cookie = cookie_parser(header(scope, b"cookie") or "").get(SESSION_COOKIE)
            signed_in, csrf_refusal = dashboard_refusal(
                scope.get("method", "GET"),
                cookie,
                header(scope, CSRF_HEADER.lower().encode("latin-1")),
                self.ui_sessions,
            )
            if signed_in:
                refusal, status, code = csrf_refusal, 403, "csrf_failed"
        if refusal is None:
            await self.app(scope, receive, send)
            return
        await refuse_unread(
            scope,
            receive,
            send,
            status,
            code,
            refusal,
            drain_budget=self.drain_budget,
            headers=UNAUTHORIZED_CHALLENGE if status == 401 else None,
        )

    async def _too_many(self, scope: Scope, receive: Receive, send: Send, wait: int) -> None:
        await refuse_unread(
            scope,
            receive,
            send,
            429,
            "too_many_requests",
            f"too many wrong tokens from this address; try again in {wait} seconds",
            drain_budget=self.drain_budget,
            headers={"Retry-After": str(wait)},
        )


async def refuse_unread(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    code: str,
    message: str,
    *,
    drain_budget: int,
    headers: dict[str, str] | None = None,
) -> None:
    """Answer a request whose body nothing has read yet, without reading it for the app.

    The connection is kept only when the server can drop the rest of the body cheaply: a
    declared length within `drain_budget` and no `Expect: 100-continue` waiting for a go-ahead.
    A websocket is closed with the refusal as its reason.
    """
    if scope["type"] == "websocket":
        await send({"type": "websocket.close", "code": 1008, "reason": message})
        return
    declared = _content_length(scope)
    if declared is None:
        # No length: either no body, or a chunked one of any size.
        declared = -1 if header(scope, b"transfer-encoding") is not None else 0
    keep = 0 <= declared <= drain_budget and header(scope, b"expect") is None
    await _refuse(scope, receive, send, status, code, message, close=not keep, headers=headers)


def has_body(scope: Scope) -> bool:
    """Whether the request announces a body: a non-zero (or unreadable) length, or chunks."""
    declared = _content_length(scope)
    if declared is not None:
        return declared != 0
    return header(scope, b"transfer-encoding") is not None


class BodyLimitMiddleware:
    """Reads the whole body within its bounds (see the module docstring), then replays it.

    `path_limits` gives some routes a limit of their own (the platform webhooks), in place of
    `max_body_bytes`.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        uploads: UploadGate,
        path_limits: Mapping[str, int] | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.uploads = uploads
        self.path_limits = dict(path_limits or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared == -1:
            await _refuse(scope, receive, send, 400, "bad_request", "invalid Content-Length")
            return
        limit = self.path_limits.get(scope["path"], self.max_body_bytes)
        try:
            async with self.uploads.deadline():
                body = await self._read(receive, declared, limit)
        except TimeoutError:
            await self._timed_out(scope, receive, send)
            return
        if body is None:
            return  # the client went away
        if isinstance(body, _TooLarge):
            await _refuse(
                scope,
                receive,
                send,
                413,
                "payload_too_large",
                f"the request body is larger than {limit} bytes",
                close=not body.drained,
            )
            return
        if body and is_declared_json(scope) and not _is_utf8_text(body):
            await _refuse(
                scope,
                receive,
                send,
                400,
                "invalid_json",
                "the request body is not valid JSON: it is not UTF-8 text",
                close=False,
            )
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            # Later calls wait for the disconnect, as the server's own receive does.
            return await receive()

        await self.app(scope, replay, send)

    async def _read(
        self, receive: Receive, declared: int | None, limit: int
    ) -> bytes | _TooLarge | None:
        drain_budget = limit * _DRAIN_FACTOR
        if declared is not None and declared > limit:
            return _TooLarge(declared <= drain_budget and await _drain(receive, drain_budget))
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            more = bool(message.get("more_body", False))
            size += len(chunk)
            if size > limit:
                return _TooLarge(not more or await _drain(receive, drain_budget - size))
            chunks.append(chunk)
        return b"".join(chunks)

    async def _timed_out(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.uploads.is_closed:
            status, code = 503, "shutting_down"
            message = "the gateway is shutting down; send the request again once it is back"
        else:
            status, code = 408, "request_timeout"
            seconds = f"{self.uploads.timeout_seconds:g}"
            message = f"the request body did not arrive within {seconds} seconds"
        await _refuse(scope, receive, send, status, code, message)


@dataclass(frozen=True, slots=True)
class _TooLarge:
    """The body is over the limit; `drained` when it was still read to its end."""

    drained: bool


async def _drain(receive: Receive, budget: int) -> bool:
    """Discard the rest of the body; False if it was longer than `budget` or cut off."""
    while budget >= 0:
        message = await receive()
        if message["type"] == "http.disconnect":
            return False
        budget -= len(message.get("body", b""))
        if not message.get("more_body", False):
            return budget >= 0
    return False


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of header `name` (lower-case bytes), or None."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def _content_length(scope: Scope) -> int | None:
    """The declared length; None when absent, -1 when unparseable."""
    value = header(scope, b"content-length")
    if value is None:
        return None
    try:
        length = int(value)
    except ValueError:
        return -1
    return length if length >= 0 else -1


def is_declared_json(scope: Scope) -> bool:
    """Whether FastAPI will parse the body as JSON: no Content-Type, or a JSON one."""
    value = header(scope, b"content-type")
    if value is None:
        return True
    media = value.split(";", 1)[0].strip().lower()
    kind, _, subtype = media.partition("/")
    return kind == "application" and (subtype == "json" or subtype.endswith("+json"))


def _is_utf8_text(body: bytes) -> bool:
    # A NUL byte can be no part of JSON text; in a body that decodes as UTF-8 it is the mark
    # of UTF-16 or UTF-32, which the JSON parser would otherwise detect and accept.
    if b"\x00" in body:
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


async def _refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    code: str,
    message: str,
    *,
    close: bool = True,
    headers: dict[str, str] | None = None,
) -> None:
    # A connection with an unread body in it cannot be reused.
    all_headers = {**(headers or {}), **({"Connection": "close"} if close else {})}
    response = error_response(status, code, message, headers=all_headers or None)
    await response(scope, receive, send)


class SessionKeyPathMiddleware:
    """Routes `/v1/sessions/<raw key segment>/...` with the key segment still encoded.

    Route handlers decode the key once (`urllib.parse.unquote`), so `%2F` in a key is a slash
    inside the key, not a path separator.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(_SESSIONS_PREFIX):
            raw = scope.get("raw_path")
            if isinstance(raw, bytes):
                segments = raw.decode("latin-1").split("/")
                if len(segments) >= 4 and segments[1:3] == ["v1", "sessions"] and segments[3]:
                    rest = [unquote(s) for s in segments[4:]]
                    path = "/".join(["", "v1", "sessions", segments[3], *rest])
                    # In place, so the outer middleware sees the route the router records.
                    scope["path"] = path
        await self.app(scope, receive, send)


class RequestCounterMiddleware:
    """Counts answered requests by method, route template and status."""

    def __init__(self, app: ASGIApp, *, counter: Any) -> None:
        self.app = app
        self.counter = counter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def tracking_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.counter.labels(method=scope["method"], route=route, status=str(status)).inc()


class UiHeadersMiddleware:
    """Adds the dashboard's security headers (CSP and friends) to every `/ui` response."""

    def __init__(self, app: ASGIApp, *, headers: dict[str, str]) -> None:
        self.app = app
        self.headers = [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/ui"):
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *self.headers]
            await send(message)

        await self.app(scope, receive, send_with_headers)
