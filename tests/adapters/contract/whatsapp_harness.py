"""The contract suite's harness for WhatsApp: pywa against `GraphApiStub`, webhooks signed.

The adapter calls the Graph API over loopback HTTP exactly as it would call Meta; each `Msg`
becomes a recorded-style Cloud API webhook body, signed with the app secret and handed to the
adapter's `receive_webhook` (the route's handler; `tests/adapters/whatsapp` drives the route
itself over HTTP). Each post runs as its own task, as Meta's posts may overlap.

WhatsApp has no threads, channels, bot senders or message edits by a business, so the suite
skips what needs them (`threads`, `channels`, `bot_senders`, `edits`); a "thread" message here
is a message in a second group. Mentions are `@<the business number>`. A reply outside the
24-hour window is refused, so `source(msg)` also tells the adapter that such a message arrived
(a reply to it is in time), as a real message would.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
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
from sessiongate.adapters.whatsapp import WhatsAppAdapter
from sessiongate.adapters.whatsapp.client import WhatsAppClient
from sessiongate.adapters.whatsapp.markup import WHATSAPP_LIMIT
from sessiongate.adapters.whatsapp.payloads import WhatsAppIdentity, parse_webhook
from sessiongate.core.config import WhatsAppConfig
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.stubs import whatsapp as wa

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from sessiongate.adapters.kit import PlatformEvent
    from sessiongate.core.clock import FakeClock
    from sessiongate.core.source import SessionSource

_GROUPS = {"group": "R3JvdXBPbmU0MTI3OTQ", "thread": "R3JvdXBUd280MTI3OTU"}
_OTHER_BOT = "15559990000"
_FAULTS: dict[str, wa.Fault] = {
    "rate_limited": wa.RATE_LIMITED,
    "format": wa.Fault(400, 100, "Invalid parameter", "commands"),
    "blocked": wa.BLOCKED,
    "transient": wa.SERVER_ERROR,
    "gone": wa.Fault(400, 100, "Invalid parameter"),
    "reply_target_gone": wa.REPLY_TARGET_GONE,
    "file_refused": wa.MEDIA_REFUSED,
    # Posted, but the answer comes after the client's timeout.
    "unconfirmed": wa.Fault(200, 0, "", delay_seconds=1.0),
}
_CALLS = {"send": "messages", "upload": "media", "commands": "commands", "edit": "edit"}


class WhatsAppHarness:
    name = "whatsapp"
    limit = WHATSAPP_LIMIT
    measure = staticmethod(len)
    edit_interval = 1.0
    typing_chat: ChatKind = "dm"
    polls = False
    albums = False
    quotes_replies = True
    rejects_markup = False
    rate_limit_seconds = 2.0
    rendered_sample = "*bold* and `code`"
    # What WhatsApp does not have (the suite skips the checks that need it).
    threads = False
    channels = False
    bot_senders = False
    edits = False
    approval_buttons = False

    def __init__(self, tmp_path: Path, clock: FakeClock) -> None:
        self.home = tmp_path / "home"
        self.clock = clock
        self.sleeper = ClockSleep(clock)
        self.stub = wa.GraphApiStub()
        self.agent = BlockingEcho()
        self._serving: contextlib.AsyncExitStack | None = None
        self._config: WhatsAppConfig | None = None
        self._ids = itertools.count(1)
        self._expected = 0
        self._posts: set[asyncio.Task[Any]] = set()
        self.store: SessionStore
        self.runner: GatewayRunner
        self.adapter: WhatsAppAdapter

    @property
    def me(self) -> WhatsAppIdentity:
        return WhatsAppIdentity(self.stub.phone_number_id, self.stub.display_number)

    async def start(self, **platform_config: Any) -> None:
        self._serving = contextlib.AsyncExitStack()
        url = await self._serving.enter_async_context(wa.serve_stub(self.stub))
        settings: dict[str, Any] = {
            "token": self.stub.token,
            "phone_number_id": self.stub.phone_number_id,
            "app_secret": self.stub.app_secret,
            "verify_token": "verify",
            "base_url": url,
            "allow_from": ["*"],
        }
        settings.update(platform_config)
        self._config = WhatsAppConfig(**settings)
        await self._open()

    async def _open(self) -> None:
        assert self._config is not None
        config = GatewayConfig(platforms={"whatsapp": self._config.model_dump()})
        self.store = SessionStore(self.home / "sessions", config, clock=self.clock)
        section = config.platforms["whatsapp"]
        assert isinstance(section, WhatsAppConfig)
        assert section.token is not None
        client = WhatsAppClient(
            section.token.get_secret_value(),
            phone_number_id=self.stub.phone_number_id,
            base_url=section.base_url,
            timeout=0.5,
        )
        self.adapter = WhatsAppAdapter(
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
        for task in self._posts:
            task.cancel()
        with contextlib.suppress(Exception):
            await self.runner.stop()
        with contextlib.suppress(Exception):
            self.store.close()
        if self._serving is not None:
            await self._serving.aclose()

    # ------------------------------------------------------------------ inbound

    def chat_of(self, kind: ChatKind) -> str:
        return _GROUPS.get(kind, self.user_of("alice"))

    @staticmethod
    def user_of(name: str) -> str:
        return f"1555{sum(map(ord, name)):07d}"

    def _body(self, msg: Msg) -> tuple[str, dict[str, Any]]:
        n = next(self._ids)
        message_id = f"wamid.H{n:08d}"
        text = msg.text
        if msg.mention or msg.command_to_bot:
            text = f"@{self.stub.display_number} {text}"
        elif msg.command_to_other:
            text = f"@{_OTHER_BOT} {text}"
        sender = self.stub.display_number if msg.own else self.user_of(msg.user)
        group = None if msg.chat == "dm" else msg.chat_id or _GROUPS.get(msg.chat, msg.chat)
        fields: dict[str, Any] = {
            "sender": sender,
            "name": msg.user.title(),
            "group_id": group,
            "message_id": message_id,
            "timestamp": self.clock.now().timestamp(),
        }
        if msg.reply_to_bot:
            fields["context"] = {"from": self.stub.display_number, "id": "wamid.OUT00000001"}
        if msg.attachment_bytes is not None:
            media = {
                "id": f"{n:015d}",
                "mime_type": "application/octet-stream",
                "sha256": "x",
                "filename": "big.bin",
                "file_size": msg.attachment_bytes,
            }
            body = self.stub.message(kind="document", media=media, **fields)
        elif msg.edit_of is not None:
            edit = {
                "original_message_id": msg.edit_of,
                "message": {"type": "text", "text": {"body": text}},
            }
            body = self.stub.message(kind="edit", extra={"edit": edit}, **fields)
        else:
            body = self.stub.message(text, **fields)
        return message_id, body

    async def _deliver(self, headers: Mapping[str, str], body: bytes) -> tuple[int, Any]:
        return await self.adapter.receive_webhook(headers, body)

    def push(self, msg: Msg) -> str:
        message_id, body = self._body(msg)
        self._post(self.stub.encode(body))
        self._expected += 1
        return message_id

    def push_again(self, event_id: str) -> None:
        self._post(self.stub.bodies[event_id])
        self._expected += 1

    def _post(self, raw: bytes) -> None:
        headers = {"x-hub-signature-256": wa.sign(self.stub.app_secret, raw)}
        task = asyncio.ensure_future(self._deliver(headers, raw))
        self._posts.add(task)
        task.add_done_callback(self._posts.discard)

    def event(self, msg: Msg) -> tuple[str, PlatformEvent]:
        _, body = self._body(msg)
        (event,) = parse_webhook(body, self.me).events
        return event.event_id, event

    async def settle(self) -> None:
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            await wait_admitted(self.adapter, self.sleeper, self._expected)
            if self._posts:
                await asyncio.gather(*self._posts, return_exceptions=True)
            await self.runner.wait_idle()
            for _ in range(5):
                await asyncio.sleep(0)

    def source(self, msg: Msg) -> SessionSource:
        _, event = self.event(msg)
        assert event.source is not None
        if hasattr(self, "adapter"):  # (also asked before start, to build the config)
            self.adapter.window.saw(event.source.chat_id, event.sent_at)
        return event.source

    # ------------------------------------------------------------------ outbound

    def _sent(self, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
        return [m for m in self.stub.sent if m.get("type") in kinds]

    def posted(self, chat_id: str | None = None) -> list[Posted]:
        return [
            Posted(
                chat_id=str(m.get("to") or m.get("recipient")),
                thread_id=None,
                text=str(m["text"]["body"]),
                markup=True,
                message_id=str(m["id"]),
                reply_to=(m.get("context") or {}).get("message_id"),
            )
            for m in self._sent(("text",))
            if chat_id is None or str(m.get("to") or m.get("recipient")) == chat_id
        ]

    def message_id_of(self, event_id: str) -> str:
        return event_id

    def edit_times(self) -> list[float]:
        return []

    def typing_count(self) -> int:
        return len(self.stub.typing)

    def registered_commands(self) -> list[str]:
        return [c["command_name"] for c in self.stub.commands]

    def ephemeral(self) -> list[str]:
        return []

    def uploads(self) -> list[Uploaded]:
        found = {u["id"]: u for u in self.stub.uploads}
        out = []
        for m in self._sent(("image", "document")):
            upload = found.get(str(m[m["type"]].get("id")))
            if upload is None:
                continue
            out.append(
                Uploaded(
                    chat_id=str(m.get("to") or m.get("recipient")),
                    thread_id=None,
                    name=str(upload["name"]),
                    data=upload["data"],
                    kind="photo" if m["type"] == "image" else "document",
                )
            )
        return out

    def fail(self, call: Call, fault: Fault, times: int = 1) -> None:
        self.stub.fail(_CALLS[call], _FAULTS[fault], times)

    def calls(self, call: Literal["send", "edit", "typing"]) -> int:
        if call == "typing":
            return len(self.stub.typing)
        if call == "edit":
            return 0
        return self.stub.calls["messages"]
