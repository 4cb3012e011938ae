"""`SlackStub`: Slack's Web API and a Socket Mode websocket on loopback, for offline tests and
the benchmark, plus `sign` for Events API requests.

It speaks the wire format slack-sdk sends and reads (JSON or form bodies, `Authorization:
Bearer`, answers `{"ok": true, ...}` or `{"ok": false, "error": code}`, 429 with `Retry-After`),
so `AsyncWebClient` and `SocketModeClient` are driven unchanged through `base_url` and the
`url` that apps.connections.open returns. Implemented: auth.test, chat.postMessage,
chat.update, chat.delete, conversations.info, assistant.threads.setStatus, the three steps of
files.uploadV2 (files.getUploadURLExternal, the upload URL, files.completeUploadExternal:
recorded in `uploads`),
apps.connections.open, apps.manifest.export/update; the socket sends `hello`, envelopes
(`events_api`, `slash_commands`, `interactive`) and `disconnect`, and records the acks.

`push_event` queues an Events API body as an envelope for the open socket; `press` builds the
`block_actions` payload of a button pressed on a message the app posted (`push_press` sends it
down the socket, `interactivity_form` makes the signed form of the interactivity Request URL);
`buttons` lists the buttons of what the app posted; `sent`, `edits`, `statuses`, `acks` record
what the app did; `fail(method, ...)` queues failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import hmac
import itertools
import json
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from aiohttp import WSMsgType, web

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

__all__ = ["Fault", "SlackStub", "interactivity_form", "serve_stub", "sign"]

BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
CONFIG_TOKEN = "xoxe-test-token"
SIGNING_SECRET = "test-signing-secret"


@dataclass(frozen=True, slots=True)
class Fault:
    error: str
    status: int = 200
    retry_after: int | None = None
    # Carry out the call, then answer only after this many seconds ("unconfirmed").
    delay_seconds: float = 0.0


RATE_LIMITED = Fault("ratelimited", status=429, retry_after=2)
INVALID_BLOCKS = Fault("invalid_blocks")
NOT_IN_CHANNEL = Fault("not_in_channel")
UNAVAILABLE = Fault("service_unavailable", status=503)
MESSAGE_GONE = Fault("message_not_found")
CANNOT_REPLY = Fault("cannot_reply_to_message")
MISSING_SCOPE = Fault("missing_scope")


def sign(
    body: bytes, *, secret: str = SIGNING_SECRET, timestamp: int | None = None
) -> dict[str, str]:
    """The headers Slack sends with an Events API request whose body is `body`."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    base = b"v0:" + ts.encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/json",
    }


