"""SIGKILL the real gateway process while it serves Telegram (the Bot API stub runs in this
test's process), restart it on the same home, and count what the chat received."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from sessiongate.testing.stubs import telegram as tg
from sg_process import GatewayProcess, is_drained, poll_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.torture


@pytest.fixture
async def bot_api() -> AsyncIterator[tuple[tg.BotApiStub, str]]:
    stub = tg.BotApiStub()
    async with tg.serve_stub(stub) as url:
        yield stub, url


def _gateway(tmp_path: Path, url: str, token: str, *, delay: float) -> GatewayProcess:
    config = tmp_path / "config.yaml"
    config.write_text(
        "platforms:\n"
        "  telegram:\n"
        f"    token: '{token}'\n"
        f"    base_url: '{url}'\n"
        "    poll_timeout_seconds: 1\n"
        "    allow_from: ['*']\n"
        "agent:\n"
        "  restart_drain_timeout: 1\n"
        f"  echo: {{delay_seconds: {delay}}}\n"
    )
    # At debug level, so the HTTP client's request lines (each getUpdates) are in the log.
    return GatewayProcess(
        tmp_path / "home", extra_args=("--config", str(config), "--log-level", "debug")
    )


def _send_state(home: Path) -> list[str]:
    conn = sqlite3.connect(home / "sessions" / "state.db", timeout=30)
    try:
        return [r[0] for r in conn.execute("SELECT state FROM platform_sends")]
    finally:
        conn.close()


async def test_a_kill_between_accepting_an_update_and_replying_still_replies_once(
    tmp_path, bot_api
):
    stub, url = bot_api
    gateway = _gateway(tmp_path, url, stub.token, delay=1.5)
    try:
        await gateway.start()
        update_id = stub.push_message("survive this")
        # Accepted: the poller confirmed the update (asked for the ones after it), and the
        # echo agent is inside its delay, so nothing has been sent yet.
        await poll_until(lambda: stub.confirmed_offset > update_id)
        assert stub.texts() == []
        assert await gateway.kill() == -9
        # Telegram would not send it again (it was confirmed); deliver it anyway, as a poller
        # that died before confirming would see it.
        stub.redeliver(update_id)
        await gateway.start()
        await poll_until(lambda: len(stub.texts()) >= 1)
        await poll_until(lambda: is_drained(gateway.home / "sessions" / "state.db"))
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
    assert stub.texts() == ["echo: survive this"]
    log = gateway.log_text()
    assert "getUpdates" in log  # the HTTP client's request lines are there...
    assert stub.token not in log  # ...without the bot token in their URLs


async def test_a_kill_while_the_reply_is_in_flight_is_not_posted_twice(tmp_path, bot_api):
    stub, url = bot_api
    # Telegram takes the message but the answer never makes it back before the kill.
    stub.fail("sendMessage", tg.Fault(200, "late", delay_seconds=4))
    gateway = _gateway(tmp_path, url, stub.token, delay=0)
    try:
        await gateway.start()
        stub.push_message("in flight")
        await poll_until(lambda: len(stub.texts()) == 1)
        assert await gateway.kill() == -9
        await gateway.start()
        # The restart sends the journalled reply again; the adapter sees it was in flight.
        await poll_until(lambda: "unconfirmed" in _send_state(gateway.home))
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
    assert stub.texts() == ["echo: in flight"]
