"""The contract suite's harness for Discord: discord.py against `DiscordStub`.

The adapter holds a real gateway websocket to the stub (HELLO, IDENTIFY, READY, heartbeats,
DISPATCH) and calls REST over loopback HTTP exactly as it would call Discord; `Msg`s are
rendered as real dispatch shapes (the fixtures in `tests/adapters/discord/fixtures` are the
reference). `/cmd` addressed to the bot is an application command interaction. Kit time runs on
a `FakeClock` through `ClockSleep`.
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
from sessiongate.adapters.discord import DiscordAdapter
from sessiongate.adapters.discord.client import DiscordClient
from sessiongate.adapters.discord.payloads import (
    DiscordIdentity,
    channel_info,
    parse_interaction,
    parse_message,
)
from sessiongate.adapters.kit import ClockSleep, gateway_commands
from sessiongate.adapters.kit.splitting import DISCORD_LIMIT
from sessiongate.core.config import DiscordConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import discord as dc

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.adapters.kit import PlatformEvent
    from sessiongate.core.clock import FakeClock
    from sessiongate.core.source import SessionSource

GUILD = "2000000000000000001"
_CHANNELS = {
    "group": {"id": "3000000000000000001", "type": 0, "name": "general"},
    "channel": {"id": "3000000000000000002", "type": 5, "name": "announcements"},
    "thread": {"id": "3000000000000000003", "type": 11, "name": "a thread",
               "parent_id": "3000000000000000001"},
}  # fmt: skip
_USERS = {"alice": "5000000000000000001", "bob": "5000000000000000002"}
_USERS["carol"] = "5000000000000000003"
_FAULTS: dict[str, dc.Fault] = {
    "rate_limited": dc.RATE_LIMITED,
    "format": dc.INVALID_FORM,
    "blocked": dc.MISSING_ACCESS,
    "transient": dc.UNAVAILABLE,
    "gone": dc.UNKNOWN_MESSAGE,
    # Posted, but the answer comes after the client's read timeout.
    # The message a reply quotes (Slack: the thread it goes to) is gone or cannot take one.
    "reply_target_gone": dc.Fault(
        400, 50035, "Invalid Form Body\nIn message_reference: Unknown message"
    ),
    "file_refused": dc.FILE_TOO_LARGE,
    "unconfirmed": dc.Fault(200, delay_seconds=1.0),
}


class DiscordHarness:
    name = "discord"
    limit = DISCORD_LIMIT
    measure = staticmethod(len)
    edit_interval = 1.0
    typing_chat: ChatKind = "dm"
    rendered_sample = "**bold** and `code`"  # Discord renders Markdown itself
    # The adapter asks the platform for events (long polling) rather than being sent them.
    polls = False
    albums = False
    quotes_replies = True
    rejects_markup = False
    rate_limit_seconds = dc.RATE_LIMITED.retry_after

    def __init__(self, tmp_path: Path, clock: FakeClock) -> None:
        self.home = tmp_path / "home"
        self.clock = clock
        self.sleeper = ClockSleep(clock)
        self.stub = dc.DiscordStub()
        for channel in _CHANNELS.values():
            self.stub.channels[str(channel["id"])] = {**channel, "guild_id": GUILD}
        self.agent = BlockingEcho()
        self._serving: contextlib.AsyncExitStack | None = None
        self._url = ""
        self._config: DiscordConfig | None = None
        self._expected = 0
        self._edit_times: list[float] = []
        self._events: dict[str, tuple[str, dict[str, Any]]] = {}
        self.store: SessionStore
        self.runner: GatewayRunner
        self.adapter: DiscordAdapter

    async def start(self, **platform_config: Any) -> None:
        self._serving = contextlib.AsyncExitStack()
        self._url = await self._serving.enter_async_context(dc.serve_stub(self.stub))
        self.stub.on_call = self._on_call
        settings: dict[str, Any] = {
            "token": self.stub.token,
            "api_base_url": self._url,
            "allow_from": ["*"],
        }
        settings.update(platform_config)
        self._config = DiscordConfig(**settings)
        await self._open()

    async def _open(self) -> None:
        assert self._config is not None
        config = GatewayConfig(platforms={"discord": self._config.model_dump()})
        self.store = SessionStore(self.home / "sessions", config, clock=self.clock)
        section = config.platforms["discord"]
        assert isinstance(section, DiscordConfig)
        client = DiscordClient(self.stub.token, api_base_url=self._url, read_timeout=0.5)
        self.adapter = DiscordAdapter(
            section, clock=self.clock, sleep=self.sleeper, tick=self.sleeper.tick, client=client
        )
        self.runner = GatewayRunner(
            self.store,
            config,
            home=self.home,
            agent_factory=self.agent.factory,
            clock=self.clock,
            adapters=[self.adapter],
        )
        await self.runner.start()
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            await self.stub.session_ready.wait()

    async def restart(self) -> None:
        await self.runner.stop()
        self.store.close()
        self._expected = 0
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            while self.stub.session_ready.is_set():  # noqa: ASYNC110  # the old socket closes
                await asyncio.sleep(0.01)
        await self._open()

    async def close(self) -> None:
        self.agent.release()
        with contextlib.suppress(Exception):
            await self.runner.stop()
        with contextlib.suppress(Exception):
            self.store.close()
        if self._serving is not None:
            await self._serving.aclose()

    def _on_call(self, route: str, params: dict[str, Any]) -> None:
        if route == "edit":
            self._edit_times.append(self.clock.monotonic())

    # ------------------------------------------------------------------ inbound

    def chat_of(self, kind: ChatKind) -> str:
        if kind == "dm":
            return "4000000000000000001"
        return str(_CHANNELS[kind]["id"])

    def _author(self, msg: Msg) -> dict[str, Any]:
        if msg.own:
            return dc.user(self.stub.bot_id, "sg_bot", bot=True)
        return dc.user(_USERS.get(msg.user, "5000000000000000099"), msg.user, bot=msg.from_bot)

    def _dispatch(self, msg: Msg) -> tuple[str, dict[str, Any]]:
        author = self._author(msg)
        dm_channel = (
            f"40000000000000000{list(_USERS).index(msg.user) + 1 if msg.user in _USERS else 9:02d}"
        )
        channel = msg.chat_id or (dm_channel if msg.chat == "dm" else self.chat_of(msg.chat))
        guild = {} if msg.chat == "dm" else {"guild_id": GUILD}
        member = {} if msg.chat == "dm" else {"member": {"roles": [], "nick": None}}
        if msg.command_to_bot:
            name, _, _rest = msg.text.lstrip("/").partition(" ")
            interaction = {"id": self.stub.snowflake(), "application_id": self.stub.app_id,
                           "type": 2, "token": "itoken", "version": 1, "locale": "en-US",
                           "data": {"id": "900", "name": name, "type": 1},
                           "channel_id": channel, "channel": {**_CHANNELS["group"], "id": channel,
                           "guild_id": GUILD, "position": 0, "nsfw": False,
                           "permissions": "0", "flags": 0},
                           "entitlements": [], "authorizing_integration_owners": {},
                           "attachment_size_limit": 10485760,
                           "app_permissions": "0", **guild}  # fmt: skip
            if guild:
                interaction["member"] = {"user": author, "roles": [], "joined_at":
                                         "2025-01-01T00:00:00+00:00", "deaf": False,
                                         "mute": False, "permissions": "0", "flags": 0}  # fmt: skip
            else:
                interaction["user"] = author
            return "INTERACTION_CREATE", interaction
        content = (f"<@{self.stub.bot_id}> " if msg.mention else "") + msg.text
        data: dict[str, Any] = {
            "id": self.stub.snowflake(), "channel_id": channel, "type": 0, "content": content,
            "author": author, "timestamp": "2026-01-01T00:00:00.000000+00:00",
            "edited_timestamp": None, "tts": False, "mention_everyone": False,
            "mentions": [dc.user(self.stub.bot_id, "sg_bot", bot=True)] if msg.mention else [],
            "mention_roles": [], "attachments": [], "embeds": [], "pinned": False, "flags": 0,
            "nonce": None, **guild, **member,
        }  # fmt: skip
        if msg.reply_to_bot:
            referenced = {**data, "id": "1400000000000000001", "content": "earlier answer",
                          "author": dc.user(self.stub.bot_id, "sg_bot", bot=True)}  # fmt: skip
            referenced.pop("member", None)
            data.update(type=19, referenced_message=referenced,
                        message_reference={"message_id": referenced["id"], "channel_id": channel,
                                           **guild})  # fmt: skip
        if msg.attachment_bytes is not None:
            data["attachments"] = [{"id": "1300000000000000001", "filename": "big.bin",
                                    "size": msg.attachment_bytes, "url": "https://cdn.test/b",
                                    "proxy_url": "https://media.test/b",
                                    "content_type": "application/octet-stream"}]  # fmt: skip
        if msg.edit_of is not None:
            _, original = self._events[msg.edit_of]
            data = {**original, "content": msg.text,
                    "edited_timestamp": "2026-01-01T00:01:00.000000+00:00"}  # fmt: skip
            return "MESSAGE_UPDATE", data
        return "MESSAGE_CREATE", data

    def _event_id(self, kind: str, data: dict[str, Any]) -> str:
        return self._map(kind, data).event_id

    def _map(self, kind: str, data: dict[str, Any]) -> PlatformEvent:
        me = DiscordIdentity(self.stub.bot_id, self.stub.app_id)
        known = self.stub.channels.get(str(data.get("channel_id")))
        channel = channel_info(known) if known else None
        if kind == "INTERACTION_CREATE":
            return parse_interaction(data, me, channel)
        commands = frozenset(c.name for c in gateway_commands())
        return parse_message(kind, data, me, channel, commands=commands)

    def push(self, msg: Msg) -> str:
        kind, data = self._dispatch(msg)
        event_id = self._event_id(kind, data)
        self._events[event_id] = (kind, data)
        self.stub.dispatch(kind, data)
        self._expected += 1
        return event_id

    def push_again(self, event_id: str) -> None:
        kind, data = self._events[event_id]
        self.stub.dispatch(kind, data)
        self._expected += 1

    def event(self, msg: Msg) -> tuple[str, PlatformEvent]:
        kind, data = self._dispatch(msg)
        event = self._map(kind, data)
        return event.event_id, event

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
        return [
            Posted(
                chat_id=str(m["channel_id"]),
                thread_id=str(m["channel_id"])
                if m["channel_id"] == self.chat_of("thread")
                else None,
                text=str(m["content"]),
                markup=True,  # Discord renders Markdown in every message
                message_id=str(m["id"]),
                reply_to=_reply_to(m),
            )
            for m in self.stub.sent
            if chat_id is None or str(m["channel_id"]) == chat_id
        ]

    def message_id_of(self, event_id: str) -> str:
        return str(self._events[event_id][1]["id"])

    def edit_times(self) -> list[float]:
        return list(self._edit_times)

    def typing_count(self) -> int:
        return len(self.stub.typing)

    def registered_commands(self) -> list[str]:
        return [str(c["name"]) for c in self.stub.commands.values()]

    def ephemeral(self) -> list[str]:
        return [str(c["data"]["content"]) for c in self.stub.callbacks if c.get("data")]

    def approval_buttons(self) -> list[str]:
        return [str(button["custom_id"]) for button in self.stub.buttons()]

    def press(self, value: str, user: str = "alice") -> str:
        presser = dc.user(_USERS.get(user, "5000000000000000099"), user)
        interaction_id = self.stub.press(value, presser)
        self._expected += 1
        return f"interaction:{interaction_id}"

    def uploads(self) -> list[Uploaded]:
        return [
            Uploaded(
                chat_id=str(u["channel_id"]),
                thread_id=str(u["channel_id"])
                if u["channel_id"] == self.chat_of("thread")
                else None,
                name=str(u["name"]),
                data=u["data"],
            )
            for u in self.stub.uploads
        ]

    def fail(self, call: Call, fault: Fault, times: int = 1) -> None:
        self.stub.fail(call, _FAULTS[fault], times)

    def calls(self, call: Literal["send", "edit", "typing"]) -> int:
        return self.stub.calls[call]


def _reply_to(body: dict[str, Any]) -> str | None:
    quoted = (body.get("message_reference") or {}).get("message_id")
    return str(quoted) if quoted is not None else None
