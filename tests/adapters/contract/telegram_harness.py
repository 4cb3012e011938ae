"""The contract suite's harness for Telegram: python-telegram-bot against `BotApiStub`.

The adapter polls the stub over loopback HTTP exactly as it would poll Telegram; `Msg`s are
rendered as real update shapes (the fixtures in `tests/adapters/telegram/fixtures` are the
reference). Kit time runs on a `FakeClock` through `ClockSleep`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
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
from sessiongate.adapters.kit import ClockSleep
from sessiongate.adapters.kit.splitting import TELEGRAM_LIMIT, utf16_len
from sessiongate.adapters.telegram import TelegramAdapter
from sessiongate.adapters.telegram.client import TelegramClient
from sessiongate.adapters.telegram.payloads import BotIdentity, parse_update
from sessiongate.core.config import TelegramConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import telegram as tg

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.adapters.kit import PlatformEvent
    from sessiongate.core.clock import FakeClock
    from sessiongate.core.source import SessionSource

_CHATS: dict[str, int] = {"dm": 42, "group": -1001234567890, "thread": -1001234567890}
_CHATS["channel"] = -1005556667778
_USERS = {"alice": 42, "bob": 43, "carol": 44}
_THREAD = "77"

_FAULTS: dict[str, tg.Fault] = {
    "rate_limited": tg.RATE_LIMITED,
    "format": tg.PARSE_ERROR,
    "blocked": tg.BLOCKED,
    "transient": tg.SERVER_ERROR,
    "gone": tg.EDIT_GONE,
    # The message a reply quotes (Slack: the thread it goes to) is gone or cannot take one.
    "reply_target_gone": tg.Fault(400, "Bad Request: message to be replied not found"),
    "file_refused": tg.FILE_TOO_LARGE,
    # Delivered, but the answer comes after the client's read timeout.
    "unconfirmed": tg.Fault(200, "late", delay_seconds=1.0),
}
_METHODS = {"send": "sendMessage", "edit": "editMessageText", "commands": "setMyCommands",
            "upload": "sendDocument"}  # fmt: skip


class TelegramHarness:
    name = "telegram"
    limit = TELEGRAM_LIMIT
    measure = staticmethod(utf16_len)
    edit_interval = 1.0
    typing_chat: ChatKind = "dm"
    # The adapter asks the platform for events (long polling) rather than being sent them.
    polls = True
    albums = True
    quotes_replies = True
    rejects_markup = True
    rate_limit_seconds = 2.0
    rendered_sample = "<b>bold</b> and <code>code</code>"

    def __init__(self, tmp_path: Path, clock: FakeClock) -> None:
        self.home = tmp_path / "home"
        self.clock = clock
        self.sleeper = ClockSleep(clock)
        self.stub = tg.BotApiStub()
        self.agent = BlockingEcho()
        self._serving: contextlib.AsyncExitStack | None = None
        self._url = ""
        self._config: TelegramConfig | None = None
        self._pushed: list[int] = []
        # Events pushed since the adapter started: settled when it has admitted as many.
        self._expected = 0
        self._edit_times: list[float] = []
        self.store: SessionStore
        self.runner: GatewayRunner
        self.adapter: TelegramAdapter

    async def start(self, **platform_config: Any) -> None:
        self._serving = contextlib.AsyncExitStack()
        self._url = await self._serving.enter_async_context(tg.serve_stub(self.stub))
        self.stub.on_call = self._on_call
        settings: dict[str, Any] = {
            "token": self.stub.token,
            "base_url": self._url,
            "poll_timeout_seconds": 1,
            "allow_from": ["*"],
        }
        settings.update(platform_config)
        self._config = TelegramConfig(**settings)
        await self._open()

    async def _open(self) -> None:
        assert self._config is not None
        config = GatewayConfig(platforms={"telegram": self._config.model_dump()})
        self.store = SessionStore(self.home / "sessions", config, clock=self.clock)
        section = config.platforms["telegram"]
        assert isinstance(section, TelegramConfig)
        client = TelegramClient(
            self.stub.token, base_url=self._url, poll_timeout=1, read_timeout=0.5
        )
        self.adapter = TelegramAdapter(
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
        if method == "editMessageText":
            self._edit_times.append(self.clock.monotonic())

    # ------------------------------------------------------------------ inbound

    def chat_of(self, kind: ChatKind) -> str:
        return str(_CHATS[kind])

    def _update(self, msg: Msg) -> dict[str, Any]:
        user_id = _USERS.get(msg.user, 99)
        if msg.chat_id:
            chat_id = int(msg.chat_id)
        else:
            # A private chat's id is its user's id.
            chat_id = user_id if msg.chat == "dm" else _CHATS[msg.chat]
        chat: dict[str, Any] = {"id": chat_id}
        if msg.chat == "dm":
            chat.update(type="private", first_name=msg.user.title(), username=msg.user)
        elif msg.chat == "channel":
            chat.update(type="channel", title="Announcements")
        else:
            chat.update(type="supergroup", title="Team chat")
        if msg.chat == "thread":
            chat["is_forum"] = True
        if msg.own:
            sender = {"id": self.stub.bot_id, "is_bot": True, "first_name": "Sessiongate",
                      "username": self.stub.username}  # fmt: skip
        else:
            sender = {"id": user_id, "is_bot": msg.from_bot, "first_name": msg.user.title(),
                      "username": f"{msg.user}_bot" if msg.from_bot else msg.user}  # fmt: skip
        text, entities = msg.text, []
        if msg.mention:
            text = f"@{self.stub.username} {text}"
            length = len(self.stub.username) + 1
            entities.append({"offset": 0, "length": length, "type": "mention"})
        if msg.command_to_bot or msg.command_to_other:
            command, _, rest = text.partition(" ")
            who = self.stub.username if msg.command_to_bot else "other_bot"
            text = f"{command}@{who}" + (f" {rest}" if rest else "")
            entities.append(
                {"offset": 0, "length": utf16_len(command) + 1 + len(who), "type": "bot_command"}
            )
        message: dict[str, Any] = {
            "message_id": len(self._pushed) + 500,
            "from": sender,
            "chat": chat,
            "date": 1767225600,
            "text": text,
        }
        if entities:
            message["entities"] = entities
        if msg.chat == "channel":
            message.pop("from")
            message["sender_chat"] = dict(chat)
        if msg.chat == "thread":
            message["message_thread_id"] = int(msg.thread or _THREAD)
            message["is_topic_message"] = True
        if msg.reply_to_bot:
            message["reply_to_message"] = {
                "message_id": 1,
                "from": {"id": self.stub.bot_id, "is_bot": True, "first_name": "Sessiongate",
                         "username": self.stub.username},
                "chat": chat, "date": 1767225500, "text": "earlier answer",
            }  # fmt: skip
        if msg.attachment_bytes is not None:
            message.pop("text")
            message["caption"] = text
            size = msg.attachment_bytes
            message["document"] = {
                "file_id": "DOC1",
                "file_unique_id": "D1",
                "file_name": "big.bin",
                "file_size": size,
            }
        if msg.album is not None:
            message.pop("text")
            if text:
                message["caption"] = text
            message["media_group_id"] = msg.album
            n = len(self._pushed)
            message["photo"] = [{"file_id": f"PHOTO{n}", "file_unique_id": f"P{n}",
                                 "width": 800, "height": 600, "file_size": 1000}]  # fmt: skip
        kind = "channel_post" if msg.chat == "channel" else "message"
        if msg.edit_of is not None:
            original = next(u for u in self.stub.log_updates if str(u["update_id"]) == msg.edit_of)
            message["message_id"] = original[next(iter(k for k in original if k != "update_id"))][
                "message_id"
            ]
            message["edit_date"] = 1767225660
            kind = "edited_" + kind
        return {kind: message}

    def push(self, msg: Msg) -> str:
        update_id = self.stub.push_update(self._update(msg))
        self._pushed.append(update_id)
        self._expected += 1
        return str(update_id)

    def push_again(self, event_id: str) -> None:
        self.stub.redeliver(int(event_id))
        self._expected += 1

    def event(self, msg: Msg) -> tuple[str, PlatformEvent]:
        update = {"update_id": 900000 + len(self._pushed), **self._update(msg)}
        self._pushed.append(int(update["update_id"]))
        me = BotIdentity(id=str(self.stub.bot_id), username=self.stub.username)
        return str(update["update_id"]), parse_update(update, me)

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
                chat_id=str(m["chat_id"]),
                thread_id=m.get("message_thread_id"),
                text=str(m["text"]),
                markup=m.get("parse_mode") == "HTML",
                message_id=str(m["message_id"]),
                reply_to=_reply_to(m),
            )
            for m in self.stub.sent
            if chat_id is None or str(m["chat_id"]) == chat_id
        ]

    def message_id_of(self, event_id: str) -> str:
        update = next(u for u in self.stub.log_updates if str(u["update_id"]) == event_id)
        message = next(v for k, v in update.items() if k != "update_id")
        return str(message["message_id"])

    def edit_times(self) -> list[float]:
        return list(self._edit_times)

    def typing_count(self) -> int:
        return len(self.stub.actions)

    def registered_commands(self) -> list[str]:
        return [c["command"] for c in self.stub.commands]

    def ephemeral(self) -> list[str]:
        return []  # Telegram has no answer only one user sees

    def approval_buttons(self) -> list[str]:
        return [
            str(button["callback_data"])
            for keyboard in self.stub.keyboards()
            for row in keyboard["inline_keyboard"]
            for button in row
        ]

    def press(self, value: str, user: str = "alice") -> str:
        user_id = _USERS.get(user, 99)
        update_id = self.stub.push_press(value, chat_id=user_id, user_id=user_id, username=user)
        self._expected += 1
        return str(update_id)

    def uploads(self) -> list[Uploaded]:
        return [
            Uploaded(
                chat_id=str(u["chat_id"]),
                thread_id=u.get("message_thread_id"),
                name=str(u["name"]),
                data=u["data"],
                kind="photo" if u["method"] == "sendPhoto" else "document",
            )
            for u in self.stub.uploads
        ]

    def fail(self, call: Call, fault: Fault, times: int = 1) -> None:
        self.stub.fail(_METHODS[call], _FAULTS[fault], times)

    def calls(self, call: Literal["send", "edit", "typing"]) -> int:
        method = {"send": "sendMessage", "edit": "editMessageText", "typing": "sendChatAction"}
        return self.stub.calls[method[call]]


def _reply_to(params: dict[str, Any]) -> str | None:
    """The quoted message of a sendMessage (`reply_parameters`, JSON text in a form body)."""
    reply = params.get("reply_parameters")
    if isinstance(reply, str):
        reply = json.loads(reply)
    if isinstance(reply, dict) and reply.get("message_id") is not None:
        return str(reply["message_id"])
    legacy = params.get("reply_to_message_id")
    return str(legacy) if legacy is not None else None
