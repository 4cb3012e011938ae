"""`HomeserverStub`: a small Matrix homeserver (client-server API) on loopback, for offline
tests, `sessiongate try matrix` and the benchmark.

It speaks the wire format mautrix sends and reads (Bearer tokens, JSON bodies, `errcode` /
`error` answers, `retry_after_ms`), so the adapter runs unchanged against it. Implemented:
`/versions`, `account/whoami`, `profile/{user}/displayname`, `/sync` (long poll; `since` is
the position in the stub's event log, so a `since` not advanced gets the same events again, as
on a homeserver), `rooms/{room}/send/{type}/{txn}` (a repeated transaction id answers the
first event id), `rooms/{room}/redact/...`, `rooms/{room}/typing/{user}`, `join/{room}`,
`rooms/{room}/join` and `rooms/{room}/leave`, `rooms/{room}/messages` (backwards, for a
timeline the stub's `timeline_limit` cut, which it marks `limited`), media upload
(`/_matrix/media/v3/upload`) and download (the authenticated
`/_matrix/client/v1/media/download/...` and the older `/_matrix/media/v3/download/...`).

The test's side: `add_room` (members, name, direct, encrypted, read-only) whose state is sent
with the room's events, `push_event` / `push_text` queue a timeline event, `invite` an
invitation, `redeliver` an event once more; `sent`, `edits`, `redactions`, `typing`, `joins`,
`leaves`, `uploads` record what the bot did; `fail(call, Fault)` queues a failure for the next
calls (`send`, `edit`, `redact`, `typing`, `upload`, `sync`, `whoami`, `join`). The bot's own
sends are not echoed into `/sync` unless `echo_own` (a homeserver echoes them; the adapter
drops them as its own).

Over the ~400-line budget, as one class: every endpoint reads and writes the one event log
and room table a homeserver keeps, and splitting them would only pass that state around.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from sessiongate.testing.stubs.server import serve_app, serve_in_thread

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from starlette.requests import Request

__all__ = ["Fault", "HomeserverStub", "StubRoom", "serve_stub", "serve_stub_in_thread"]

SERVER = "stub.test"
_C = "/_matrix/client"


@dataclass(frozen=True, slots=True)
class Fault:
    status: int
    errcode: str
    error: str = ""
    retry_after_ms: int | None = None
    # Carry out the call, then answer only after this many seconds (a send that times out on
    # the client's side after it was delivered: "unconfirmed").
    delay_seconds: float = 0.0


RATE_LIMITED = Fault(429, "M_LIMIT_EXCEEDED", "Too Many Requests", retry_after_ms=2000)
FORBIDDEN = Fault(403, "M_FORBIDDEN", "You are not invited to this room.")
SERVER_ERROR = Fault(502, "M_UNKNOWN", "Bad Gateway")
NOT_FOUND = Fault(404, "M_NOT_FOUND", "Event not found")
TOO_LARGE = Fault(413, "M_TOO_LARGE", "Upload exceeds the maximum size")
BAD_RELATION = Fault(400, "M_UNKNOWN", "Cannot reply to an event that is not in the room")


@dataclass(slots=True)
class StubRoom:
    room_id: str
    members: list[str]
    name: str | None = None
    direct: bool = False
    encrypted: bool = False
    read_only: bool = False

    def state(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = [
            {"type": "m.room.member", "state_key": user, "sender": user,
             "event_id": f"$member-{user}-{self.room_id}", "origin_server_ts": 0,
             "content": {"membership": "join"}}
            for user in self.members
        ]  # fmt: skip
        if self.name:
            events.append(_state("m.room.name", self.room_id, {"name": self.name}))
        if self.encrypted:
            events.append(
                _state("m.room.encryption", self.room_id, {"algorithm": "m.megolm.v1.aes-sha2"})
            )
        if self.read_only:
            events.append(_state("m.room.power_levels", self.room_id,
                                 {"events_default": 50, "users_default": 0}))  # fmt: skip
        return events


def _state(kind: str, room_id: str, content: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": kind,
        "state_key": "",
        "sender": "@admin:" + SERVER,
        "event_id": f"${kind}-{room_id}",
        "origin_server_ts": 0,
        "content": content,
    }


@dataclass(slots=True)
class _Entry:
    """One item of the stub's sync log: a timeline event, an invite, or account data."""

    kind: str  # "event", "invite", "account_data"
    room_id: str | None = None
    event: dict[str, Any] = field(default_factory=dict)


