"""`SignalCliStub`: a small signal-cli daemon (HTTP mode) on loopback, for tests, `try`, bench.

It speaks signal-cli's wire format (signal-cli-jsonrpc(5)) so the adapter's httpx client runs
unchanged against it:

- `GET /api/v1/check`: 200 (503 while `down`);
- `GET /api/v1/events?account=`: the SSE stream (`id:<start>-<seq>`, `event:receive`,
  `data:{"envelope": ..., "account": ...}`), with signal-cli's replay: a client reconnecting
  with `Last-Event-ID` first gets the kept events after it (all of them for an unknown id);
  keep-alive comments every `keepalive_seconds` when set;
- `POST /api/v1/rpc`: JSON-RPC 2.0 `send` (text with `textStyle` ranges checked against the
  text's UTF-16 length, quotes, data-URI attachments), `sendTyping`, `sendReaction`,
  `remoteDelete`, `getAttachment`, `getUserStatus`; errors as signal-cli gives them
  (`{"error": {"code", "message", "data": {"response": ...}}}`).

The test's side: `push(envelope)` delivers a receive event; `redeliver(n)` sends a pushed one
again as a new event; `drop_streams()` closes every open stream (the daemon restarting its
connection), `refuse_streams` answers that many stream requests 503, `hang` stops the streams
(no event, no keep-alive: connected but deaf); `fail(kind, fault)` queues a failure for the
next calls of a kind (`send`, `upload` for a send with attachments, or a method name). `sent`,
`uploads`, `typing`, `reactions`, `deleted`, `calls` record what the bot did.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from sessiongate.testing.stubs.server import serve_app, serve_in_thread

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from starlette.requests import Request

__all__ = [
    "BLOCKED",
    "FORMAT_REJECTED",
    "NETWORK_FAILURE",
    "RATE_LIMITED",
    "Fault",
    "SignalCliStub",
    "data_envelope",
    "serve_stub",
    "serve_stub_in_thread",
]

_STYLES = frozenset({"BOLD", "ITALIC", "STRIKETHROUGH", "MONOSPACE", "SPOILER"})
# signal-cli keeps this many events for clients that reconnect.
KEPT_EVENTS = 1000


@dataclass(frozen=True, slots=True)
class Fault:
    """A JSON-RPC error to answer with, or (`code` None) a call carried out whose answer comes
    only after `delay_seconds` (a send that times out on the client after it was delivered)."""

    code: int | None
    message: str = ""
    data: dict[str, Any] | None = None
    delay_seconds: float = 0.0


def _results(kind: str, **extra: Any) -> dict[str, Any]:
    return {"response": {"timestamp": 0, "results": [{"type": kind, **extra}]}}


RATE_LIMITED = Fault(-5, "Failed to send message due to rate limiting",
                     _results("RATE_LIMIT_FAILURE", retryAfterSeconds=2))  # fmt: skip
BLOCKED = Fault(-1, "The user +15550000099 is not registered.",
                _results("UNREGISTERED_FAILURE"))  # fmt: skip
NETWORK_FAILURE = Fault(-3, "Failed to send message: network failure",
                        _results("NETWORK_FAILURE"))  # fmt: skip
FORMAT_REJECTED = Fault(-1, "Invalid textStyle syntax (0:99:BOLD) expected 'start:length:STYLE'")
QUOTE_REJECTED = Fault(-1, "Invalid quote author")
ATTACHMENT_REJECTED = Fault(-32603, "Failed to send message: Attachment too big "
                            "(AttachmentInvalidException)")  # fmt: skip


def data_envelope(
    text: str,
    *,
    number: str | None,
    uuid: str | None,
    timestamp: int,
    name: str | None = None,
    group_id: str | None = None,
    group_name: str | None = None,
    **data: Any,
) -> dict[str, Any]:
    """A receive event with a dataMessage, as signal-cli writes it (`data` adds fields)."""
    message: dict[str, Any] = {"timestamp": timestamp, "message": text, "expiresInSeconds": 0,
                               "viewOnce": False, **data}  # fmt: skip
    if group_id is not None:
        message["groupInfo"] = {"groupId": group_id, "groupName": group_name or "A group",
                                "revision": 1, "type": "DELIVER"}  # fmt: skip
    return {"envelope": {"source": number or uuid, "sourceNumber": number, "sourceUuid": uuid,
                         "sourceName": name, "sourceDevice": 1, "timestamp": timestamp,
                         "serverReceivedTimestamp": timestamp + 5,
                         "serverDeliveredTimestamp": timestamp + 9,
                         "dataMessage": message}}  # fmt: skip


class SignalCliStub:
    def __init__(
        self,
        account: str = "+15550000001",
        *,
        uuid: str = "0b0b0b0b-0000-4000-8000-00000000b0b0",
    ) -> None:
        self.account = account
        self.uuid = uuid
        # Event ids are "<start>-<seq>", as signal-cli's: an id from another run never matches.
        self.prefix = f"{int(time.time() * 1000)}-"
        self.kept: deque[tuple[int, str]] = deque(maxlen=KEPT_EVENTS)
        self.pushed: list[dict[str, Any]] = []
        self.sent: list[dict[str, Any]] = []
        self.uploads: list[dict[str, Any]] = []
        self.typing: list[dict[str, Any]] = []
        self.reactions: list[dict[str, Any]] = []
        self.deleted: list[dict[str, Any]] = []
        self.calls: Counter[str] = Counter()
        self.faults: dict[str, deque[Fault]] = {}
        self.attachments: dict[str, bytes] = {}
        # Every Last-Event-ID a stream was opened with (None: none sent).
        self.resumed_from: list[str | None] = []
        self.open_streams = 0
        self.max_open_streams = 0
        self.streams_opened = 0
        self.refuse_streams = 0
        self.down = False
        self.hang = False
        self.keepalive_seconds: float | None = None
        self.keepalives = 0
        # When an event first went out on a stream (perf_counter), by event timestamp.
        self.delivered_at: dict[int, float] = {}
        self._seq = itertools.count(1)
        self._timestamps = itertools.count(int(time.time() * 1000) * 10)
        self._wake = asyncio.Event()
        self._drops = 0
        self._closing = False
        self.app = Starlette(
            routes=[
                Route("/api/v1/check", self._check, methods=["GET"]),
                Route("/api/v1/events", self._events, methods=["GET"]),
                Route("/api/v1/rpc", self._rpc, methods=["POST"]),
            ]
        )

    # ------------------------------------------------------------------ the test's side

    def push(self, event: dict[str, Any]) -> str:
        """Deliver a receive event (`{"envelope": ...}`; the account is added); its SSE id."""
        event = {**event, "account": self.account}
        seq = next(self._seq)
        self.kept.append((seq, json.dumps(event, separators=(",", ":"))))
        self.pushed.append(event)
        self._notify()
        return f"{self.prefix}{seq}"

    def push_raw(self, data: str) -> str:
        """Deliver a stream event whose data is `data` as it is (a malformed event)."""
        seq = next(self._seq)
        self.kept.append((seq, data))
        self._notify()
        return f"{self.prefix}{seq}"

    def redeliver(self, index: int) -> str:
        """Deliver pushed event `index` once more, as a new stream event."""
        return self.push(self.pushed[index])

    def drop_streams(self) -> None:
        self._drops += 1
        self._notify()

    def fail(self, kind: str, fault: Fault, times: int = 1) -> None:
        self.faults.setdefault(kind, deque()).extend([fault] * times)

    def release_hang(self) -> None:
        self.hang = False
        self._notify()

    def _notify(self) -> None:
        self._wake.set()
        self._wake = asyncio.Event()

    def texts(self) -> list[str]:
        return [str(m.get("message", "")) for m in self.sent]

    # ------------------------------------------------------------------ the daemon

    async def _check(self, request: Request) -> Response:
        return Response(status_code=503 if self.down else 200)

    async def _events(self, request: Request) -> Response:
        account = request.query_params.get("account")
        if account is not None and unquote(account) != self.account:
            return JSONResponse({"error": "Specified account does not exist"}, status_code=400)
        if self.down or self.refuse_streams > 0:
            self.refuse_streams = max(0, self.refuse_streams - 1)
            return Response("daemon unavailable", status_code=503)
        last = request.headers.get("last-event-id")
        self.resumed_from.append(last)
        self.streams_opened += 1
        return StreamingResponse(self._stream(last), media_type="text/event-stream")

    async def _stream(self, last: str | None) -> AsyncIterator[bytes]:
        drops = self._drops
        cursor = _sequence(last, self.prefix) if last is not None else None
        if cursor is None:
            # No id: only what comes from now on. An unknown id: everything kept.
            cursor = self.kept[-1][0] if self.kept and last is None else 0
        self.open_streams += 1
        self.max_open_streams = max(self.max_open_streams, self.open_streams)
        try:
            while not self._closing and drops == self._drops:
                wake = self._wake
                if self.hang:
                    await wake.wait()
                    continue
                due = [(s, d) for s, d in self.kept if s > cursor]
                for seq, data in due:
                    cursor = seq
                    stamp = _stamp_of(data)
                    if stamp is not None:
                        self.delivered_at.setdefault(stamp, time.perf_counter())
                    yield f"id:{self.prefix}{seq}\nevent:receive\ndata:{data}\n\n".encode()
                if due:
                    continue
                try:
                    async with asyncio.timeout(self.keepalive_seconds):
                        await wake.wait()
                except TimeoutError:
                    self.keepalives += 1
                    yield b":\n"
        finally:
            self.open_streams -= 1

    async def _rpc(self, request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ClientDisconnect:
            return Response(status_code=499)
        except ValueError:
            return _error(None, -32700, "Parse error")
        if not isinstance(body, dict) or not isinstance(body.get("method"), str):
            return _error(None, -32600, "method field must be set")
        rid, method = body.get("id"), body["method"]
        params = body.get("params") or {}
        if not isinstance(params, dict):
            return _error(rid, -32602, "params must be an object")
        account = params.pop("account", None)
        if account is not None and account != self.account:
            return _error(rid, -32602, "Specified account does not exist")
        kind = "upload" if method == "send" and params.get("attachments") else method
        self.calls[kind] += 1
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return _error(rid, -32601, "Method not implemented")
        queued = self.faults.get(kind)
        if queued:
            fault = queued.popleft()
            if fault.code is None:
                result = handler(params)
                await asyncio.sleep(fault.delay_seconds)
                return JSONResponse({"jsonrpc": "2.0", "result": result, "id": rid})
            return _error(rid, fault.code, fault.message, fault.data)
        try:
            result = handler(params)
        except _UserError as exc:
            return _error(rid, -1, str(exc))
        return JSONResponse({"jsonrpc": "2.0", "result": result, "id": rid})

    def _address(self, params: dict[str, Any]) -> dict[str, Any]:
        recipient, group = params.get("recipient"), params.get("groupId")
        if bool(recipient) == bool(group):
            raise _UserError("No recipients given" if not recipient else "Both recipient and group")
        if recipient:
            return {"recipient": recipient[0] if isinstance(recipient, list) else recipient}
        return {"groupId": group[0] if isinstance(group, list) else group}

    def _api_send(self, params: dict[str, Any]) -> Any:
        where = self._address(params)
        text = str(params.get("message") or "")
        attachments = params.get("attachments") or params.get("attachment") or []
        if isinstance(attachments, str):
            attachments = [attachments]
        if not text and not attachments:
            raise _UserError("Sending empty message is not allowed")
        styles = params.get("textStyle") or []
        units = len(text.encode("utf-16-le", "surrogatepass")) // 2
        for style in styles:
            start, _, rest = str(style).partition(":")
            length, _, name = rest.partition(":")
            if not (start.isdigit() and length.isdigit()) or name not in _STYLES:
                raise _UserError(f"Invalid textStyle syntax ({style})")
            if int(start) + int(length) > units:
                raise _UserError(f"Invalid textStyle range ({style}) for {units} units")
        timestamp = next(self._timestamps)
        record = {**where, "message": text, "timestamp": timestamp}
        for key in ("textStyle", "quoteTimestamp", "quoteAuthor"):
            if key in params:
                record[key] = params[key]
        if attachments:
            for uri in attachments:
                name, data = _data_uri(str(uri))
                quote = {k: v for k, v in record.items() if k.startswith("quote")}
                self.uploads.append(
                    {**where, "name": name, "data": data, "timestamp": timestamp, **quote}
                )
            if text:
                self.sent.append(record)
        else:
            self.sent.append(record)
        return {"timestamp": timestamp, "results": [{"recipientAddress": {
            "number": where.get("recipient")}, "type": "SUCCESS"}]}  # fmt: skip

    def _api_sendTyping(self, params: dict[str, Any]) -> Any:
        self.typing.append({**self._address(params), "stop": bool(params.get("stop"))})
        return {}

    def _api_sendReaction(self, params: dict[str, Any]) -> Any:
        if not params.get("emoji") or not params.get("targetAuthor"):
            raise _UserError("emoji and targetAuthor are required")
        self.reactions.append({**self._address(params), "emoji": params["emoji"],
                               "targetAuthor": params["targetAuthor"],
                               "targetTimestamp": params.get("targetTimestamp")})  # fmt: skip
        return {"timestamp": next(self._timestamps), "results": []}

    def _api_remoteDelete(self, params: dict[str, Any]) -> Any:
        target = int(params.get("targetTimestamp") or 0)
        self.deleted.append({**self._address(params), "targetTimestamp": target})
        self.sent = [m for m in self.sent if m["timestamp"] != target]
        return {"timestamp": next(self._timestamps), "results": []}

    def _api_getAttachment(self, params: dict[str, Any]) -> Any:
        data = self.attachments.get(str(params.get("id")))
        if data is None:
            raise _UserError("Attachment not found")
        return {"data": base64.b64encode(data).decode("ascii")}

    def _api_getUserStatus(self, params: dict[str, Any]) -> Any:
        recipients = params.get("recipient") or []
        if not isinstance(recipients, list):
            recipients = [recipients]
        return [{"recipient": r, "number": r, "isRegistered": True,
                 "uuid": self.uuid if r == self.account else None} for r in recipients]  # fmt: skip


class _UserError(Exception):
    """signal-cli's UserErrorException: answered with code -1."""


