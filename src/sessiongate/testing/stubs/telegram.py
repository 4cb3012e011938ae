"""`BotApiStub`: a small Telegram Bot API on loopback, for offline tests and the benchmark.

It speaks the wire format the real SDK sends (form-encoded parameters, JSON answers with
`ok`/`result` or `ok: false`, `error_code`, `description`, `parameters.retry_after`), so
python-telegram-bot is driven unchanged through its `base_url`. Implemented: getMe,
getUpdates (long poll, `offset` confirms, as on Telegram), sendMessage, editMessageText,
deleteMessage, sendChatAction, sendPhoto and sendDocument (multipart uploads, recorded in
`uploads`; 413 over `upload_limit_bytes`), setMyCommands, getFile, deleteWebhook, setWebhook,
answerCallbackQuery (inline keyboard presses: `push_press`, `keyboards`, `answered`); and the
failures that matter: 401 for a wrong token, 429 with `retry_after`, 400 "can't parse entities"
(also for really unbalanced HTML), 403 "bot was blocked by the user", a hanging getUpdates.

`push_message` queues an update as Telegram would deliver it; `sent`, `edits`, `actions`,
`commands` record what the bot did; `fail(method, ...)` queues a failure for the next calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.parser
import email.policy
import html
import itertools
import json
import re
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sessiongate.testing.stubs.server import serve_app, serve_in_thread

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from starlette.requests import Request

__all__ = ["BotApiStub", "Fault", "serve_stub", "serve_stub_in_thread"]

_TAG = re.compile(r"<(/?)([a-z]+)(?:\s[^>]*)?>")
_ALLOWED_TAGS = frozenset(
    {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre",
     "blockquote", "tg-spoiler", "span", "tg-emoji"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Fault:
    status: int
    description: str
    retry_after: int | None = None
    # Carry out the call, then answer only after this many seconds (a send that times out on
    # the client's side after it was delivered: "unconfirmed").
    delay_seconds: float = 0.0


RATE_LIMITED = Fault(429, "Too Many Requests: retry after 2", retry_after=2)
PARSE_ERROR = Fault(400, "Bad Request: can't parse entities: unsupported start tag at byte 0")
BLOCKED = Fault(403, "Forbidden: bot was blocked by the user")
SERVER_ERROR = Fault(502, "Bad Gateway")
EDIT_GONE = Fault(400, "Bad Request: message to edit not found")
FILE_TOO_LARGE = Fault(413, "Request Entity Too Large")


def _html_ok(text: str) -> bool:
    stack: list[str] = []
    for closing, tag in _TAG.findall(text):
        if tag not in _ALLOWED_TAGS:
            return False
        if not closing:
            stack.append(tag)
        elif not stack or stack.pop() != tag:
            return False
    return not stack and "<" not in _TAG.sub("", text)


class BotApiStub:
    def __init__(
        self, token: str = "1000:TESTTOKEN", *, bot_id: int = 1000, username: str = "sg_bot"
    ) -> None:
        self.token = token
        self.bot_id = bot_id
        self.username = username
        self.pending: deque[dict[str, Any]] = deque()
        # Every update ever pushed (a redelivery copies one from here).
        self.log_updates: list[dict[str, Any]] = []
        self.forced: deque[dict[str, Any]] = deque()
        # update id -> when a getUpdates answer first carried it (perf_counter seconds).
        self.delivered_at: dict[int, float] = {}
        self.sent: list[dict[str, Any]] = []
        self.edits: list[dict[str, Any]] = []
        self.deleted: list[dict[str, Any]] = []
        self.actions: list[dict[str, Any]] = []
        self.commands: list[dict[str, Any]] = []
        # Button presses pushed, and the callback query ids the bot answered.
        self.presses = 0
        self.answered: list[str] = []
        self.webhook: dict[str, Any] | None = None
        self.calls: Counter[str] = Counter()
        self.unauthorized = 0  # requests with a wrong token
        self.faults: dict[str, deque[Fault]] = {}
        self.hang_get_updates = False
        self.confirmed_offset = 0
        # Telegram allows one getUpdates at a time per bot; more at once means two pollers.
        self.polls_in_flight = 0
        self.max_polls_in_flight = 0
        # (method, params) for every call, for tests that read the order of calls.
        self.log: list[tuple[str, dict[str, Any]]] = []
        self.on_call: Callable[[str, dict[str, Any]], None] | None = None
        self.files: dict[str, dict[str, Any]] = {}
        # Files the bot uploaded: method, chat_id, message_thread_id, name, size, data.
        self.uploads: list[dict[str, Any]] = []
        self.upload_limit_bytes = 50 * 1_048_576
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self._arrived = asyncio.Event()
        self._unhang = asyncio.Event()
        self.app = Starlette(
            routes=[Route("/bot{token}/{method}", self._endpoint, methods=["GET", "POST"])]
        )

    # ------------------------------------------------------------------ the test's side

    def push_update(self, update: dict[str, Any]) -> int:
        """Queue an update as given (its `update_id` kept if set); returns its id."""
        if "update_id" not in update:
            update = {"update_id": next(self._update_ids), **update}
        self.pending.append(update)
        self.log_updates.append(update)
        self._arrived.set()
        return int(update["update_id"])

    def push_message(
        self,
        text: str,
        *,
        chat_id: int = 42,
        chat_type: str = "private",
        user_id: int = 42,
        username: str = "alice",
        kind: str = "message",
        **fields: Any,
    ) -> int:
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat.update(first_name=username.title(), username=username)
        else:
            chat["title"] = f"chat {chat_id}"
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "from": {"id": user_id, "is_bot": False, "first_name": username.title(),
                     "username": username},
            "chat": chat,
            "date": 1767225600,
            "text": text,
        }  # fmt: skip
        message.update(fields)
        return self.push_update({kind: message})

    def push_press(
        self,
        data: str,
        *,
        chat_id: int = 42,
        chat_type: str = "private",
        user_id: int = 42,
        username: str = "alice",
        message_id: int = 1,
    ) -> int:
        """A press of an inline keyboard button whose `callback_data` is `data`, under the
        bot's message `message_id` in `chat_id`."""
        self.presses += 1
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type != "private":
            chat["title"] = f"chat {chat_id}"
        query = {
            "id": f"cb{self.presses}",
            "from": {"id": user_id, "is_bot": False, "first_name": username.title(),
                     "username": username},
            "message": {"message_id": message_id, "chat": chat, "date": 1767225600,
                        "from": {"id": self.bot_id, "is_bot": True, "first_name": "Sessiongate"}},
            "chat_instance": f"ci{chat_id}",
            "data": data,
        }  # fmt: skip
        return self.push_update({"callback_query": query})

    def keyboards(self) -> list[dict[str, Any]]:
        """The inline keyboards sent, in order (`reply_markup` as Telegram read it)."""
        out = []
        for message in self.sent:
            markup = message.get("reply_markup")
            if isinstance(markup, str):
                markup = json.loads(markup)
            if isinstance(markup, dict) and "inline_keyboard" in markup:
                out.append(markup)
        return out

    def redeliver(self, update_id: int) -> None:
        """Deliver an update once more whatever the offset says, as Telegram does when the
        confirming offset never reached it (the poller died before its next getUpdates)."""
        update = next(u for u in self.log_updates if int(u["update_id"]) == update_id)
        self.forced.append(dict(update))
        self._arrived.set()

    def fail(self, method: str, fault: Fault, times: int = 1) -> None:
        self.faults.setdefault(method, deque()).extend([fault] * times)

    def texts(self, chat_id: int | str | None = None) -> list[str]:
        return [
            m["text"] for m in self.sent if chat_id is None or str(m["chat_id"]) == str(chat_id)
        ]

    # ------------------------------------------------------------------ the API

    async def _endpoint(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            self.unauthorized += 1
            return _error(401, "Unauthorized")
        method = request.path_params["method"]
        try:
            body = await request.body()
        except ClientDisconnect:
            return Response(status_code=499)  # the client went away (a gateway stopping)
        params = _params(body, request.headers.get("content-type", ""))
        params.update(request.query_params)
        self.calls[method] += 1
        self.log.append((method, params))
        if self.on_call is not None:
            self.on_call(method, params)
        queued = self.faults.get(method)
        if queued:
            fault = queued.popleft()
            if fault.delay_seconds:
                handler = getattr(self, f"_api_{method}")
                await handler(params)
                await asyncio.sleep(fault.delay_seconds)
            return _error(fault.status, fault.description, retry_after=fault.retry_after)
        handler = getattr(self, f"_api_{method}", None)
        if handler is None:
            return _error(404, "Not Found")
        result = await handler(params)
        if isinstance(result, Response):
            return result
        return JSONResponse({"ok": True, "result": result})

    async def _api_getMe(self, params: dict[str, Any]) -> Any:
        return {"id": self.bot_id, "is_bot": True, "first_name": "Sessiongate",
                "username": self.username, "can_join_groups": True,
                "can_read_all_group_messages": False, "supports_inline_queries": False}  # fmt: skip

    async def _api_getUpdates(self, params: dict[str, Any]) -> Any:
        self.polls_in_flight += 1
        self.max_polls_in_flight = max(self.max_polls_in_flight, self.polls_in_flight)
        try:
            return await self._get_updates(params)
        finally:
            self.polls_in_flight -= 1

    async def _get_updates(self, params: dict[str, Any]) -> Any:
        offset = int(params.get("offset") or 0)
        if offset:
            # Telegram's rule: asking from `offset` confirms every update before it.
            self.confirmed_offset = max(self.confirmed_offset, offset)
            while self.pending and int(self.pending[0]["update_id"]) < offset:
                self.pending.popleft()
        if self.hang_get_updates:
            # Wedged: no answer until the stub closes (or a test lifts the hang).
            await self._unhang.wait()
            return []
        if self.forced:
            batch = list(self.forced)
            self.forced.clear()
            return batch
        timeout = float(params.get("timeout") or 0)
        if not self.pending and timeout > 0:
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._arrived.wait()
        limit = int(params.get("limit") or 100)
        batch = [u for u in self.pending if int(u["update_id"]) >= offset][:limit]
        now = time.perf_counter()
        for update in batch:
            self.delivered_at.setdefault(int(update["update_id"]), now)
        return batch

    def _message(self, params: dict[str, Any], text: str) -> dict[str, Any]:
        chat_id = params["chat_id"]
        return {
            "message_id": next(self._message_ids),
            "from": {"id": self.bot_id, "is_bot": True, "first_name": "Sessiongate",
                     "username": self.username},
            "chat": {"id": int(chat_id) if str(chat_id).lstrip("-").isdigit() else chat_id,
                     "type": "private"},
            "date": 1767225600,
            "text": text,
        }  # fmt: skip

    def _check_text(self, params: dict[str, Any]) -> Response | None:
        text = str(params.get("text", ""))
        if params.get("parse_mode") == "HTML":
            # Telegram measures the text after its entities are parsed out.
            text = html.unescape(_TAG.sub("", text))
        if len(text.encode("utf-16-le")) // 2 > 4096:
            return _error(400, "Bad Request: message is too long")
        if params.get("parse_mode") == "HTML" and not _html_ok(str(params.get("text", ""))):
            return _error(400, "Bad Request: can't parse entities: unmatched end tag")
        if params.get("message_thread_id") in ("1", 1):
            return _error(400, "Bad Request: message thread not found")
        return None

    async def _api_sendMessage(self, params: dict[str, Any]) -> Any:
        refused = self._check_text(params)
        if refused is not None:
            return refused
        message = self._message(params, str(params["text"]))
        self.sent.append({**params, "message_id": message["message_id"]})
        return message

    async def _upload(self, params: dict[str, Any], field: str, method: str) -> Any:
        upload = params.get(field)
        if not isinstance(upload, tuple):
            return _error(400, f"Bad Request: there is no {field} in the request")
        name, data = upload
        if len(data) > self.upload_limit_bytes:
            return _error(413, "Request Entity Too Large")
        message = self._message(params, "")
        message.pop("text")
        self.uploads.append({**{k: v for k, v in params.items() if k != field}, "method": method,
                             "name": name, "size": len(data), "data": data,
                             "message_id": message["message_id"]})  # fmt: skip
        return message

    async def _api_sendPhoto(self, params: dict[str, Any]) -> Any:
        return await self._upload(params, "photo", "sendPhoto")

    async def _api_sendDocument(self, params: dict[str, Any]) -> Any:
        return await self._upload(params, "document", "sendDocument")

    async def _api_editMessageText(self, params: dict[str, Any]) -> Any:
        refused = self._check_text(params)
        if refused is not None:
            return refused
        target = int(params["message_id"])
        for record in self.sent:
            if record["message_id"] == target and str(record["chat_id"]) == str(params["chat_id"]):
                if record["text"] == params["text"]:
                    return _error(400, "Bad Request: message is not modified")
                record["text"] = params["text"]
                record["parse_mode"] = params.get("parse_mode")
                self.edits.append(dict(params))
                return self._message(params, str(params["text"]))
        return _error(400, "Bad Request: message to edit not found")

    async def _api_deleteMessage(self, params: dict[str, Any]) -> Any:
        target = int(params["message_id"])
        self.deleted.append(dict(params))
        self.sent = [m for m in self.sent if m["message_id"] != target]
        return True

    async def _api_answerCallbackQuery(self, params: dict[str, Any]) -> Any:
        self.answered.append(str(params["callback_query_id"]))
        return True

    async def _api_sendChatAction(self, params: dict[str, Any]) -> Any:
        self.actions.append(dict(params))
        return True

    async def _api_setMyCommands(self, params: dict[str, Any]) -> Any:
        self.commands = json.loads(params.get("commands", "[]"))
        return True

    async def _api_getFile(self, params: dict[str, Any]) -> Any:
        file_id = str(params["file_id"])
        known = self.files.get(file_id, {})
        return {"file_id": file_id, "file_unique_id": f"u{file_id}",
                "file_size": known.get("file_size", 1024),
                "file_path": known.get("file_path", f"documents/{file_id}.bin")}  # fmt: skip

    async def _api_deleteWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = None
        if str(params.get("drop_pending_updates")).lower() == "true":
            self.pending.clear()
        return True

    async def _api_setWebhook(self, params: dict[str, Any]) -> Any:
        self.webhook = dict(params)
        return True


def _params(body: bytes, content_type: str) -> dict[str, Any]:
    if not body:
        return {}
    if content_type.startswith("multipart/form-data"):
        return _multipart(body, content_type)
    if "json" in content_type:
        loaded = json.loads(body)
        return dict(loaded.items()) if isinstance(loaded, dict) else {}
    return dict(parse_qsl(body.decode(), keep_blank_values=True))


def _multipart(body: bytes, content_type: str) -> dict[str, Any]:
    """A multipart form (an upload): fields as text, files as (file name, bytes)."""
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    params: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if not isinstance(name, str) or not isinstance(payload, bytes):
            continue
        filename = part.get_filename()
        params[name] = (filename, payload) if filename else payload.decode()
    # An attached file is named by `attach://<field>` in its parameter.
    for key, value in list(params.items()):
        if isinstance(value, str) and value.startswith("attach://"):
            params[key] = params.pop(value.removeprefix("attach://"), value)
    return params


def _error(status: int, description: str, *, retry_after: int | None = None) -> JSONResponse:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return JSONResponse(body, status_code=status)


@contextlib.asynccontextmanager
async def serve_stub(stub: BotApiStub) -> AsyncIterator[str]:
    """Serve `stub` on 127.0.0.1 (a free port) in this event loop; yields its base URL."""

    def stop() -> None:  # long polls in flight end with the server
        stub._arrived.set()
        stub._unhang.set()

    async with serve_app(stub.app, name="the Bot API stub", on_stop=stop) as url:
        yield url


@contextlib.contextmanager
def serve_stub_in_thread(stub: BotApiStub) -> Iterator[str]:
    """`serve_stub` on an event loop of its own thread, for callers without a loop (a CLI
    test, the benchmark's parent process); yields the base URL."""
    with serve_in_thread(lambda: serve_stub(stub), name="the Bot API stub") as (url, _):
        yield url
