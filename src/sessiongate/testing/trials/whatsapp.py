"""`sessiongate try whatsapp`: the adapter on pywa against `GraphApiStub`.

Meta posts webhooks; here the stub signs each of the simulated user's messages as Meta would
and hands it to the adapter's own `receive_webhook` (signature check, parsing, admission), and
the bot's replies go to the stub's Graph API through pywa.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from sessiongate.testing.stubs import whatsapp as wa
from sessiongate.testing.trial import TryTarget

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

__all__ = ["TARGET"]

_USER = "15551234567"  # the simulated user's number


class _Session:
    def __init__(self, stub: wa.GraphApiStub, url: str) -> None:
        self._stub = stub
        self.url = url
        self.user_name = "Alice"
        self.platform_config: dict[str, Any] = {
            "token": stub.token,
            "phone_number_id": stub.phone_number_id,
            "app_secret": stub.app_secret,
            "verify_token": "try-verify-token",
            "base_url": url,
        }

    def attach(self, adapters: Sequence[object]) -> None:
        """Deliver the stub's signed webhooks to the WhatsApp adapter, as Meta's posts would."""
        adapter = next(a for a in adapters if str(getattr(a, "platform", "")) == "whatsapp")
        self._stub.deliver = adapter.receive_webhook  # type: ignore[attr-defined]

    async def wait_ready(self) -> None:
        return  # a webhook is handed to the adapter as soon as it is pushed

    def send(self, text: str) -> None:
        self._stub.push_message(text, sender=_USER, name=self.user_name)

    def bot_messages(self) -> list[str]:
        return self._stub.texts(_USER)


@contextlib.asynccontextmanager
async def _open() -> AsyncIterator[_Session]:
    stub = wa.GraphApiStub()
    async with wa.serve_stub(stub) as url:
        try:
            yield _Session(stub, url)
        finally:
            await stub.aclose()


TARGET = TryTarget(
    platform="whatsapp",
    title="WhatsApp",
    stub="a WhatsApp Cloud API (Graph API) stub",
    sdk="pywa",
    open=_open,
)
