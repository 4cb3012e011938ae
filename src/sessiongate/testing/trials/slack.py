"""`sessiongate try slack`: the adapter on slack-sdk, in Socket Mode against `SlackStub`."""

from __future__ import annotations

import contextlib
import itertools
from typing import TYPE_CHECKING, Any

from sessiongate.testing.stubs import slack as sl
from sessiongate.testing.trial import TryTarget

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["TARGET"]

_USER_ID = "U0ALICE"
_CHANNEL = "D0ALICE"  # the user's direct-message channel with the bot


class _Session:
    def __init__(self, stub: sl.SlackStub, url: str) -> None:
        self._stub = stub
        self._count = itertools.count(1)
        self.url = url
        self.user_name = "Alice"
        self.platform_config: dict[str, Any] = {
            "bot_token": stub.bot_token,
            "app_token": stub.app_token,
            "base_url": url + "/api/",
        }

    async def wait_ready(self) -> None:
        return  # an envelope waits in the stub until the socket takes it

    def send(self, text: str) -> None:
        n = next(self._count)
        ts = f"1767225600.{n:06d}"
        event = {
            "type": "message",
            "channel": _CHANNEL,
            "channel_type": "im",
            "user": _USER_ID,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "team": self._stub.team_id,
            "client_msg_id": f"try-{n}",
        }
        self._stub.push_event(
            {
                "token": "verification-token",
                "team_id": self._stub.team_id,
                "api_app_id": "A0APP",
                "event": event,
                "type": "event_callback",
                "event_id": f"EvTRY{n:08d}",
                "event_time": 1767225600,
            }
        )

    def bot_messages(self) -> list[str]:
        return [str(m.get("text", "")) for m in self._stub.sent if m.get("channel") == _CHANNEL]


@contextlib.asynccontextmanager
async def _open() -> AsyncIterator[_Session]:
    stub = sl.SlackStub()
    async with sl.serve_stub(stub) as url:
        yield _Session(stub, url)


TARGET = TryTarget(
    platform="slack",
    title="Slack",
    stub="a Slack Web API and Socket Mode stub",
    sdk="slack-sdk",
    open=_open,
)
