"""`sessiongate try signal`: the adapter against `SignalCliStub`, a signal-cli daemon stand-in
(JSON-RPC and its event stream, over HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import TYPE_CHECKING, Any

from sessiongate.testing.stubs import signal as sg
from sessiongate.testing.trial import TryTarget

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["TARGET"]

_NUMBER = "+15551234567"  # the simulated user
_UUID = "a11ce000-0000-4000-8000-00000000a11c"
_LOOK_EVERY_SECONDS = 0.02


class _Session:
    def __init__(self, stub: sg.SignalCliStub, url: str) -> None:
        self._stub = stub
        self._stamps = itertools.count(1_767_225_600_000)
        self.url = url
        self.user_name = "Alice"
        self.platform_config: dict[str, Any] = {"url": url, "account": stub.account}

    async def wait_ready(self) -> None:
        # The daemon keeps events for a stream that is not open yet, but the first message
        # reads better once the adapter listens.
        while self._stub.open_streams < 1:  # noqa: ASYNC110 (the stub signals nothing)
            await asyncio.sleep(_LOOK_EVERY_SECONDS)

    def send(self, text: str) -> None:
        self._stub.push(
            sg.data_envelope(
                text, number=_NUMBER, uuid=_UUID, timestamp=next(self._stamps), name="Alice"
            )
        )

    def bot_messages(self) -> list[str]:
        return [
            str(m.get("message", ""))
            for m in self._stub.sent
            if m.get("recipient") in (_NUMBER, _UUID)
        ]


@contextlib.asynccontextmanager
async def _open() -> AsyncIterator[_Session]:
    stub = sg.SignalCliStub()
    async with sg.serve_stub(stub) as url:
        yield _Session(stub, url)


TARGET = TryTarget(
    platform="signal",
    title="Signal",
    stub="a signal-cli daemon stub (JSON-RPC and its event stream)",
    sdk="httpx",
    open=_open,
)
