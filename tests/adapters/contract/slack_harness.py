"""The contract suite's harness for Slack: slack-sdk against `SlackStub`, over Socket Mode.

The adapter holds a real Socket Mode websocket to the stub and calls the Web API over loopback
HTTP exactly as it would call Slack; `Msg`s are rendered as real Events API shapes (the
fixtures in `tests/adapters/slack/fixtures` are the reference). `/cmd` addressed to the bot is
a slash-command envelope. Kit time runs on a `FakeClock` through `ClockSleep`.
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
from sessiongate.adapters.kit.splitting import SLACK_LIMIT
from sessiongate.adapters.slack import SlackAdapter
from sessiongate.adapters.slack.client import SlackClient
from sessiongate.adapters.slack.payloads import SlackIdentity, parse_envelope, parse_slash_command
from sessiongate.core.config import SlackConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import slack as sl

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.adapters.kit import PlatformEvent
    from sessiongate.core.clock import FakeClock
    from sessiongate.core.source import SessionSource

_CHATS = {"group": "G0GROUP", "thread": "G0THREADS", "channel": "C0CHANNEL"}
_THREAD = "1767225000.000100"
_FAULTS: dict[str, sl.Fault] = {
    "rate_limited": sl.RATE_LIMITED,
    "format": sl.INVALID_BLOCKS,
    "blocked": sl.NOT_IN_CHANNEL,
    "transient": sl.UNAVAILABLE,
    "gone": sl.MESSAGE_GONE,
    # Posted, but the answer comes after the client's timeout.
    # The message a reply quotes (Slack: the thread it goes to) is gone or cannot take one.
    "reply_target_gone": sl.CANNOT_REPLY,
    "file_refused": sl.MISSING_SCOPE,
    "unconfirmed": sl.Fault("", delay_seconds=1.0),
}
_METHODS = {"send": "chat.postMessage", "edit": "chat.update", "commands": "apps.manifest.update",
            "upload": "files.getUploadURLExternal"}  # fmt: skip


class SlackHarness:
    name = "slack"
    limit = SLACK_LIMIT
    measure = staticmethod(len)
    edit_interval = 1.0
    # Slack shows a bot "typing" only as a thread's status line.
    typing_chat: ChatKind = "thread"
    # The adapter asks the platform for events (long polling) rather than being sent them.
    polls = False
    albums = False
    quotes_replies = False
    rejects_markup = True
    rate_limit_seconds = 2.0
    rendered_sample = "*bold* and `code`"

    def __init__(self, tmp_path: Path, clock: FakeClock) -> None:
        self.home = tmp_path / "home"
        self.clock = clock
        self.sleeper = ClockSleep(clock)
        self.stub = sl.SlackStub()
        self.agent = BlockingEcho()
        self._serving: contextlib.AsyncExitStack | None = None
        self._url = ""
        self._config: SlackConfig | None = None
        self._count = 0
        self._expected = 0
        self._edit_times: list[float] = []
        self._bodies: dict[str, dict[str, Any]] = {}
        self.store: SessionStore
        self.runner: GatewayRunner
        self.adapter: SlackAdapter

    @property
    def me(self) -> SlackIdentity:
        return SlackIdentity(self.stub.user_id, self.stub.bot_id, self.stub.team_id)

    async def start(self, **platform_config: Any) -> None:
        self._serving = contextlib.AsyncExitStack()
        self._url = await self._serving.enter_async_context(sl.serve_stub(self.stub))
        self.stub.on_call = self._on_call
        settings: dict[str, Any] = {
            "bot_token": self.stub.bot_token,
            "app_token": self.stub.app_token,
            "app_config_token": self.stub.config_token,
            "app_id": "A0APP",
            "base_url": self._url + "/api/",
            "allow_from": ["*"],
        }
        settings.update(platform_config)
        self._config = SlackConfig(**settings)
        await self._open()

    async def _open(self) -> None:
        assert self._config is not None
        config = GatewayConfig(platforms={"slack": self._config.model_dump()})
        self.store = SessionStore(self.home / "sessions", config, clock=self.clock)
        section = config.platforms["slack"]
        assert isinstance(section, SlackConfig)
        client = SlackClient(
            self.stub.bot_token,
            base_url=section.base_url,
            timeout=0.5,
            app_config_token=self.stub.config_token,
            app_id="A0APP",
        )
        self.adapter = SlackAdapter(
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

    def _on_call(self, method: str, params: dict[str, Any]) -> None:
        if method == "chat.update":
            self._edit_times.append(self.clock.monotonic())

    # ------------------------------------------------------------------ inbound

    def chat_of(self, kind: ChatKind) -> str:
        return _CHATS.get(kind, "D0ALICE")

    def user_of(self, name: str) -> str:
        return f"U0{name.upper()}"

    def _body(self, msg: Msg) -> tuple[str, dict[str, Any]]:
        """(kind, payload): an Events API body, or a slash command's fields."""
        self._count += 1
        channel = msg.chat_id or (f"D0{msg.user.upper()}" if msg.chat == "dm" else _CHATS[msg.chat])
        if msg.command_to_bot:
            name, _, rest = msg.text.lstrip("/").partition(" ")
            return "slash_commands", {
                "command": f"/sg-{name}", "text": rest, "channel_id": channel,
                "user_id": self.user_of(msg.user), "user_name": msg.user,
                "team_id": self.stub.team_id, "trigger_id": f"trig-{self._count}",
            }  # fmt: skip
        ts = f"1767225600.{self._count:06d}"
        event: dict[str, Any] = {
            "type": "message",
            "channel": channel,
            "channel_type": {"dm": "im", "group": "group", "thread": "group"}.get(
                msg.chat, "channel"
            ),
            "user": self.stub.user_id if msg.own else self.user_of(msg.user),
            "text": (f"<@{self.stub.user_id}> " if msg.mention else "") + msg.text,
            "ts": ts,
            "event_ts": ts,
            "team": self.stub.team_id,
            "client_msg_id": f"c-{self._count}",
        }
        if msg.own:
            event["bot_id"] = self.stub.bot_id
        if msg.from_bot:
            event.update(bot_id="B0OTHER", subtype="bot_message")
            event.pop("client_msg_id")
        if msg.chat == "thread":
            event["thread_ts"] = msg.thread or _THREAD
            event["parent_user_id"] = self.user_of("carol")
        if msg.reply_to_bot:
            event.update(thread_ts="1767225500.000001", parent_user_id=self.stub.user_id)
        if msg.attachment_bytes is not None:
            event["subtype"] = "file_share"
            event["files"] = [{"id": "F0DOC", "name": "big.bin", "size": msg.attachment_bytes,
                               "mimetype": "application/octet-stream"}]  # fmt: skip
        if msg.edit_of is not None:
            original = self._bodies[msg.edit_of]["event"]
            changed = {**original, "text": msg.text, "edited": {"user": original["user"], "ts": ts}}
            event = {
                "type": "message",
                "subtype": "message_changed",
                "channel": channel,
                "channel_type": original["channel_type"],
                "message": changed,
                "previous_message": original,
                "hidden": True,
                "ts": ts,
                "event_ts": ts,
            }
        body = {
            "token": "verification-token",
            "team_id": self.stub.team_id,
            "api_app_id": "A0APP",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev{self._count:08d}",
            "event_time": 1767225600,
        }
        return "events_api", body

    def push(self, msg: Msg) -> str:
        kind, body = self._body(msg)
        envelope_id = self.stub.push_event(body, kind=kind)
        self._bodies[envelope_id] = body
        self._expected += 1
        return envelope_id

    def push_again(self, event_id: str) -> None:
        self.stub.redeliver(event_id)
        self._expected += 1

    def event(self, msg: Msg) -> tuple[str, PlatformEvent]:
        kind, body = self._body(msg)
        commands = frozenset(c.name for c in gateway_commands())
        if kind == "slash_commands":
            event = parse_slash_command(body, self.me, commands=commands)
        else:
            event = parse_envelope(body, self.me, commands=commands)
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
                chat_id=str(m["channel"]),
                thread_id=m.get("thread_ts"),
                text=str(m["text"]),
                markup=bool(m.get("blocks")),
                message_id=str(m["ts"]),
            )
            for m in self.stub.sent
            if chat_id is None or str(m["channel"]) == chat_id
        ]

    def message_id_of(self, event_id: str) -> str:
        body = self._bodies[event_id]
        return str(body["event"]["ts"])

    def edit_times(self) -> list[float]:
        return list(self._edit_times)

    def typing_count(self) -> int:
        return len(self.stub.statuses)

    def registered_commands(self) -> list[str]:
        return [c.removeprefix("/sg-") for c in self.stub.commands()]

    def ephemeral(self) -> list[str]:
        return [str(p.get("text")) for p in self.stub.ack_payloads.values()]

    def approval_buttons(self) -> list[str]:
        return [str(button["action_id"]) for button in self.stub.buttons()]

    def press(self, value: str, user: str = "alice") -> str:
        envelope_id = self.stub.push_press(value, user_id=self.user_of(user), user_name=user)
        self._expected += 1
        return envelope_id

    def uploads(self) -> list[Uploaded]:
        return [
            Uploaded(
                chat_id=str(u["channel"]),
                thread_id=u.get("thread_ts"),
                name=str(u["name"]),
                data=u["data"],
            )
            for u in self.stub.uploads
        ]

    def fail(self, call: Call, fault: Fault, times: int = 1) -> None:
        self.stub.fail(_METHODS[call], _FAULTS[fault], times)

    def calls(self, call: Literal["send", "edit", "typing"]) -> int:
        method = {"send": "chat.postMessage", "edit": "chat.update",
                  "typing": "assistant.threads.setStatus"}  # fmt: skip
        return self.stub.calls[method[call]]
