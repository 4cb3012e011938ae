"""`sessiongate try matrix`: the adapter on mautrix against `HomeserverStub`, a small
client-server API (`/sync`, sends, joins, media) on loopback."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from sessiongate.testing.stubs import matrix as mx
from sessiongate.testing.trial import TryTarget

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["TARGET"]

_USER = f"@alice:{mx.SERVER}"
_ROOM = f"!dm-alice:{mx.SERVER}"
_LOOK_EVERY_SECONDS = 0.02


class _Session:
    def __init__(self, stub: mx.HomeserverStub, url: str) -> None:
        self._stub = stub
        self.url = url
        self.user_name = "alice"
        self.platform_config: dict[str, Any] = {
            "homeserver": url,
            "user_id": stub.user_id,
            "access_token": stub.token,
            "sync_timeout_seconds": 1,
        }
        stub.add_room(_ROOM, [_USER], direct=True)

    async def wait_ready(self) -> None:
        # The first sync only learns the rooms (history before the bot started is never
        # answered): the user writes once the next one listens.
        while self._stub.calls["sync"] < 2:  # noqa: ASYNC110 (the stub signals nothing)
            await asyncio.sleep(_LOOK_EVERY_SECONDS)

    def send(self, text: str) -> None:
        self._stub.push_text(_ROOM, _USER, text)

    def bot_messages(self) -> list[str]:
        return self._stub.texts(_ROOM)


@contextlib.asynccontextmanager
async def _open() -> AsyncIterator[_Session]:
    stub = mx.HomeserverStub()
    async with mx.serve_stub(stub) as url:
        yield _Session(stub, url)


TARGET = TryTarget(
    platform="matrix",
    title="Matrix",
    stub="a Matrix homeserver stub (the client-server API)",
    sdk="mautrix",
    open=_open,
)
