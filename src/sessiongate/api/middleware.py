"""ASGI middleware that must see a request before FastAPI parses it.

`BodyLimitMiddleware` enforces `api.max_body_bytes` on the bytes actually received, so a
chunked body without a `Content-Length` is cut off too, and no oversized body is ever handed to
the JSON parser. `SessionKeyPathMiddleware` keeps the session-key segment of
`/v1/sessions/{key}/...` percent-encoded for routing: servers decode the path before routing,
and a key may contain `/` (a chat id with a slash), which would otherwise split the path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from sessiongate.api.errors import error_response

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "BodyLimitMiddleware",
    "RequestCounterMiddleware",
    "SessionKeyPathMiddleware",
    "UiHeadersMiddleware",
]

_SESSIONS_PREFIX = "/v1/sessions/"


class BodyLimitMiddleware:
    """Reads the whole body (at most `max_body_bytes`) before the app runs, then replays it.

    An oversized body is still read to its end, up to `_DRAIN_FACTOR` times the limit, and
    thrown away before the 413 goes out: closing a socket with unread data makes the kernel
    reset the connection, and the client would see a reset instead of the answer. Past that
    budget the 413 is sent at once and the connection closed.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared == -1:
            await _refuse(scope, receive, send, 400, "bad_request", "invalid Content-Length")
            return
        drain_budget = self.max_body_bytes * _DRAIN_FACTOR
        if declared is not None and declared > self.max_body_bytes:
            drained = declared <= drain_budget and await _drain(receive, drain_budget)
            await self._too_large(scope, receive, send, drained=drained)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            more = bool(message.get("more_body", False))
            size += len(body)
            if size > self.max_body_bytes:
                drained = not more or await _drain(receive, drain_budget - size)
                await self._too_large(scope, receive, send, drained=drained)
                return
            chunks.append(body)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            # Later calls wait for the disconnect, as the server's own receive does.
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(
        self, scope: Scope, receive: Receive, send: Send, *, drained: bool
    ) -> None:
        await _refuse(
            scope,
            receive,
            send,
            413,
            "payload_too_large",
            f"the request body is larger than {self.max_body_bytes} bytes",
            close=not drained,
        )


# How much of an oversized body is read and discarded so the client gets its 413 cleanly.
_DRAIN_FACTOR = 8


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


def _content_length(scope: Scope) -> int | None:
    """The declared length; None when absent, -1 when unparseable."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return -1
            return length if length >= 0 else -1
    return None


async def _refuse(
    scope: Scope,
    receive: Receive,
    send: Send,
    status: int,
    code: str,
    message: str,
    *,
    close: bool = True,
) -> None:
    # A connection with an unread body in it cannot be reused.
    headers = {"Connection": "close"} if close else None
    response = error_response(status, code, message, headers=headers)
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
