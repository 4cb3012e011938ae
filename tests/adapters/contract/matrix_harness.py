"""The contract suite's harness for Matrix: mautrix against `HomeserverStub`.

The adapter long-polls the stub's `/sync` over loopback HTTP exactly as it would a homeserver;
`Msg`s are rendered as real timeline events (`m.room.message` with `m.relates_to` threads,
replies and edits, `m.mentions`, `m.notice` for bots, `m.file` for media). A thread is a thread
of the group room; the channel is a room whose members cannot post (power levels). Kit time
runs on a `FakeClock` through `ClockSleep`.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Literal

from harness import (
    HANG_GUARD_SECONDS,
    BlockingEcho,
    Call,
    ChatKind,
    Fault,
    Msg,
    Posted,
    Uploaded,
    wait_admitted,
)

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.kit import ClockSleep, gateway_commands
from sessiongate.adapters.matrix import MatrixAdapter
from sessiongate.adapters.matrix.client import MatrixClient
from sessiongate.adapters.matrix.payloads import MatrixIdentity, RoomInfo, parse_event
from sessiongate.adapters.matrix.rendering import MATRIX_LIMIT, utf8_len
from sessiongate.core.config import MatrixConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import matrix as mx

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.adapters.kit import PlatformEvent
    from sessiongate.core.clock import FakeClock
    from sessiongate.core.source import SessionSource

S = mx.SERVER
_ROOMS = {"group": f"!group:{S}", "thread": f"!group:{S}", "channel": f"!announce:{S}"}
_THREAD_ROOT = f"$thread-root:{S}"
# A message the bot posted before the test (a reply to it is addressed to the bot).
_EARLIER_ANSWER = f"$earlier-answer:{S}"
_FAULTS: dict[str, mx.Fault] = {
    "rate_limited": mx.RATE_LIMITED,
    "format": mx.Fault(400, "M_BAD_JSON", "bad content"),
    "blocked": mx.FORBIDDEN,
    "transient": mx.SERVER_ERROR,
    "gone": mx.NOT_FOUND,
    "reply_target_gone": mx.BAD_RELATION,
    "file_refused": mx.TOO_LARGE,
    # Posted, but the answer comes after the client's read timeout.
    "unconfirmed": mx.Fault(200, "", delay_seconds=1.0),
}
_USERS = ("alice", "bob", "carol")


def _user(name: str) -> str:
    return f"@{name}:{S}"


class MatrixHarness:
    name = "matrix"
    limit = MATRIX_LIMIT
    measure = staticmethod(utf8_len)
    edit_interval = 1.0
    typing_chat: ChatKind = "dm"
    rendered_sample = "<b>bold</b> and <code>code</code>"
    polls = True
    albums = False
    quotes_replies = True
    # An HTML `formatted_body` is never refused: a client that cannot render it shows `body`.
    rejects_markup = False
    # Matrix has no registry of bot commands: `/cmd` and `!cmd` are read from the text.
    registers_commands = False
    approval_buttons = False
    rate_limit_seconds = 2.0

    def __init__(self, tmp_path: Path, clock: FakeClock) -> None:
        self.home = tmp_path / "home"
        self.clock = clock
        self.sleeper = ClockSleep(clock)
        self.stub = mx.HomeserverStub()
        for user in _USERS:
            self.stub.add_room(self._dm(user), [_user(user)], direct=True)
        self.stub.add_room(_ROOMS["group"], [_user(u) for u in _USERS], name="Team chat")
        self.stub.add_room(_ROOMS["channel"], [_user(u) for u in _USERS], name="News",
                           read_only=True)  # fmt: skip
        self.agent = BlockingEcho()
        self._serving: contextlib.AsyncExitStack | None = None
        self._url = ""
        self._config: MatrixConfig | None = None
        self._expected = 0
        self._edit_times: list[float] = []
        self.store: SessionStore
        self.runner: GatewayRunner
        self.adapter: MatrixAdapter

    @staticmethod
    def _dm(user: str) -> str:
        return f"!dm-{user}:{S}"

    async def start(self, **platform_config: Any) -> None:
        self._serving = contextlib.AsyncExitStack()
        self._url = await self._serving.enter_async_context(mx.serve_stub(self.stub))
        self.stub.on_call = self._on_call
        settings: dict[str, Any] = {
            "homeserver": self._url,
            "access_token": self.stub.token,
            "user_id": self.stub.user_id,
            "sync_timeout_seconds": 1,
            "allow_from": ["*"],
        }
        settings.update(platform_config)
        home = settings.get("home_channel")
        if home and home not in self.stub.rooms:
            self.stub.add_room(home, [], name="Home")
        self._config = MatrixConfig(**settings)
        await self._open()

    async def _open(self) -> None:
        assert self._config is not None
        config = GatewayConfig(platforms={"matrix": self._config.model_dump()})
        self.store = SessionStore(self.home / "sessions", config, clock=self.clock)
        section = config.platforms["matrix"]
        assert isinstance(section, MatrixConfig)
        client = MatrixClient(self._url, self.stub.token, read_timeout=0.5, sync_timeout_ms=1000)
        self.adapter = MatrixAdapter(
            section, clock=self.clock, sleep=self.sleeper, tick=self.sleeper.tick, client=client
        )
        self.adapter.remember_own(_EARLIER_ANSWER)
        self.runner = GatewayRunner(
            self.store,
            config,
            home=self.home,
            agent_factory=self.agent.factory,
            clock=self.clock,
            adapters=[self.adapter],
        )
        await self.runner.start()

    async def restart(self) -> None:
        await self.runner.stop()
        self.store.close()
        self._expected = 0
        await self._open()

    async def close(self) -> None:
        self.agent.release()
        with contextlib.suppress(Exception):
            await self.runner.stop()
        with contextlib.suppress(Exception):
            self.store.close()
        if self._serving is not None:
            await self._serving.aclose()

    def _on_call(self, call: str, body: dict[str, Any]) -> None:
        if call == "edit":
            self._edit_times.append(self.clock.monotonic())

    # ------------------------------------------------------------------ inbound

    def chat_of(self, kind: ChatKind) -> str:
        return self._dm("alice") if kind == "dm" else _ROOMS[kind]

    def _room_of(self, msg: Msg) -> str:
        if msg.chat_id:
            return msg.chat_id
        return self._dm(msg.user if msg.user in _USERS else "alice") if msg.chat == "dm" else (
            _ROOMS[msg.chat]
        )  # fmt: skip

    def _event(self, msg: Msg, event_id: str) -> dict[str, Any]:
        if msg.own:
            sender = self.stub.user_id
        elif msg.from_bot:
            sender = _user(f"{msg.user}_bot")
        else:
            sender = _user(msg.user)
        body = msg.text
        content: dict[str, Any] = {"msgtype": "m.notice" if msg.from_bot else "m.text"}
        mentioned: list[str] = []
        if msg.command_to_bot or msg.command_to_other:
            body = "!" + body.removeprefix("/")
            if msg.command_to_other:
                mentioned.append(_user("other_bot"))
        if msg.mention:
            body = f"{self.stub.display_name}: {body}"
            mentioned.append(self.stub.user_id)
            content["format"] = "org.matrix.custom.html"
            link = f'<a href="https://matrix.to/#/{self.stub.user_id}">{self.stub.display_name}</a>'
            content["formatted_body"] = f"{link}: {msg.text}"
        content["body"] = body
        content["m.mentions"] = {"user_ids": mentioned}
        if msg.chat == "thread":
            root = msg.thread or _THREAD_ROOT
            content["m.relates_to"] = {"rel_type": "m.thread", "event_id": root,
                                       "is_falling_back": True,
                                       "m.in_reply_to": {"event_id": root}}  # fmt: skip
        if msg.reply_to_bot:
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": _EARLIER_ANSWER}}
        if msg.attachment_bytes is not None:
            content.update(msgtype="m.file", filename="big.bin", url=f"mxc://{S}/big",
                           info={"size": msg.attachment_bytes,
                                 "mimetype": "application/octet-stream"})  # fmt: skip
            if not msg.text:
                content["body"] = "big.bin"
        if msg.edit_of is not None:
            new = {k: v for k, v in content.items() if k != "m.relates_to"}
            replaces = {"rel_type": "m.replace", "event_id": msg.edit_of}
            content = {**new, "body": f"* {body}", "m.new_content": new, "m.relates_to": replaces}
        return {
            "event_id": event_id,
            "type": "m.room.message",
            "sender": sender,
            "origin_server_ts": int(self.clock.now().timestamp() * 1000),
            "content": content,
        }

    def push(self, msg: Msg) -> str:
        event_id = self.stub.new_event_id()
        self.stub.push_event(self._room_of(msg), self._event(msg, event_id))
        self._expected += 1
        return event_id

    def push_again(self, event_id: str) -> None:
        self.stub.redeliver(event_id)
        self._expected += 1

    def event(self, msg: Msg) -> tuple[str, PlatformEvent]:
        event_id = self.stub.new_event_id()
        room = self.stub.rooms[self._room_of(msg)]
        info = RoomInfo(room.room_id, name=room.name, members=set(room.members),
                        is_direct=room.direct, read_only=room.read_only)  # fmt: skip
        me = MatrixIdentity(self.stub.user_id, self.stub.display_name)
        commands = frozenset(c.name for c in gateway_commands())
        adapter = getattr(self, "adapter", None)
        own = adapter.own_events if adapter is not None else {_EARLIER_ANSWER: None}
        event = parse_event(info, self._event(msg, event_id), me, commands=commands,
                            bot_events=own)  # fmt: skip
        return event_id, event

    async def settle(self) -> None:
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            await wait_admitted(self.adapter, self.sleeper, self._expected)
            await self.runner.wait_idle()
            for _ in range(5):
                await asyncio.sleep(0)

    def source(self, msg: Msg) -> SessionSource:
        _, event = self.event(msg)
        assert event.source is not None
        return event.source

    # ------------------------------------------------------------------ outbound

    def posted(self, chat_id: str | None = None) -> list[Posted]:
        found = []
        for m in self.stub.sent:
            content = m["content"]
            if content.get("msgtype") not in ("m.text", "m.notice"):
                continue
            if chat_id is not None and m["room_id"] != chat_id:
                continue
            relates = content.get("m.relates_to") or {}
            thread = relates.get("event_id") if relates.get("rel_type") == "m.thread" else None
            quoted = (relates.get("m.in_reply_to") or {}).get("event_id")
            if relates.get("is_falling_back"):
                quoted = None
            markup = content.get("format") == "org.matrix.custom.html"
            found.append(
                Posted(
                    chat_id=m["room_id"],
                    thread_id=thread,
                    text=str(content["formatted_body"] if markup else content["body"]),
                    markup=markup,
                    message_id=m["event_id"],
                    reply_to=quoted,
                )
            )
        return found

    def message_id_of(self, event_id: str) -> str:
        return event_id

    def edit_times(self) -> list[float]:
        return list(self._edit_times)

    def typing_count(self) -> int:
        # Typing shown (a notice taken down after the reply is `typing: false`).
        return sum(1 for t in self.stub.typing if t.get("typing"))

    def registered_commands(self) -> list[str]:
        return []

    def ephemeral(self) -> list[str]:
        return []  # Matrix has no answer only one user sees

    def uploads(self) -> list[Uploaded]:
        found = []
        for m in self.stub.sent:
            content = m["content"]
            if content.get("msgtype") not in ("m.file", "m.image"):
                continue
            media_id = str(content["url"]).rsplit("/", 1)[-1]
            data, _mime = self.stub.media[media_id]
            relates = content.get("m.relates_to") or {}
            thread = relates.get("event_id") if relates.get("rel_type") == "m.thread" else None
            found.append(
                Uploaded(
                    chat_id=m["room_id"],
                    thread_id=thread,
                    name=str(content.get("filename") or content["body"]),
                    data=data,
                    kind="photo" if content["msgtype"] == "m.image" else "file",
                )
            )
        return found

    def fail(self, call: Call, fault: Fault, times: int = 1) -> None:
        self.stub.fail(call, _FAULTS[fault], times)

    def calls(self, call: Literal["send", "edit", "typing"]) -> int:
        return self.stub.calls[call]
