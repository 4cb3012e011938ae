"""`DiscordStub`: Discord's REST API and gateway websocket on loopback, for offline tests and
the benchmark.

REST speaks what discord.py sends and reads (`Authorization: Bot <token>`, JSON bodies, error
bodies `{"message", "code"}`, 429 with `retry_after` and the `Via` header Discord's edge adds):
GET /users/@me, /oauth2/applications/@me, /gateway/bot, /channels/{id}; POST, PATCH, DELETE
channel messages; POST typing; the application command routes; interaction callbacks.

The gateway speaks the real opcodes: HELLO (10) on connect, IDENTIFY (2) answered by READY (or
close 4004 for a wrong token), HEARTBEAT (1) answered by HEARTBEAT_ACK (11) unless `acks` is
off, DISPATCH (0) with a sequence number, RESUME (6) answered by a replay of what the session
missed and RESUMED, RECONNECT (7) on request. `dispatch(type, data)` sends an event to the
identified session (or keeps it for the session's RESUME); `press(custom_id, ...)` dispatches
the INTERACTION_CREATE of a person pressing a button the bot posted (`buttons` lists them);
`sent`, `edits`, `typing`, `commands`, `callbacks` record what the bot did; `fail(route, ...)`
queues failures.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import BodyPartReader, WSMsgType, web

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

__all__ = ["DiscordStub", "Fault", "serve_stub"]

TOKEN = "MTAwMA.test.token"
BOT_ID = "1000000000000000001"
APP_ID = "1000000000000000002"
_AUTH_FAILED = 4004


@dataclass(frozen=True, slots=True)
class Fault:
    status: int
    code: int = 0
    message: str = "error"
    retry_after: float | None = None
    # Carry out the call, then answer only after this many seconds ("unconfirmed").
    delay_seconds: float = 0.0


# Longer than discord.py waits by itself (30 s), so the SDK hands it to the adapter.
RATE_LIMITED = Fault(429, 0, "You are being rate limited.", retry_after=31.0)
MISSING_ACCESS = Fault(403, 50001, "Missing Access")
UNAVAILABLE = Fault(503, 0, "upstream connect error")
UNKNOWN_MESSAGE = Fault(404, 10008, "Unknown Message")
INVALID_FORM = Fault(400, 50035, "Invalid Form Body")
FILE_TOO_LARGE = Fault(413, 40005, "Request entity too large")


@dataclass(slots=True, eq=False)
class _Connection:
    ws: web.WebSocketResponse
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    session_id: str | None = None


def user(user_id: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {"id": user_id, "username": name, "global_name": name.title(), "discriminator": "0",
            "avatar": None, "bot": bot}  # fmt: skip


class DiscordStub:
    def __init__(self, *, heartbeat_interval_ms: int = 41250) -> None:
        self.token = TOKEN
        self.bot_id = BOT_ID
        self.app_id = APP_ID
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.acks = True  # answer heartbeats (off: a socket gone deaf)
        self.channels: dict[str, dict[str, Any]] = {}
        self.sent: list[dict[str, Any]] = []
        # Each message as first posted, by id (`sent` shows it as edited since).
        self.originals: dict[str, dict[str, Any]] = {}
        # Messages with a file: the message body, channel_id, id, name, size, data.
        self.uploads: list[dict[str, Any]] = []
        self.upload_limit_bytes = 10 * 1_048_576
        self.edits: list[dict[str, Any]] = []
        self.deleted: list[str] = []
        self.typing: list[str] = []
        self.commands: dict[str, dict[str, Any]] = {}
        self.command_writes = 0
        self.callbacks: list[dict[str, Any]] = []
        self.calls: Counter[str] = Counter()
        self.faults: dict[str, deque[Fault]] = {}
        self.on_call: Callable[[str, dict[str, Any]], None] | None = None
        # Gateway
        self.opcodes: list[int] = []  # every opcode a client sent, in order
        self.identifies = 0
        self.resumes = 0
        self.connections = 0
        self.live: set[_Connection] = set()
        self._log: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        self._seq = 0
        self._sessions = itertools.count(1)
        self._session: _Connection | None = None
        self._ids = itertools.count(1)
        self._ever_identified = False
        # Set while a session is identified (READY or RESUMED sent): dispatches reach it.
        self.session_ready = asyncio.Event()
        self.url = ""
        self.app = web.Application()
        api = "/api/v10"
        r = self.app.router
        r.add_get(api + "/users/@me", self._me)
        r.add_get(api + "/oauth2/applications/@me", self._application)
        r.add_get(api + "/gateway/bot", self._gateway_bot)
        r.add_get(api + "/channels/{channel}", self._channel)
        r.add_post(api + "/channels/{channel}/messages", self._send)
        r.add_patch(api + "/channels/{channel}/messages/{message}", self._edit)
        r.add_delete(api + "/channels/{channel}/messages/{message}", self._delete)
        r.add_post(api + "/channels/{channel}/typing", self._typing)
        r.add_get(api + "/applications/{app}/commands", self._list_commands)
        r.add_post(api + "/applications/{app}/commands", self._create_command)
        r.add_patch(api + "/applications/{app}/commands/{command}", self._edit_command)
        r.add_delete(api + "/applications/{app}/commands/{command}", self._delete_command)
        r.add_post(api + "/interactions/{id}/{token}/callback", self._callback)
        r.add_get("/gateway", self._gateway)

    # ------------------------------------------------------------------ the test's side

    def fail(self, route: str, fault: Fault, times: int = 1) -> None:
        self.faults.setdefault(route, deque()).extend([fault] * times)

    def snowflake(self) -> str:
        return str(1500000000000000000 + next(self._ids))

    def dispatch(self, kind: str, data: dict[str, Any]) -> int:
        """Send a DISPATCH to the identified session (kept for a RESUME when there is none)."""
        self._seq += 1
        payload = {"op": 0, "t": kind, "s": self._seq, "d": data}
        self._log.append(payload)
        if self._session is not None:
            self._session.queue.put_nowait(payload)
        else:
            self._pending.append(payload)
        return self._seq

    def buttons(self, *, ever: bool = False) -> list[dict[str, Any]]:
        """The buttons of the messages the bot posted, in order (each with the message's
        `channel_id` and `message_id`): as they are now, or `ever` posted (a device that has
        not seen an edit may still press them)."""
        messages = self.originals.values() if ever else self.sent
        return [
            {**button, "channel_id": message["channel_id"], "message_id": message["id"]}
            for message in messages
            for row in message.get("components") or ()
            for button in row.get("components") or ()
            if button.get("type") == 2
        ]

    def press(
        self,
        custom_id: str,
        presser: dict[str, Any],
        *,
        guild_id: str | None = None,
        roles: list[str] | None = None,
    ) -> str:
        """Dispatch `presser` (a `user(...)`) pressing the posted button `custom_id`: a
        MESSAGE_COMPONENT interaction as Discord sends it (in a guild the presser comes as a
        member); returns the interaction id."""
        button = next(b for b in self.buttons(ever=True) if b["custom_id"] == custom_id)
        sent = next(m for m in self.sent if m["id"] == button["message_id"])
        channel_id = str(button["channel_id"])
        message = {**self._message(channel_id, str(sent.get("content") or ""), sent["id"]),
                   "components": sent.get("components") or []}  # fmt: skip
        interaction_id = self.snowflake()
        channel = self.channels.get(channel_id) or {"id": channel_id, "type": 1}
        data: dict[str, Any] = {
            "id": interaction_id, "application_id": self.app_id, "type": 3,
            "token": f"itoken-{interaction_id}", "version": 1, "locale": "en-US",
            "channel_id": channel_id, "channel": channel, "app_permissions": "0",
            "data": {"custom_id": custom_id, "component_type": 2}, "message": message,
            "entitlements": [], "authorizing_integration_owners": {},
            "attachment_size_limit": 10485760,
        }  # fmt: skip
        if guild_id is not None:
            data["guild_id"] = guild_id
            data["member"] = {"user": presser, "roles": roles or [], "deaf": False,
                              "joined_at": "2025-01-01T00:00:00+00:00", "mute": False,
                              "permissions": "0", "flags": 0}  # fmt: skip
        else:
            data["user"] = presser
        self.dispatch("INTERACTION_CREATE", data)
        return interaction_id

    def request_reconnect(self) -> None:
        """RECONNECT (7): Discord asks the client to reconnect and resume."""
        if self._session is not None:
            self._session.queue.put_nowait({"op": 7, "d": None, "s": None, "t": None})

    async def drop(self) -> None:
        """Close every socket as a network loss would (no clean close code)."""
        for connection in list(self.live):
            await connection.ws.close(code=4000, message=b"dropped")

    # ------------------------------------------------------------------ REST

    async def _guard(
        self, request: web.Request, route: str
    ) -> tuple[web.Response | None, Fault | None]:
        self.calls[route] += 1
        if request.headers.get("Authorization") != f"Bot {self.token}":
            return _json({"message": "401: Unauthorized", "code": 0}, status=401), None
        if self.on_call is not None:
            self.on_call(route, dict(request.match_info))
        faults = self.faults.get(route)
        fault = faults.popleft() if faults else None
        if fault is None or fault.delay_seconds:
            return None, fault
        body: dict[str, Any] = {"message": fault.message, "code": fault.code}
        headers = {"Via": "1.1 google"}
        if fault.retry_after is not None:
            body.update(retry_after=fault.retry_after, **{"global": False})
            headers["Retry-After"] = str(int(fault.retry_after))
        return _json(body, status=fault.status, headers=headers), None

    async def _me(self, request: web.Request) -> web.Response:
        refused, _ = await self._guard(request, "me")
        return refused or _json(user(self.bot_id, "sg_bot", bot=True))

    async def _application(self, request: web.Request) -> web.Response:
        refused, _ = await self._guard(request, "application")
        return refused or _json(
            {
                "id": self.app_id,
                "name": "sessiongate",
                "description": "",
                "icon": None,
                "bot_public": False,
                "bot_require_code_grant": False,
                "verify_key": "00",
                "owner": user("5000000000000000099", "owner"),
                "flags": 0,
            }
        )

    async def _gateway_bot(self, request: web.Request) -> web.Response:
        refused, _ = await self._guard(request, "gateway")
        return refused or _json(
            {
                "url": self.url.replace("http://", "ws://") + "/gateway",
                "shards": 1,
                "session_start_limit": {
                    "total": 1000,
                    "remaining": 999,
                    "reset_after": 0,
                    "max_concurrency": 1,
                },
            }
        )

    async def _channel(self, request: web.Request) -> web.Response:
        refused, _ = await self._guard(request, "channel")
        if refused:
            return refused
        channel = self.channels.get(request.match_info["channel"])
        if channel is None:
            return _json({"message": "Unknown Channel", "code": 10003}, status=404)
        return _json(channel)

    def _message(self, channel: str, content: str, message_id: str) -> dict[str, Any]:
        return {"id": message_id, "channel_id": channel, "type": 0, "content": content,
                "author": user(self.bot_id, "sg_bot", bot=True), "timestamp":
                "2026-01-01T00:00:00.000000+00:00", "edited_timestamp": None, "tts": False,
                "mention_everyone": False, "mentions": [], "mention_roles": [],
                "attachments": [], "embeds": [], "pinned": False, "flags": 0}  # fmt: skip

    async def _send(self, request: web.Request) -> web.Response:
        if request.content_type.startswith("multipart/"):
            return await self._upload(request)
        refused, late = await self._guard(request, "send")
        if refused:
            return refused
        body = await request.json()
        channel = request.match_info["channel"]
        message_id = self.snowflake()
        self.sent.append({**body, "channel_id": channel, "id": message_id})
        self.originals[message_id] = copy.deepcopy(self.sent[-1])
        if late is not None:
            await asyncio.sleep(late.delay_seconds)
        return _json(self._message(channel, str(body.get("content", "")), message_id))

    async def _upload(self, request: web.Request) -> web.Response:
        """A message with a file (multipart: `payload_json` and `files[0]`), as route upload."""
        refused, _ = await self._guard(request, "upload")
        if refused:
            return refused
        payload: dict[str, Any] = {}
        files: list[tuple[str, bytes]] = []
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, BodyPartReader):
                continue
            data = await part.read()
            if part.name == "payload_json":
                payload = json.loads(data)
            elif part.filename:
                files.append((part.filename, bytes(data)))
        if any(len(data) > self.upload_limit_bytes for _, data in files):
            return _json({"message": "Request entity too large", "code": 40005}, status=413)
        channel = request.match_info["channel"]
        message_id = self.snowflake()
        for name, data in files:
            self.uploads.append({**payload, "channel_id": channel, "id": message_id,
                                 "name": name, "size": len(data), "data": data})  # fmt: skip
        return _json(self._message(channel, str(payload.get("content") or ""), message_id))

    async def _edit(self, request: web.Request) -> web.Response:
        refused, _ = await self._guard(request, "edit")
        if refused:
            return refused
        body = await request.json()
        message_id = request.match_info["message"]
        for message in self.sent:
            if message["id"] == message_id:
                message.update(body)
                self.edits.append({**body, "id": message_id})
                channel = request.match_info["channel"]
                return _json(self._message(channel, str(message["content"]), message_id))
        return _json({"message": "Unknown Message", "code": 10008}, status=404)

    async def _delete(self, request: web.Request) -> web.Response:
        refused, _ = await self._guard(request, "delete")
        if refused:
            return refused
        message_id = request.match_info["message"]
        self.deleted.append(message_id)
        self.sent = [m for m in self.sent if m["id"] != message_id]
        return web.Response(status=204)

    async def _typing(self, request: web.Request) -> web.Response:
        refused, _ = await self._guard(request, "typing")
        if refused:
            return refused
        self.typing.append(request.match_info["channel"])
        return web.Response(status=204)

    async def _list_commands(self, request: web.Request) -> web.Response:
        refused, _ = await self._guard(request, "commands")
        return refused or _json(list(self.commands.values()))

    async def _create_command(self, request: web.Request) -> web.Response:
        refused, _ = await self._guard(request, "commands")
        if refused:
            return refused
        body = await request.json()
        command = {**body, "id": self.snowflake(), "application_id": self.app_id, "type": 1,
                   "version": "1"}  # fmt: skip
        self.commands[command["id"]] = command
        self.command_writes += 1
        return _json(command, status=201)

    async def _edit_command(self, request: web.Request) -> web.Response:
        refused, _ = await self._guard(request, "commands")
        if refused:
            return refused
        command = self.commands[request.match_info["command"]]
        command.update(await request.json())
        self.command_writes += 1
        return _json(command)

    async def _delete_command(self, request: web.Request) -> web.Response:
        refused, _ = await self._guard(request, "commands")
        if refused:
            return refused
        self.commands.pop(request.match_info["command"], None)
        self.command_writes += 1
        return web.Response(status=204)

    async def _callback(self, request: web.Request) -> web.Response:
        # Interaction callbacks are authorised by the interaction token, not the bot token.
        self.calls["callback"] += 1
        self.callbacks.append({**dict(request.match_info), **(await request.json())})
        return web.Response(status=204)

    # ------------------------------------------------------------------ gateway

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        connection = _Connection(ws)
        self.connections += 1
        self.live.add(connection)
        sender = asyncio.ensure_future(self._send_loop(connection))
        connection.queue.put_nowait(
            {
                "op": 10,
                "d": {"heartbeat_interval": self.heartbeat_interval_ms},
                "s": None,
                "t": None,
            }
        )
        try:
            async for message in ws:
                if message.type != WSMsgType.TEXT:
                    continue
                await self._opcode(connection, json.loads(message.data))
        finally:
            sender.cancel()
            self.live.discard(connection)
            if self._session is connection:
                self._session = None
                self.session_ready.clear()
        return ws

    async def _send_loop(self, connection: _Connection) -> None:
        while True:
            payload = await connection.queue.get()
            if connection.ws.closed:
                return
            await connection.ws.send_str(json.dumps(payload))

    async def _opcode(self, connection: _Connection, message: dict[str, Any]) -> None:
        op = int(message.get("op", -1))
        self.opcodes.append(op)
        data = message.get("d") or {}
        if op == 1:
            if self.acks:
                connection.queue.put_nowait({"op": 11, "d": None, "s": None, "t": None})
        elif op == 2:
            self.identifies += 1
            if data.get("token") != self.token:
                await connection.ws.close(code=_AUTH_FAILED, message=b"Authentication failed.")
                return
            connection.session_id = f"session-{next(self._sessions)}"
            self._seq += 1
            connection.queue.put_nowait({"op": 0, "t": "READY", "s": self._seq, "d": {
                "v": 10, "user": user(self.bot_id, "sg_bot", bot=True), "guilds": [],
                "session_id": connection.session_id, "private_channels": [],
                "resume_gateway_url": self.url.replace("http://", "ws://") + "/gateway",
                "application": {"id": self.app_id, "flags": 0}, "shard": [0, 1]}})  # fmt: skip
            self._session = connection
            self.session_ready.set()
            if not self._ever_identified:
                # Events pushed before the bot first came online wait for it.
                for payload in self._pending:
                    connection.queue.put_nowait(payload)
            self._ever_identified = True
            self._pending = []
        elif op == 6:
            self.resumes += 1
            seq = int(data.get("seq") or 0)
            connection.session_id = str(data.get("session_id"))
            self._session = connection
            self.session_ready.set()
            for payload in self._log:
                if payload["s"] > seq:
                    connection.queue.put_nowait(payload)
            self._pending = []
            self._seq += 1
            connection.queue.put_nowait({"op": 0, "t": "RESUMED", "s": self._seq, "d": {}})


def _json(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    # Exactly `application/json`, no charset: discord.py parses JSON only for that type.
    return web.Response(
        body=json.dumps(body).encode(),
        status=status,
        headers={**(headers or {}), "Content-Type": "application/json"},
    )


@contextlib.asynccontextmanager
async def serve_stub(stub: DiscordStub) -> AsyncIterator[str]:
    """Serve `stub` on 127.0.0.1 (an ephemeral port); yields its REST root (…/api/v10)."""
    runner = web.AppRunner(stub.app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    stub.url = f"http://127.0.0.1:{port}"
    try:
        yield stub.url + "/api/v10"
    finally:
        for connection in list(stub.live):
            with contextlib.suppress(Exception):
                await connection.ws.close()
        await runner.cleanup()
