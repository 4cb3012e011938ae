"""`sessiongate try telegram`: the adapter on python-telegram-bot, polling `BotApiStub`."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from sessiongate.testing.stubs import telegram as tg
from sessiongate.testing.trial import TryTarget

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["TARGET"]

_USER_ID = 42  # a private chat's id is its user's id
_USER = "alice"


class _Session:
    def __init__(self, stub: tg.BotApiStub, url: str) -> None:
        self._stub = stub
        self.url = url
        self.user_name = _USER.title()
        self.platform_config: dict[str, Any] = {
            "token": stub.token,
            "base_url": url,
            "poll_timeout_seconds": 1,
        }

    async def wait_ready(self) -> None:
        return  # the adapter polls: an update waits in the stub until it asks

    def send(self, text: str) -> None:
        self._stub.push_message(text, chat_id=_USER_ID, user_id=_USER_ID, username=_USER)

    def bot_messages(self) -> list[str]:
        return self._stub.texts(_USER_ID)


@contextlib.asynccontextmanager
async def _open() -> AsyncIterator[_Session]:
    stub = tg.BotApiStub()
    async with tg.serve_stub(stub) as url:
        yield _Session(stub, url)


TARGET = TryTarget(
    platform="telegram",
    title="Telegram",
    stub="a Telegram Bot API stub",
    sdk="python-telegram-bot",
    open=_open,
)
