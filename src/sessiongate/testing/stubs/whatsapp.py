"""`GraphApiStub`: a small WhatsApp Cloud API (Graph API) on loopback, for offline tests, the
benchmark and `sessiongate try whatsapp`.

It speaks the wire format pywa sends and reads: bearer-token JSON requests under `/v<version>/`,
answers shaped like Meta's (`messages[].id`, `contacts[].input`) and Meta's error object
(`error.code`, `message`, `type`, `error_data.details`, a `Retry-After` header on throttling),
so the SDK is driven unchanged through the client's `base_url`. Implemented: the phone number
(`GET /<phone_id>`, the credential check), `POST /<phone_id>/messages` (text, media by id,
templates, read receipts with the typing indicator), `POST /<phone_id>/media` (multipart
uploads, recorded in `uploads`), `GET /<media_id>` (the media URL) and the download it points
to (`GET /media/<media_id>`, token required); and the failures that matter, queued with `fail`.

Meta's side of the webhook: `push_message` builds a recorded-style webhook body (entry,
changes, value with metadata, contacts and messages), signs it with the app secret
(`X-Hub-Signature-256`) and posts it to the gateway: to `webhook_url` over HTTP, or to a
`deliver` coroutine in process. Posts go out one at a time, in order, as Meta sends them;
`redeliver` posts a body again (Meta's retry), `push_status` posts a delivery report.

Over the ~400-line budget: Meta's two sides (the Graph API it serves and the webhooks it
posts) share one object, because tests and the benchmark drive both and read both records.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.parser
import email.policy
import hashlib
import hmac
import itertools
import json
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sessiongate.testing.stubs.server import serve_app, serve_in_thread

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping

    from starlette.requests import Request

__all__ = [
    "BLOCKED",
    "MEDIA_REFUSED",
    "RATE_LIMITED",
    "REPLY_TARGET_GONE",
    "SERVER_ERROR",
    "WINDOW_CLOSED",
    "Fault",
    "GraphApiStub",
    "serve_stub",
    "serve_stub_in_thread",
    "sign",
]


@dataclass(frozen=True, slots=True)
class Fault:
    status: int
    code: int
    message: str
    details: str | None = None
    retry_after: int | None = None
    # Carry out the call, then answer only after this many seconds ("unconfirmed").
    delay_seconds: float = 0.0


RATE_LIMITED = Fault(429, 130429, "Rate limit hit", retry_after=2)
BLOCKED = Fault(400, 131026, "Message undeliverable")
WINDOW_CLOSED = Fault(
    400, 131047, "Re-engagement message", "More than 24 hours have passed since the recipient "
    "last replied to the sender number."
)  # fmt: skip
SERVER_ERROR = Fault(503, 131016, "Service unavailable")
MEDIA_REFUSED = Fault(400, 131053, "Media upload error", "Unsupported file type")
REPLY_TARGET_GONE = Fault(
    400, 131009, "Parameter value is not valid", "context message_id does not exist"
)


def sign(app_secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` value Meta sends with `body`."""
    return "sha256=" + hmac.new(app_secret.encode(), body, hashlib.sha256).hexdigest()