def _stamp_of(data: str) -> int | None:
    try:
        stamp = json.loads(data)["envelope"]["timestamp"]
    except (ValueError, KeyError, TypeError):
        return None
    return stamp if isinstance(stamp, int) else None


def _sequence(event_id: str, prefix: str) -> int | None:
    if event_id.startswith(prefix) and event_id[len(prefix) :].isdigit():
        return int(event_id[len(prefix) :])
    return None


def _data_uri(uri: str) -> tuple[str, bytes]:
    """(file name, bytes) of `data:<mime>;filename=<name>;base64,<data>`."""
    if not uri.startswith("data:") or ";base64," not in uri:
        raise _UserError("Attachment is not a data URI")
    head, _, payload = uri.partition(";base64,")
    fields = dict(p.split("=", 1) for p in head.split(";")[1:] if "=" in p)
    return fields.get("filename", "attachment"), base64.b64decode(payload)


def _error(rid: Any, code: int, message: str, data: Any = None) -> JSONResponse:
    body = {"jsonrpc": "2.0", "error": {"code": code, "message": message, "data": data},
            "id": rid}  # fmt: skip
    return JSONResponse(body)


@contextlib.asynccontextmanager
async def serve_stub(stub: SignalCliStub) -> AsyncIterator[str]:
    """Serve `stub` on 127.0.0.1 (a free port) in this event loop; yields its base URL."""

    def stop() -> None:  # open streams end with the server
        stub._closing = True
        stub._notify()

    async with serve_app(stub.app, name="the signal-cli stub", on_stop=stop) as url:
        yield url


@contextlib.asynccontextmanager
async def _made_and_served(
    stub_factory: type[SignalCliStub],
) -> AsyncIterator[tuple[SignalCliStub, str]]:
    stub = stub_factory()  # made on the loop that serves it (its events belong there)
    async with serve_stub(stub) as url:
        yield stub, url


@contextlib.contextmanager
def serve_stub_in_thread(
    stub_factory: type[SignalCliStub] = SignalCliStub,
) -> Iterator[tuple[SignalCliStub, str, asyncio.AbstractEventLoop]]:
    """A stub served on an event loop of its own thread, for callers without a loop (a CLI
    command, the benchmark); yields (stub, base URL, its loop: call the stub through it)."""
    serving = serve_in_thread(lambda: _made_and_served(stub_factory), name="the signal-cli stub")
    with serving as ((stub, url), loop):
        yield stub, url, loop
