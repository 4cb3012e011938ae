"""The contract suite's harness for Signal: the adapter's httpx client against `SignalCliStub`.

The adapter reads the stub's SSE event stream and calls its JSON-RPC endpoint over loopback
HTTP exactly as it would a signal-cli daemon; `Msg`s are rendered as real receive events (the
fixtures in `tests/adapters/signal/fixtures` are the reference). A mention is a U+FFFC with a
`mentions` range naming the bot's account; `/cmd` addressed to the bot follows its mention.
Signal has no threads, channels, bot flag, edits in place or command registration: the suite
skips what needs them (`threads = False`, ...). Kit time runs on a `FakeClock` through `ClockSleep`.
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
from sessiongate.adapters.kit import ClockSleep
from sessiongate.adapters.kit.splitting import utf16_len
from sessiongate.adapters.signal import SignalAdapter
from sessiongate.adapters.signal.adapter import SIGNAL_LIMIT
from sessiongate.adapters.signal.client import SignalClient
from sessiongate.adapters.signal.payloads import SignalIdentity, group_chat_id, parse_event
from sessiongate.core.config import SignalConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import signal as sg

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.adapters.kit import PlatformEvent
    from sessiongate.core.clock import FakeClock
    from sessiongate.core.source import SessionSource

GROUP_ID = "S2lkcyBncm91cCBpZCAxMjM0NTY3ODkwMTIzNDU2Nzg5MA=="
# Signal has no threads: a "thread" message of the suite is one in a second group.
_GROUPS = {"group": GROUP_ID, "thread": "U2Vjb25kIGdyb3VwIGlkIDEyMzQ1Njc4OTAxMjM0NTY3ODk="}
_USERS = {
    "alice": ("+15550000011", "a11ce000-0000-4000-8000-000000000011"),
    "bob": ("+15550000012", "b0b00000-0000-4000-8000-000000000012"),
    "carol": ("+15550000013", "ca701000-0000-4000-8000-000000000013"),
}
_OTHER = ("+15550000099", "07e40000-0000-4000-8000-000000000099")
_FAULTS: dict[str, sg.Fault] = {
    "rate_limited": sg.RATE_LIMITED,
    "format": sg.FORMAT_REJECTED,
    "blocked": sg.BLOCKED,
    "transient": sg.NETWORK_FAILURE,
    "reply_target_gone": sg.QUOTE_REJECTED,
    "file_refused": sg.ATTACHMENT_REJECTED,
    # Sent, but the answer comes after the client's read timeout.
    "unconfirmed": sg.Fault(None, delay_seconds=1.0),
}


class SignalHarness:
    name = "signal"
    limit = SIGNAL_LIMIT
    measure = staticmethod(utf16_len)
    edit_interval = 1.0
    typing_chat: ChatKind = "dm"
    rendered_sample = "bold and code"  # the text; the styles go as ranges beside it
    polls = False
    albums = False
    quotes_replies = True
    rejects_markup = True
    rate_limit_seconds = 2.0
    # What Signal has not: threads, channels, a bot flag on senders, edits in place, a
    # command registry (commands are read from the text).
    threads = False
    channels = False
    bot_senders = False
    edits = False
    registers_commands = False
    approval_buttons = False

    def __init__(self, tmp_path: Path, clock: FakeClock) -> None:
        self.home = tmp_path / "home"
        self.clock = clock
        self.sleeper = ClockSleep(clock)
        self.stub = sg.SignalCliStub()
        self.agent = BlockingEcho()
        self._serving: contextlib.AsyncExitStack | None = None
        self._url = ""
        self._config: SignalConfig | None = None
        self._expected = 0
        self._count = 0
        # event id -> the receive event pushed for it
        self._events: dict[str, dict[str, Any]] = {}
        self.store: SessionStore
        self.runner: GatewayRunner
        self.adapter: SignalAdapter

    @property
    def me(self) -> SignalIdentity:
        return SignalIdentity(self.stub.account, self.stub.uuid)

    async def start(self, **platform_config: Any) -> None:
        self._serving = contextlib.AsyncExitStack()
        self._url = await self._serving.enter_async_context(sg.serve_stub(self.stub))
        settings: dict[str, Any] = {
            "url": self._url,
            "account": self.stub.account,
            "allow_from": ["*"],
        }
        settings.update(platform_config)
        self._config = SignalConfig(**settings)
        await self._open()

    async def _open(self) -> None:
        assert self._config is not None
        config = GatewayConfig(platforms={"signal": self._config.model_dump()})
        self.store = SessionStore(self.home / "sessions", config, clock=self.clock)
        section = config.platforms["signal"]
        assert isinstance(section, SignalConfig)
        client = SignalClient(self._url, self.stub.account, timeout=0.5)
        self.adapter = SignalAdapter(
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
        opened = self.stub.streams_opened
        await self.runner.start()
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            while self.stub.streams_opened == opened or not self.stub.open_streams:  # noqa: ASYNC110
                await asyncio.sleep(0.01)

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

    # ------------------------------------------------------------------ inbound

    def chat_of(self, kind: ChatKind) -> str:
        if kind == "dm":
            return _USERS["alice"][1]
        if kind in _GROUPS:
            return group_chat_id(_GROUPS[kind])
        raise ValueError(f"Signal has no {kind}")

    def _receive(self, msg: Msg) -> dict[str, Any]:
        if msg.chat not in ("dm", *_GROUPS):
            raise ValueError(f"Signal has no {msg.chat}")
        self._count += 1
        number, uuid = (self.stub.account, self.stub.uuid) if msg.own else _USERS.get(
            msg.user, _OTHER
        )  # fmt: skip
        timestamp = int(self.clock.now().timestamp() * 1000) + self._count
        text = msg.text
        data: dict[str, Any] = {}
        mentions: list[dict[str, Any]] = []
        if msg.mention or msg.command_to_bot:
            text = "\ufffc " + text
            mentions.append({"name": "Sessiongate", "number": self.stub.account,
                             "uuid": self.stub.uuid, "start": 0, "length": 1})  # fmt: skip
        elif msg.command_to_other:
            text = "\ufffc " + text
            mentions.append({"name": "Other bot", "number": _OTHER[0], "uuid": _OTHER[1],
                             "start": 0, "length": 1})  # fmt: skip
        if mentions:
            data["mentions"] = mentions
        if msg.reply_to_bot:
            data["quote"] = {"id": timestamp - 500, "author": self.stub.account,
                             "authorNumber": self.stub.account, "authorUuid": self.stub.uuid,
                             "text": "earlier answer", "attachments": []}  # fmt: skip
        if msg.attachment_bytes is not None:
            data["attachments"] = [{"contentType": "application/octet-stream",
                                    "filename": "big.bin", "id": f"att{self._count}.bin",
                                    "size": msg.attachment_bytes}]  # fmt: skip
        group = _GROUPS.get(msg.chat)
        event = sg.data_envelope(text, number=number, uuid=uuid, timestamp=timestamp,
                                 name=msg.user.title(), group_id=group, group_name="Team chat",
                                 **data)  # fmt: skip
        if msg.edit_of is not None:
            original = self._events[msg.edit_of]["envelope"]
            message = {**original["dataMessage"], "message": msg.text}
            envelope = {**event["envelope"]}
            del envelope["dataMessage"]
            envelope["editMessage"] = {"targetSentTimestamp": original["timestamp"],
                                       "dataMessage": message}  # fmt: skip
            event = {"envelope": envelope}
        return event

    def push(self, msg: Msg) -> str:
        event = self._receive(msg)
        event_id = parse_event(event, self.me).event_id
        self._events[event_id] = event
        self.stub.push(event)
        self._expected += 1
        return event_id

    def push_again(self, event_id: str) -> None:
        self.stub.push(self._events[event_id])
        self._expected += 1

    def event(self, msg: Msg) -> tuple[str, PlatformEvent]:
        event = parse_event(self._receive(msg), self.me)
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
                chat_id=_chat(m),
                thread_id=None,
                text=str(m["message"]),
                markup="textStyle" in m,
                message_id=str(m["timestamp"]),
                reply_to=str(m["quoteTimestamp"]) if "quoteTimestamp" in m else None,
            )
            for m in self.stub.sent
            if chat_id is None or _chat(m) == chat_id
        ]

    def message_id_of(self, event_id: str) -> str:
        return str(self._events[event_id]["envelope"]["timestamp"])

    def edit_times(self) -> list[float]:
        return []

    def typing_count(self) -> int:
        return len(self.stub.typing)

    def registered_commands(self) -> list[str]:
        return []

    def ephemeral(self) -> list[str]:
        return []

    def uploads(self) -> list[Uploaded]:
        return [
            Uploaded(chat_id=_chat(u), thread_id=None, name=str(u["name"]), data=u["data"])
            for u in self.stub.uploads
        ]

    def fail(self, call: Call, fault: Fault, times: int = 1) -> None:
        self.stub.fail(call, _FAULTS[fault], times)

    def calls(self, call: Literal["send", "edit", "typing"]) -> int:
        return self.stub.calls[{"send": "send", "edit": "edit", "typing": "sendTyping"}[call]]


def _chat(record: dict[str, Any]) -> str:
    if "groupId" in record:
        return group_chat_id(str(record["groupId"]))
    return str(record["recipient"])