class GraphApiStub:
    def __init__(
        self,
        *,
        token: str = "EAAG-test-token",
        phone_number_id: str = "100200300",
        display_number: str = "15550001111",
        app_secret: str = "test-app-secret",
        waba_id: str = "900800700",
    ) -> None:
        self.token = token
        self.phone_number_id = phone_number_id
        self.display_number = display_number
        self.app_secret = app_secret
        self.waba_id = waba_id
        self.base_url = ""
        # Where signed webhook bodies go: a URL (`POST` over HTTP) or a coroutine in process.
        self.webhook_url: str | None = None
        self.deliver: Callable[[Mapping[str, str], bytes], Awaitable[Any]] | None = None
        self.sent: list[dict[str, Any]] = []  # message bodies the bot posted (with "id")
        self.typing: list[str] = []  # message ids the bot showed typing against
        self.read: list[str] = []
        self.uploads: list[dict[str, Any]] = []  # id, name, mime_type, data
        self.commands: list[dict[str, str]] = []  # command_name, command_description
        self.media: dict[str, tuple[bytes, str]] = {}  # inbound media: id -> (bytes, type)
        self.bodies: dict[str, bytes] = {}  # message id -> the webhook body that carried it
        self.webhook_answers: list[int] = []
        self.calls: Counter[str] = Counter()
        self.unauthorized = 0
        self.faults: dict[str, deque[Fault]] = {}
        self.on_call: Callable[[str, dict[str, Any]], None] | None = None
        self._ids = itertools.count(1)
        self._outbox: asyncio.Queue[bytes] | None = None
        self._poster: asyncio.Task[None] | None = None
        self._posted = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.app = Starlette(
            routes=[
                Route("/media/{media_id}", self._download, methods=["GET"]),
                Route("/v{version}/{node}", self._node, methods=["GET"]),
                Route("/v{version}/{phone_id}/messages", self._messages, methods=["POST"]),
                Route("/v{version}/{phone_id}/media", self._upload, methods=["POST"]),
                Route(
                    "/v{version}/{phone_id}/conversational_automation",
                    self._automation,
                    methods=["POST"],
                ),
            ]
        )

    # ------------------------------------------------------------------ Meta's side

    def message(
        self,
        text: str = "",
        *,
        sender: str = "15551234567",
        name: str | None = "Alice",
        bsuid: str | None = None,
        group_id: str | None = None,
        kind: str = "text",
        media: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
        timestamp: float | None = None,
        message_id: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A recorded-style webhook body with one message (not posted)."""
        message_id = message_id or f"wamid.IN{next(self._ids):08d}"
        message: dict[str, Any] = {
            "from": sender,
            "id": message_id,
            "timestamp": str(int(timestamp if timestamp is not None else time.time())),
            "type": kind,
        }
        if kind == "text":
            message["text"] = {"body": text}
        elif media is not None:
            message[kind] = media
        if group_id is not None:
            message["group_id"] = group_id
        if context is not None:
            message["context"] = context
        message.update(extra or {})
        contact: dict[str, Any] = {"profile": {"name": name} if name else {}, "wa_id": sender}
        if bsuid is not None:
            contact["user_id"] = bsuid
        return self._envelope({"contacts": [contact], "messages": [message]})

    def status(self, message_id: str, status: str, *, recipient: str = "15551234567",
               error: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
        report: dict[str, Any] = {
            "id": message_id,
            "status": status,
            "timestamp": str(int(time.time())),
            "recipient_id": recipient,
        }
        if error is not None:
            report["errors"] = [error]
        return self._envelope({"statuses": [report]})

    def _envelope(self, value: dict[str, Any]) -> dict[str, Any]:
        return {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": self.waba_id,
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {
                                    "display_phone_number": self.display_number,
                                    "phone_number_id": self.phone_number_id,
                                },
                                **value,
                            },
                        }
                    ],
                }
            ],
        }

    def encode(self, body: dict[str, Any]) -> bytes:
        """`body` as Meta posts it (compact JSON), kept by message id for `redeliver`."""
        raw = json.dumps(body, separators=(",", ":")).encode()
        for entry in body.get("entry", ()):
            for change in entry.get("changes", ()):
                for message in change.get("value", {}).get("messages", ()):
                    self.bodies[str(message.get("id"))] = raw
        return raw

    def push(self, body: dict[str, Any]) -> bytes:
        """Sign `body` and queue its post to the gateway; returns the bytes posted."""
        raw = self.encode(body)
        self._queue(raw)
        return raw

    def push_message(self, text: str = "", **fields: Any) -> str:
        """Post a one-message webhook; returns the message id."""
        body = self.message(text, **fields)
        self.push(body)
        return str(body["entry"][0]["changes"][0]["value"]["messages"][0]["id"])

    def push_status(self, message_id: str, status: str, **fields: Any) -> None:
        self.push(self.status(message_id, status, **fields))

    def redeliver(self, message_id: str) -> None:
        """Post the body that carried `message_id` again (Meta's retry)."""
        self._queue(self.bodies[message_id])

    def add_media(self, data: bytes, mime_type: str) -> str:
        """Inbound media the gateway can download; returns its media id."""
        media_id = f"{next(self._ids):015d}"
        self.media[media_id] = (data, mime_type)
        return media_id

    def _queue(self, raw: bytes) -> None:
        if self._outbox is None:
            self._outbox = asyncio.Queue()
            self._poster = asyncio.create_task(self._post_all())
        self._idle.clear()
        self._outbox.put_nowait(raw)

    async def wait_posted(self) -> None:
        """Until every queued webhook post has been answered."""
        await self._idle.wait()

    async def _post_all(self) -> None:
        assert self._outbox is not None
        async with contextlib.AsyncExitStack() as stack:
            http = None
            while True:
                raw = await self._outbox.get()
                headers = {"content-type": "application/json",
                           "x-hub-signature-256": sign(self.app_secret, raw)}  # fmt: skip
                try:
                    if self.deliver is not None:
                        status, _ = await self.deliver(headers, raw)
                    elif self.webhook_url is not None:
                        import httpx

                        if http is None:
                            http = await stack.enter_async_context(httpx.AsyncClient(timeout=30))
                        answer = await http.post(self.webhook_url, content=raw, headers=headers)
                        status = answer.status_code
                    else:
                        status = 0  # nowhere to post: as if the gateway were unreachable
                except Exception:  # the gateway failed: Meta sees no answer, and retries
                    status = 0
                self.webhook_answers.append(status)
                if self._outbox.empty():
                    self._idle.set()

    async def aclose(self) -> None:
        if self._poster is not None:
            self._poster.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poster

    # ------------------------------------------------------------------ the test's side

    def fail(self, call: str, fault: Fault, times: int = 1) -> None:
        """The next `times` calls of `call` (messages, media, phone, commands) fail."""
        self.faults.setdefault(call, deque()).extend([fault] * times)

    def texts(self, to: str | None = None) -> list[str]:
        return [
            str(m["text"]["body"])
            for m in self.sent
            if m.get("type") == "text" and (to is None or m.get("to") == to)
        ]

    # ------------------------------------------------------------------ the Graph API

    def _authorized(self, request: Request) -> bool:
        if request.headers.get("authorization") == f"Bearer {self.token}":
            return True
        self.unauthorized += 1
        return False

    def _fault(self, call: str) -> Fault | None:
        queue = self.faults.get(call)
        return queue.popleft() if queue else None

    @staticmethod
    def _error(fault: Fault) -> JSONResponse:
        error: dict[str, Any] = {"message": fault.message, "type": "OAuthException",
                                 "code": fault.code, "fbtrace_id": "Atest"}  # fmt: skip
        if fault.details is not None:
            error["error_data"] = {"messaging_product": "whatsapp", "details": fault.details}
        headers = {"retry-after": str(fault.retry_after)} if fault.retry_after else None
        return JSONResponse({"error": error}, status_code=fault.status, headers=headers)

    @staticmethod
    def _unauthorized() -> JSONResponse:
        return JSONResponse(
            {"error": {"message": "Invalid OAuth access token.", "type": "OAuthException",
                       "code": 190, "fbtrace_id": "Atest"}},
            status_code=401,
        )  # fmt: skip

    async def _node(self, request: Request) -> Response:
        node = request.path_params["node"]
        self.calls["node"] += 1
        if not self._authorized(request):
            return self._unauthorized()
        if node == self.phone_number_id:
            fault = self._fault("phone")
            if fault is not None:
                return self._error(fault)
            return JSONResponse({"id": node, "verified_name": "sessiongate test",
                                 "display_phone_number": f"+{self.display_number}"})  # fmt: skip
        found = self.media.get(node) or next(
            ((u["data"], u["mime_type"]) for u in self.uploads if u["id"] == node), None
        )
        if found is None:
            return self._error(Fault(400, 100, "Unsupported get request", "unknown object"))
        data, mime_type = found
        return JSONResponse({
            "messaging_product": "whatsapp", "id": node, "mime_type": mime_type,
            "sha256": hashlib.sha256(data).hexdigest(), "file_size": len(data),
            "url": f"{self.base_url}/media/{node}",
        })  # fmt: skip

    async def _download(self, request: Request) -> Response:
        self.calls["download"] += 1
        if not self._authorized(request):
            return self._unauthorized()
        found = self.media.get(request.path_params["media_id"])
        if found is None:
            return Response(status_code=404)
        return Response(found[0], media_type=found[1])

    async def _messages(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._unauthorized()
        body = await request.json()
        if body.get("status") == "read":
            self.calls["read"] += 1
            if body.get("typing_indicator"):
                self.typing.append(str(body.get("message_id")))
            else:
                self.read.append(str(body.get("message_id")))
            return JSONResponse({"success": True})
        self.calls["messages"] += 1
        if self.on_call is not None:
            self.on_call("messages", body)
        fault = self._fault("messages")
        if fault is not None and fault.delay_seconds <= 0:
            return self._error(fault)
        message_id = f"wamid.OUT{next(self._ids):08d}"
        self.sent.append({**body, "id": message_id})
        if fault is not None:
            await asyncio.sleep(fault.delay_seconds)
        to = body.get("to") or body.get("recipient")
        contact = {"input": to, "wa_id": to} if body.get("to") else {"input": to, "user_id": to}
        return JSONResponse({"messaging_product": "whatsapp", "contacts": [contact],
                             "messages": [{"id": message_id}]})  # fmt: skip

    async def _automation(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._unauthorized()
        self.calls["commands"] += 1
        fault = self._fault("commands")
        if fault is not None:
            return self._error(fault)
        body = await request.json()
        if "commands" in body:
            self.commands = json.loads(body["commands"])
        return JSONResponse({"success": True})

    async def _upload(self, request: Request) -> Response:
        if not self._authorized(request):
            return self._unauthorized()
        self.calls["media"] += 1
        fault = self._fault("media")
        if fault is not None:
            return self._error(fault)
        parts = _multipart(await request.body(), request.headers.get("content-type", ""))
        upload = parts.get("file")
        if upload is None:
            return self._error(Fault(400, 100, "Invalid parameter", "file is required"))
        media_id = f"{next(self._ids):015d}"
        name, mime_type, data = upload
        self.uploads.append({"id": media_id, "name": name,
                             "mime_type": mime_type or str(parts.get("type", ("", "", b""))[2]),
                             "data": data})  # fmt: skip
        return JSONResponse({"id": media_id})


def _multipart(body: bytes, content_type: str) -> dict[str, tuple[str | None, str, bytes]]:
    """A multipart form: field name -> (file name, content type, bytes)."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    parts: dict[str, tuple[str | None, str, bytes]] = {}
    if not message.is_multipart():
        return parts
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            parts[name] = (part.get_filename(), part.get_content_type(), payload)
    return parts


@contextlib.asynccontextmanager
async def serve_stub(stub: GraphApiStub) -> AsyncIterator[str]:
    """Serve `stub` on 127.0.0.1 (a free port) in this event loop; yields its base URL."""
    async with serve_app(stub.app, name="the Graph API stub", on_stop=stub.aclose) as url:
        stub.base_url = url
        yield url


@contextlib.contextmanager
def serve_stub_in_thread(stub: GraphApiStub) -> Iterator[str]:
    """`serve_stub` on an event loop of its own thread, for callers without a loop (a CLI
    test, `sessiongate try`); yields the base URL. Webhooks are then posted by the caller
    (`sign` the body), not through `push`, whose queue lives on the caller's loop."""
    with serve_in_thread(lambda: serve_stub(stub), name="the Graph API stub") as (url, _):
        yield url
