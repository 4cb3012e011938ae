"""`LoopbackAdapter`: an in-memory platform for tests and demos; it records what is sent.

It speaks for any registered platform (`telegram` by default), so tests can use real group,
thread and DM sources. `receive` builds a `MessageEvent` and hands it to the runner like a real
platform would. Sends can be held (`hold_sends`) or made to fail (`fail_sends`) to exercise the
replied-but-undelivered path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.core.platform import Platform
from sessiongate.core.source import SessionSource
from sessiongate.gateway.messages import MessageEvent

if TYPE_CHECKING:
    import asyncio

    from sessiongate.gateway.messages import Inbox, Receipt

__all__ = ["LoopbackAdapter", "SentMessage"]


@dataclass(frozen=True, slots=True)
class SentMessage:
    source: SessionSource
    text: str
    turn_id: int | None


class LoopbackAdapter:
    pii_safe = True

    def __init__(self, platform: Platform | str = Platform.TELEGRAM) -> None:
        self.platform = Platform(platform)
        self.sent: list[SentMessage] = []
        self.runner: Inbox | None = None
        self.started = False
        self.stopped = False
        # When set to an unset Event, `send` waits for it (a slow or stuck platform).
        self.hold_sends: asyncio.Event | None = None
        # Raise from this many upcoming sends (a platform that refuses).
        self.fail_sends = 0
        self.send_attempts = 0

    async def start(self, runner: Inbox) -> None:
        self.runner = runner
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> str:
        self.send_attempts += 1
        if self.hold_sends is not None:
            await self.hold_sends.wait()
        if self.fail_sends > 0:
            self.fail_sends -= 1
            raise ConnectionError("loopback: send refused")
        self.sent.append(SentMessage(source, text, turn_id))
        return f"loopback-{len(self.sent)}"

    def chat_id_key(self, chat_id: str) -> str:
        return chat_id

    def source(self, chat_id: str = "chat", **fields: Any) -> SessionSource:
        """A source on this adapter's platform (`user_id` defaults to the chat id)."""
        fields.setdefault("user_id", chat_id)
        return SessionSource(platform=self.platform, chat_id=chat_id, **fields)

    async def receive(
        self,
        text: str,
        *,
        chat_id: str = "chat",
        message_id: str | None = None,
        wait: bool = True,
        media: tuple[str, ...] = (),
        event_kind: str | None = None,
        **fields: Any,
    ) -> Receipt:
        """Hand one inbound message to the runner, as the platform would."""
        if self.runner is None:
            raise RuntimeError("the adapter has not been started by a runner")
        event = MessageEvent(
            source=self.source(chat_id, **fields),
            text=text,
            media=media,
            message_id=message_id,
            event_kind=event_kind,
        )
        return await self.runner.handle_message(event, wait=wait)

    def texts(self, chat_id: str | None = None) -> list[str]:
        """What was sent, in order (to one chat when `chat_id` is given)."""
        return [m.text for m in self.sent if chat_id is None or m.source.chat_id == chat_id]