class HomeserverStub:
    def __init__(
        self,
        token: str = "syt_stub_token",
        *,
        user_id: str = f"@sg_bot:{SERVER}",
        display_name: str = "Sessiongate",
    ) -> None:
        self.token = token
        self.user_id = user_id
        self.display_name = display_name
        self.rooms: dict[str, StubRoom] = {}
        self.log_entries: list[_Entry] = []
        self.sent: list[dict[str, Any]] = []
        self.edits: list[dict[str, Any]] = []
        self.redactions: list[dict[str, Any]] = []
        self.typing: list[dict[str, Any]] = []
        self.joins: list[str] = []
        self.leaves: list[str] = []
        self.uploads: list[dict[str, Any]] = []
        self.media: dict[str, tuple[bytes, str]] = {}
        self.calls: Counter[str] = Counter()
        self.faults: dict[str, deque[Fault]] = {}
        self.unauthorized = 0
        self.echo_own = False
        # Timeline events per room and sync answer, past which the answer is `limited` (as a
        # sync filter's limit makes it on a homeserver); None: every event.
        self.timeline_limit: int | None = None
        self.hang_sync = False
        # The highest position a `since` confirmed (every event before it was taken).
        self.confirmed = 0
        self.syncs_in_flight = 0
        self.max_syncs_in_flight = 0
        # event id -> when a sync answer first carried it (perf_counter seconds).
        self.delivered_at: dict[str, float] = {}
        self.on_call: Callable[[str, dict[str, Any]], None] | None = None
        self.upload_limit_bytes = 50 * 1_048_576
        self._txns: dict[str, str] = {}
        self._ids = itertools.count(1)
        self._arrived = asyncio.Event()
        self._unhang = asyncio.Event()
        self.app = Starlette(
            routes=[
                Route(f"{_C}/versions", self._versions, methods=["GET"]),
                Route(f"{_C}/v3/account/whoami", self._whoami, methods=["GET"]),
                Route(f"{_C}/v3/profile/{{user}}/displayname", self._displayname, methods=["GET"]),
                Route(f"{_C}/v3/sync", self._sync, methods=["GET"]),
                Route(f"{_C}/v3/rooms/{{room}}/send/{{kind}}/{{txn}}", self._send, methods=["PUT"]),
                Route(
                    f"{_C}/v3/rooms/{{room}}/redact/{{event}}/{{txn}}",
                    self._redact,
                    methods=["PUT"],
                ),
                Route(f"{_C}/v3/rooms/{{room}}/typing/{{user}}", self._typing, methods=["PUT"]),
                Route(f"{_C}/v3/join/{{room}}", self._join, methods=["POST"]),
                Route(f"{_C}/v3/rooms/{{room}}/join", self._join, methods=["POST"]),
                Route(f"{_C}/v3/rooms/{{room}}/leave", self._leave, methods=["POST"]),
                Route(f"{_C}/v3/rooms/{{room}}/messages", self._messages, methods=["GET"]),
                Route("/_matrix/media/v3/upload", self._upload, methods=["POST"]),
                Route(
                    f"{_C}/v1/media/download/{{server}}/{{media}}", self._download, methods=["GET"]
                ),
                Route(
                    "/_matrix/media/v3/download/{server}/{media}", self._download, methods=["GET"]
                ),
            ]
        )

    # ------------------------------------------------------------------ the test's side

    def add_room(
        self,
        room_id: str,
        members: list[str],
        *,
        name: str | None = None,
        direct: bool = False,
        encrypted: bool = False,
        read_only: bool = False,
    ) -> StubRoom:
        """A room the bot is in (it is added to `members`)."""
        members = list(dict.fromkeys([self.user_id, *members]))
        room = self.rooms[room_id] = StubRoom(room_id, members, name, direct, encrypted,
                                              read_only)  # fmt: skip
        if direct:
            other = next((m for m in members if m != self.user_id), self.user_id)
            self._append(_Entry("account_data", event={
                "type": "m.direct", "content": {other: [room_id]}}))  # fmt: skip
        return room

    def new_event_id(self) -> str:
        return f"$ev{next(self._ids)}-{int(time.time() * 1000)}"

    def push_event(self, room_id: str, event: dict[str, Any]) -> str:
        """Queue a timeline event in `room_id` as given (an `event_id` is made if missing)."""
        if "event_id" not in event:
            event = {"event_id": self.new_event_id(), **event}
        self._append(_Entry("event", room_id, event))
        return str(event["event_id"])

    def push_text(
        self, room_id: str, sender: str, body: str, *, msgtype: str = "m.text", **content: Any
    ) -> str:
        return self.push_event(room_id, {
            "type": "m.room.message", "sender": sender,
            "origin_server_ts": int(time.time() * 1000),
            "content": {"msgtype": msgtype, "body": body, **content},
        })  # fmt: skip

    def invite(self, room_id: str, inviter: str, *, direct: bool = False,
               encrypted: bool = False) -> None:  # fmt: skip
        """An invitation of the bot into `room_id` (a room it is not in yet)."""
        state: list[dict[str, Any]] = [
            {"type": "m.room.member", "state_key": self.user_id, "sender": inviter,
             "content": {"membership": "invite", "is_direct": direct}},
            {"type": "m.room.member", "state_key": inviter, "sender": inviter,
             "content": {"membership": "join"}},
        ]  # fmt: skip
        if encrypted:
            state.append({"type": "m.room.encryption", "state_key": "", "sender": inviter,
                          "content": {"algorithm": "m.megolm.v1.aes-sha2"}})  # fmt: skip
        self.rooms.setdefault(
            room_id, StubRoom(room_id, [inviter], direct=direct, encrypted=encrypted)
        )
        self._append(_Entry("invite", room_id, {"events": state}))

    def redeliver(self, event_id: str) -> None:
        """The event once more in the next sync (as after a `since` that was not advanced)."""
        entry = next(e for e in self.log_entries if e.event.get("event_id") == event_id)
        self._append(_Entry(entry.kind, entry.room_id, dict(entry.event)))

    def fail(self, call: str, fault: Fault, times: int = 1) -> None:
        self.faults.setdefault(call, deque()).extend([fault] * times)

    def texts(self, room_id: str | None = None) -> list[str]:
        return [str(m["content"].get("body", "")) for m in self.sent
                if room_id is None or m["room_id"] == room_id]  # fmt: skip

    def _append(self, entry: _Entry) -> None:
        self.log_entries.append(entry)
        self._arrived.set()

    # ------------------------------------------------------------------ the API

    def _authorised(self, request: Request) -> bool:
        given = request.headers.get("authorization", "")
        if given != f"Bearer {self.token}":
            self.unauthorized += 1
            return False
        return True

    async def _enter(self, request: Request, call: str) -> tuple[Response | None, Any]:
        """Auth, the body, the call's record and a queued fault: (an answer to give now, the
        JSON body)."""
        if not self._authorised(request):
            return _error(401, "M_UNKNOWN_TOKEN", "Invalid access token passed."), None
        try:
            raw = await request.body()
        except ClientDisconnect:
            return Response(status_code=499), None
        body: Any = None
        if raw and request.headers.get("content-type", "").startswith("application/json"):
            try:
                body = json.loads(raw)
            except ValueError:
                return _error(400, "M_NOT_JSON", "Content not JSON."), None
        elif raw:
            body = raw
        self.calls[call] += 1
        if self.on_call is not None:
            self.on_call(call, body if isinstance(body, dict) else {})
        return None, body

    def _fault(self, call: str) -> Fault | None:
        queued = self.faults.get(call)
        return queued.popleft() if queued else None

    async def _answer(self, fault: Fault | None, ok: Any) -> Response:
        if fault is None:
            return JSONResponse(ok)
        if fault.delay_seconds:
            await asyncio.sleep(fault.delay_seconds)
        if fault.status == 200:
            return JSONResponse(ok)
        return _error(fault.status, fault.errcode, fault.error, fault.retry_after_ms)

    async def _versions(self, request: Request) -> Response:
        return JSONResponse({"versions": ["v1.1", "v1.5", "v1.11"], "unstable_features": {}})

    async def _whoami(self, request: Request) -> Response:
        answer, _ = await self._enter(request, "whoami")
        if answer is not None:
            return answer
        return await self._answer(self._fault("whoami"),
                                  {"user_id": self.user_id, "device_id": "STUBDEVICE"})  # fmt: skip

    async def _displayname(self, request: Request) -> Response:
        answer, _ = await self._enter(request, "profile")
        if answer is not None:
            return answer
        return JSONResponse({"displayname": self.display_name})

    async def _sync(self, request: Request) -> Response:
        answer, _ = await self._enter(request, "sync")
        if answer is not None:
            return answer
        fault = self._fault("sync")
        if fault is not None:
            return await self._answer(fault, {})
        self.syncs_in_flight += 1
        self.max_syncs_in_flight = max(self.max_syncs_in_flight, self.syncs_in_flight)
        try:
            return JSONResponse(await self._sync_answer(request))
        finally:
            self.syncs_in_flight -= 1

    async def _sync_answer(self, request: Request) -> dict[str, Any]:
        since = request.query_params.get("since", "")
        start = int(since[1:]) if since.startswith("s") and since[1:].isdigit() else 0
        self.confirmed = max(self.confirmed, start)
        if self.hang_sync:
            await self._unhang.wait()
        timeout = float(request.query_params.get("timeout") or 0) / 1000.0
        if len(self.log_entries) <= start and timeout > 0:
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._arrived.wait()
        entries = self.log_entries[start:]
        return self._render(entries, start, f"s{start + len(entries)}")

    def _render(self, entries: list[_Entry], start: int, next_batch: str) -> dict[str, Any]:
        join: dict[str, Any] = {}
        invite: dict[str, Any] = {}
        account: list[dict[str, Any]] = []
        now = time.perf_counter()
        positions: dict[str, list[int]] = {}
        for offset, entry in enumerate(entries):
            if entry.kind == "account_data":
                account.append(entry.event)
            elif entry.kind == "invite" and entry.room_id is not None:
                invite[entry.room_id] = {"invite_state": entry.event}
            elif entry.room_id is not None:
                room = self.rooms.get(entry.room_id)
                section = join.get(entry.room_id)
                if section is None:
                    section = join[entry.room_id] = {
                        "state": {"events": room.state() if room else []},
                        "timeline": {"events": [], "limited": False},
                        "summary": {"m.joined_member_count": len(room.members) if room else 0},
                    }
                section["timeline"]["events"].append(entry.event)
                positions.setdefault(entry.room_id, []).append(start + offset)
                self.delivered_at.setdefault(str(entry.event.get("event_id")), now)
        limit = self.timeline_limit
        for room_id, section in join.items():
            timeline = section["timeline"]
            if limit is not None and len(timeline["events"]) > limit:
                # As a homeserver does past the filter's limit: the latest events, `limited`,
                # and a `prev_batch` to page back from with /messages.
                timeline["events"] = timeline["events"][-limit:]
                timeline["limited"] = True
                timeline["prev_batch"] = f"s{positions[room_id][-limit]}"
        rooms: dict[str, Any] = {}
        if join:
            rooms["join"] = join
        if invite:
            rooms["invite"] = invite
        answer: dict[str, Any] = {"next_batch": next_batch, "rooms": rooms}
        if account:
            answer["account_data"] = {"events": account}
        return answer

    async def _send(self, request: Request) -> Response:
        body: Any
        room_id, kind, txn = (request.path_params[k] for k in ("room", "kind", "txn"))
        answer, body = await self._enter(request, "send")
        if answer is not None:
            return answer
        if not isinstance(body, dict):
            return _error(400, "M_NOT_JSON", "Content not JSON.")
        relates = body.get("m.relates_to") or {}
        call = "edit" if relates.get("rel_type") == "m.replace" else "send"
        if call == "edit":
            self.calls["send"] -= 1
            self.calls["edit"] += 1
            if self.on_call is not None:
                self.on_call("edit", body)
        fault = self._fault(call)
        if fault is not None and not fault.delay_seconds:
            return await self._answer(fault, {})
        if txn in self._txns:
            return JSONResponse({"event_id": self._txns[txn]})
        if room_id not in self.rooms:
            return _error(403, "M_FORBIDDEN", "You are not in this room.")
        if call == "edit":
            target = str(relates.get("event_id"))
            original = next((m for m in self.sent if m["event_id"] == target), None)
            if original is None:
                return _error(404, "M_NOT_FOUND", "Event not found")
            original["content"] = {**original["content"], **body.get("m.new_content", {})}
            self.edits.append({"room_id": room_id, "event_id": target, "content": body})
        event_id = self.new_event_id()
        self._txns[txn] = event_id
        if call == "send":
            self.sent.append({"room_id": room_id, "type": kind, "event_id": event_id,
                              "content": body})  # fmt: skip
        if self.echo_own:
            self.push_event(room_id, {"event_id": event_id, "type": kind, "sender": self.user_id,
                                      "origin_server_ts": int(time.time() * 1000),
                                      "content": body})  # fmt: skip
        return await self._answer(fault, {"event_id": event_id})

    async def _redact(self, request: Request) -> Response:
        answer, _ = await self._enter(request, "redact")
        if answer is not None:
            return answer
        fault = self._fault("redact")
        if fault is not None:
            return await self._answer(fault, {})
        target = request.path_params["event"]
        self.redactions.append({"room_id": request.path_params["room"], "event_id": target})
        self.sent = [m for m in self.sent if m["event_id"] != target]
        return JSONResponse({"event_id": self.new_event_id()})

    async def _typing(self, request: Request) -> Response:
        answer, body = await self._enter(request, "typing")
        if answer is not None:
            return answer
        fault = self._fault("typing")
        if fault is not None:
            return await self._answer(fault, {})
        self.typing.append({"room_id": request.path_params["room"], **(body or {})})
        return JSONResponse({})

    async def _join(self, request: Request) -> Response:
        answer, _ = await self._enter(request, "join")
        if answer is not None:
            return answer
        fault = self._fault("join")
        if fault is not None:
            return await self._answer(fault, {})
        room_id = request.path_params["room"]
        self.joins.append(room_id)
        room = self.rooms.setdefault(room_id, StubRoom(room_id, []))
        if self.user_id not in room.members:
            room.members.append(self.user_id)
        return JSONResponse({"room_id": room_id})

    async def _messages(self, request: Request) -> Response:
        answer, _ = await self._enter(request, "messages")
        if answer is not None:
            return answer
        room_id = request.path_params["room"]
        query = request.query_params
        if query.get("dir") != "b":
            return _error(400, "M_INVALID_PARAM", "only dir=b is implemented here")
        begin = _position(query.get("to", "s0"))
        end = _position(query.get("from", f"s{len(self.log_entries)}"))
        limit = int(query.get("limit") or 10)
        found = [
            (index, entry.event)
            for index, entry in enumerate(self.log_entries)
            if begin <= index < end and entry.kind == "event" and entry.room_id == room_id
        ][::-1][:limit]
        page: dict[str, Any] = {"chunk": [event for _, event in found], "start": f"s{end}"}
        if found and len(found) == limit:
            page["end"] = f"s{found[-1][0]}"
        return JSONResponse(page)

    async def _leave(self, request: Request) -> Response:
        answer, _ = await self._enter(request, "leave")
        if answer is not None:
            return answer
        room_id = request.path_params["room"]
        self.leaves.append(room_id)
        room = self.rooms.get(room_id)
        if room is not None and self.user_id in room.members:
            room.members.remove(self.user_id)
        return JSONResponse({})

    async def _upload(self, request: Request) -> Response:
        answer, body = await self._enter(request, "upload")
        if answer is not None:
            return answer
        fault = self._fault("upload")
        if fault is not None:
            return await self._answer(fault, {})
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        if len(data) > self.upload_limit_bytes:
            return _error(413, "M_TOO_LARGE", "Upload exceeds the maximum size")
        media_id = f"m{next(self._ids)}"
        mime = request.headers.get("content-type", "application/octet-stream")
        self.media[media_id] = (data, mime)
        name = request.query_params.get("filename", "")
        self.uploads.append({"media_id": media_id, "name": name, "data": data, "mime": mime})
        return JSONResponse({"content_uri": f"mxc://{SERVER}/{media_id}"})

    async def _download(self, request: Request) -> Response:
        answer, _ = await self._enter(request, "download")
        if answer is not None:
            return answer
        found = self.media.get(request.path_params["media"])
        if found is None:
            return _error(404, "M_NOT_FOUND", "Media not found")
        return Response(found[0], media_type=found[1])


def _position(token: str) -> int:
    return int(token[1:]) if token.startswith("s") and token[1:].isdigit() else 0


def _error(
    status: int, errcode: str, error: str, retry_after_ms: int | None = None
) -> JSONResponse:
    body: dict[str, Any] = {"errcode": errcode, "error": error}
    if retry_after_ms is not None:
        body["retry_after_ms"] = retry_after_ms
    return JSONResponse(body, status_code=status)


@contextlib.asynccontextmanager
async def serve_stub(stub: HomeserverStub) -> AsyncIterator[str]:
    """Serve `stub` on 127.0.0.1 (a free port) in this event loop; yields its base URL."""

    def stop() -> None:  # long polls in flight end with the server
        stub._arrived.set()
        stub._unhang.set()

    async with serve_app(stub.app, name="the homeserver stub", on_stop=stop) as url:
        yield url


@contextlib.contextmanager
def serve_stub_in_thread(stub: HomeserverStub) -> Iterator[str]:
    """`serve_stub` on an event loop of its own thread, for callers without a loop (a CLI
    command, the benchmark's parent process); yields the base URL."""
    with serve_in_thread(lambda: serve_stub(stub), name="the homeserver stub") as (url, _):
        yield url
