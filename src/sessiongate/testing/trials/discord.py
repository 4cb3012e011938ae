"""`sessiongate try discord`: the adapter on discord.py, REST and gateway on `DiscordStub`."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from sessiongate.testing.stubs import discord as dc
from sessiongate.testing.trial import TryTarget

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["TARGET"]

_USER_ID = "5000000000000000001"
_CHANNEL = "4000000000000000001"  # the user's DM channel with the bot


class _Session:
    def __init__(self, stub: dc.DiscordStub, url: str) -> None:
        self._stub = stub
        self.url = url
        self.user_name = "alice"
        self.platform_config: dict[str, Any] = {"token": stub.token, "api_base_url": url}

    async def wait_ready(self) -> None:
        await self._stub.session_ready.wait()  # a dispatch reaches only a live session

    def send(self, text: str) -> None:
        author = dc.user(_USER_ID, self.user_name)
        self._stub.dispatch(
            "MESSAGE_CREATE",
            {
                "id": self._stub.snowflake(),
                "channel_id": _CHANNEL,
                "type": 0,
                "content": text,
                "author": author,
                "timestamp": "2026-01-01T00:00:00.000000+00:00",
                "edited_timestamp": None,
                "tts": False,
                "mention_everyone": False,
                "mentions": [],
                "mention_roles": [],
                "attachments": [],
                "embeds": [],
                "pinned": False,
                "flags": 0,
                "nonce": None,
            },
        )

    def bot_messages(self) -> list[str]:
        return [
            str(m.get("content", "")) for m in self._stub.sent if m.get("channel_id") == _CHANNEL
        ]


@contextlib.asynccontextmanager
async def _open() -> AsyncIterator[_Session]:
    stub = dc.DiscordStub()
    async with dc.serve_stub(stub) as url:
        yield _Session(stub, url)


TARGET = TryTarget(
    platform="discord",
    title="Discord",
    stub="a Discord REST and gateway stub",
    sdk="discord.py",
    open=_open,
)