def interactivity_form(
    payload: dict[str, Any], *, secret: str = SIGNING_SECRET, timestamp: int | None = None
) -> tuple[bytes, dict[str, str]]:
    """(body, headers) of the POST Slack makes to the interactivity Request URL."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    headers = sign(body, secret=secret, timestamp=timestamp)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    return body, headers


class SlackStub:
    def __init__(
        self, *, user_id: str = "UBOT", bot_id: str = "BBOT", team_id: str = "T0TEAM"
    ) -> None:
        self.user_id = user_id
        self.bot_id = bot_id
        self.team_id = team_id
        self.bot_token = BOT_TOKEN
        self.app_token = APP_TOKEN
        self.config_token = CONFIG_TOKEN
        self.sent: list[dict[str, Any]] = []
        # Each message as first posted, by ts (`sent` shows it as edited since).
        self.originals: dict[str, dict[str, Any]] = {}
        self.edits: list[dict[str, Any]] = []
        self.deleted: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.manifest: dict[str, Any] = {"display_information": {"name": "sessiongate"}}
        self.manifest_updates = 0
        self.channels: dict[str, dict[str, Any]] = {}
        # Files shared by the bot: channel, thread_ts, name, size, data.
        self.uploads: list[dict[str, Any]] = []
        self._uploaded: dict[str, tuple[str, bytes]] = {}
        self._file_ids = itertools.count(1)
        self.calls: Counter[str] = Counter()
        self.faults: dict[str, deque[Fault]] = {}
        self.on_call: Callable[[str, dict[str, Any]], None] | None = None
        # Socket Mode
        self.envelopes: list[dict[str, Any]] = []
        self.acks: list[str] = []
        # envelope id -> the payload an ack carried (a slash command's ephemeral answer).
        self.ack_payloads: dict[str, Any] = {}
        self.connections = 0  # sockets ever opened
        self.open_sockets: set[web.WebSocketResponse] = set()
        self._outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._ts = itertools.count(1)
        self._envelope_ids = itertools.count(1)
        self.url = ""
        self.app = web.Application()
        self.app.router.add_post("/api/{method}", self._endpoint)
        self.app.router.add_get("/api/{method}", self._endpoint)
        self.app.router.add_get("/socket", self._socket)
        self.app.router.add_post("/upload/{file_id}", self._upload)

    # ------------------------------------------------------------------ the test's side

    def push_event(self, body: dict[str, Any], *, kind: str = "events_api") -> str:
        """Queue an Events API body (or a slash command's fields) as a Socket Mode envelope."""
        envelope = {
            "envelope_id": f"env-{next(self._envelope_ids)}",
            "type": kind,
            "payload": body,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": 0,
            "retry_reason": "",
        }
        self.envelopes.append(envelope)
        self._outbox.put_nowait(envelope)
        return str(envelope["envelope_id"])

    def buttons(self, *, ever: bool = False) -> list[dict[str, Any]]:
        """The buttons of the messages the app posted, in order (each with the message's
        `channel`, `ts` and `thread_ts`): as they are now, or `ever` posted (a device that
        has not seen an update may still press them)."""
        messages = self.originals.values() if ever else self.sent
        return [
            {
                **element,
                "channel": message.get("channel"),
                "ts": message["ts"],
                "thread_ts": message.get("thread_ts"),
            }
            for message in messages
            for block in message.get("blocks") or ()
            for element in block.get("elements") or ()
            if element.get("type") == "button"
        ]

    def press(self, action_id: str, *, user_id: str, user_name: str = "someone") -> dict[str, Any]:
        """The `block_actions` payload of `user_id` pressing the posted button `action_id`."""
        button = next(b for b in self.buttons(ever=True) if b["action_id"] == action_id)
        message = next(m for m in self.sent if m["ts"] == button["ts"])
        action_ts = self.next_ts()
        container: dict[str, Any] = {
            "type": "message",
            "message_ts": message["ts"],
            "channel_id": message["channel"],
            "is_ephemeral": False,
        }
        posted: dict[str, Any] = {
            "type": "message",
            "user": self.user_id,
            "bot_id": self.bot_id,
            "ts": message["ts"],
            "text": message.get("text"),
            "blocks": message.get("blocks"),
        }
        if message.get("thread_ts"):
            container["thread_ts"] = posted["thread_ts"] = message["thread_ts"]
        return {
            "type": "block_actions",
            "user": {
                "id": user_id,
                "username": user_name,
                "name": user_name,
                "team_id": self.team_id,
            },
            "api_app_id": "A0APP",
            "token": "verification-token-unused",
            "container": container,
            "trigger_id": f"trigger-{action_ts}",
            "team": {"id": self.team_id, "domain": "sg"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": message["channel"], "name": str(message["channel"]).lower()},
            "message": posted,
            "state": {"values": {}},
            "response_url": f"{self.url}/respond/{action_ts}",
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": button.get("block_id", ""),
                    "text": button["text"],
                    "value": button.get("value"),
                    "style": button.get("style"),
                    "type": "button",
                    "action_ts": action_ts,
                }
            ],
        }

    def push_press(self, action_id: str, *, user_id: str, user_name: str = "someone") -> str:
        """Press a posted button: its payload as an `interactive` Socket Mode envelope."""
        return self.push_event(
            self.press(action_id, user_id=user_id, user_name=user_name), kind="interactive"
        )

    def redeliver(self, envelope_id: str) -> None:
        original = next(e for e in self.envelopes if e["envelope_id"] == envelope_id)
        again = {**original, "retry_attempt": int(original["retry_attempt"]) + 1,
                 "retry_reason": "timeout"}  # fmt: skip
        self._outbox.put_nowait(again)

    def fail(self, method: str, fault: Fault, times: int = 1) -> None:
        self.faults.setdefault(method, deque()).extend([fault] * times)

    async def drop_sockets(self) -> None:
        """Close every open socket as a network loss would."""
        for ws in list(self.open_sockets):
            await ws.close()

    def next_ts(self) -> str:
        return f"1767225600.{next(self._ts):06d}"

    # ------------------------------------------------------------------ Web API

    async def _endpoint(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params = await _params(request)
        self.calls[method] += 1
        token = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        token = token or str(params.get("token", ""))
        if self.on_call is not None:
            self.on_call(method, params)
        expected = {
            "apps.connections.open": self.app_token,
            "apps.manifest.export": self.config_token,
            "apps.manifest.update": self.config_token,
        }.get(method, self.bot_token)
        if token != expected:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        faults = self.faults.get(method)
        fault = faults.popleft() if faults else None
        if fault is not None and fault.delay_seconds == 0:
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else None
            return web.json_response(
                {"ok": False, "error": fault.error}, status=fault.status, headers=headers
            )
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"}, status=404)
        result: dict[str, Any] = await handler(params)
        if "__error" in result:
            return web.json_response({"ok": False, "error": result["__error"]})
        if fault is not None:
            await asyncio.sleep(fault.delay_seconds)
        return web.json_response({"ok": True, **result})

    async def _api_files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = f"F{next(self._file_ids):08d}"
        self._uploaded[file_id] = (str(params.get("filename") or ""), b"")
        return {"upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}

    async def _upload(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        if file_id not in self._uploaded:
            return web.Response(status=404, text="unknown upload")
        name, _ = self._uploaded[file_id]
        self._uploaded[file_id] = (name, await request.read())
        return web.Response(text=f"OK - {len(self._uploaded[file_id][1])}")

    async def _api_files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        files = params.get("files")
        listed = json.loads(files) if isinstance(files, str) else list(files or [])
        shared = []
        for entry in listed:
            name, data = self._uploaded.pop(str(entry["id"]), ("", b""))
            self.uploads.append({"channel": params.get("channel_id"),
                                 "thread_ts": params.get("thread_ts"), "id": entry["id"],
                                 "name": entry.get("title") or name, "size": len(data),
                                 "data": data})  # fmt: skip
            shared.append({"id": entry["id"], "title": entry.get("title") or name})
        return {"files": shared}

    async def _api_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://sg.slack.com/",
            "team": "Test",
            "user": "sg_bot",
            "team_id": self.team_id,
            "user_id": self.user_id,
            "bot_id": self.bot_id,
        }

    async def _api_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        ts = self.next_ts()
        self.sent.append({**params, "ts": ts})
        self.originals[ts] = copy.deepcopy(self.sent[-1])
        return {"channel": params.get("channel"), "ts": ts, "message": {"text": params.get("text")}}

    async def _api_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        if not any(m["ts"] == params.get("ts") for m in self.sent):
            return {"__error": "message_not_found"}
        self.edits.append(dict(params))
        for message in self.sent:
            if message["ts"] == params.get("ts"):
                message.update(text=params.get("text"), blocks=params.get("blocks"))
        return {"channel": params.get("channel"), "ts": params.get("ts")}

    async def _api_chat_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        self.deleted.append(dict(params))
        self.sent = [m for m in self.sent if m["ts"] != params.get("ts")]
        return {"channel": params.get("channel"), "ts": params.get("ts")}

    async def _api_assistant_threads_setStatus(self, params: dict[str, Any]) -> dict[str, Any]:
        self.statuses.append(dict(params))
        return {}

    async def _api_conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params.get("channel"))
        info = self.channels.get(channel, {"id": channel, "name": channel.lower(),
                                           "is_im": channel.startswith("D")})  # fmt: skip
        return {"channel": info}

    async def _api_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.url.replace("http://", "ws://") + "/socket"}

    async def _api_apps_manifest_export(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"manifest": self.manifest}

    async def _api_apps_manifest_update(self, params: dict[str, Any]) -> dict[str, Any]:
        self.manifest = json.loads(str(params["manifest"]))
        self.manifest_updates += 1
        return {"app_id": params.get("app_id")}

    def commands(self) -> list[str]:
        features = self.manifest.get("features") or {}
        return [str(c["command"]) for c in features.get("slash_commands") or ()]

    # ------------------------------------------------------------------ Socket Mode

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self.connections += 1
        self.open_sockets.add(ws)
        await ws.send_json({"type": "hello", "num_connections": len(self.open_sockets),
                            "connection_info": {"app_id": "A0APP"},
                            "debug_info": {"host": "stub"}})  # fmt: skip
        sender = asyncio.ensure_future(self._deliver(ws))
        try:
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    data = json.loads(message.data)
                    if "envelope_id" in data:
                        self.acks.append(str(data["envelope_id"]))
                        if data.get("payload"):
                            self.ack_payloads[str(data["envelope_id"])] = data["payload"]
        finally:
            sender.cancel()
            self.open_sockets.discard(ws)
        return ws

    async def _deliver(self, ws: web.WebSocketResponse) -> None:
        while True:
            envelope = await self._outbox.get()
            if _closed(ws):
                self._outbox.put_nowait(envelope)  # for the next connection
                return
            await ws.send_json(envelope)


def _closed(ws: web.WebSocketResponse) -> bool:
    return ws.closed


async def _params(request: web.Request) -> dict[str, Any]:
    body = await request.read()
    params: dict[str, Any] = dict(request.query)
    if not body:
        return params
    if request.content_type == "application/json":
        params.update(json.loads(body))
    else:
        params.update(parse_qsl(body.decode()))
    for key in ("blocks",):
        if isinstance(params.get(key), str):
            params[key] = json.loads(params[key])
    return params


@contextlib.asynccontextmanager
async def serve_stub(stub: SlackStub) -> AsyncIterator[str]:
    """Serve `stub` on 127.0.0.1 (an ephemeral port); yields its base URL (no trailing /)."""
    runner = web.AppRunner(stub.app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    stub.url = f"http://127.0.0.1:{port}"
    try:
        yield stub.url
    finally:
        for ws in list(stub.open_sockets):
            with contextlib.suppress(Exception):
                await ws.close()
        await runner.cleanup()
