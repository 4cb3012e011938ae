"""SIGKILL the real gateway process while it serves Matrix (the homeserver stub runs in this
test's process), restart it on the same home, and count what the room received."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from sessiongate.testing.stubs import matrix as mx
from sg_process import GatewayProcess, is_drained, poll_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.torture

ROOM = f"!dm:{mx.SERVER}"
ALICE = f"@alice:{mx.SERVER}"


@pytest.fixture
async def homeserver() -> AsyncIterator[tuple[mx.HomeserverStub, str]]:
    stub = mx.HomeserverStub()
    stub.add_room(ROOM, [ALICE], direct=True)
    async with mx.serve_stub(stub) as url:
        yield stub, url


def _gateway(tmp_path: Path, url: str, token: str, *, delay: float) -> GatewayProcess:
    config = tmp_path / "config.yaml"
    config.write_text(
        "platforms:\n"
        "  matrix:\n"
        f"    homeserver: '{url}'\n"
        f"    access_token: '{token}'\n"
        "    sync_timeout_seconds: 1\n"
        "    allow_from: ['*']\n"
        "agent:\n"
        "  restart_drain_timeout: 1\n"
        f"  echo: {{delay_seconds: {delay}}}\n"
    )
    return GatewayProcess(tmp_path / "home", extra_args=("--config", str(config)))


async def test_a_kill_after_since_moved_past_a_message_still_answers_it_once(tmp_path, homeserver):
    stub, url = homeserver
    gateway = _gateway(tmp_path, url, stub.token, delay=1.5)
    try:
        await gateway.start()
        stub.push_text(ROOM, ALICE, "survive this")
        position = len(stub.log_entries)
        # Accepted: the next sync asked from a `since` past the message (it was stored only
        # after the gateway took it), and the echo agent is inside its delay.
        await poll_until(lambda: stub.confirmed >= position)
        assert stub.texts(ROOM) == []
        assert await gateway.kill() == -9
        await gateway.start()
        await poll_until(lambda: len(stub.texts(ROOM)) >= 1)
        await poll_until(lambda: is_drained(gateway.home / "sessions" / "state.db"))
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
    assert stub.texts(ROOM) == ["echo: survive this"]
    assert stub.token not in gateway.log_text()


async def test_a_kill_while_the_reply_is_in_flight_is_not_posted_twice(tmp_path, homeserver):
    stub, url = homeserver
    # The homeserver takes the reply but its answer never makes it back before the kill.
    stub.fail("send", mx.Fault(200, "", delay_seconds=3))
    gateway = _gateway(tmp_path, url, stub.token, delay=0)
    try:
        await gateway.start()
        stub.push_text(ROOM, ALICE, "in flight")
        await poll_until(lambda: len(stub.texts(ROOM)) == 1)
        assert await gateway.kill() == -9
        await gateway.start()
        # The restart sends the journalled reply again; the adapter sees it was in flight.
        await poll_until(lambda: "unconfirmed" in _send_states(gateway.home))
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
    assert stub.texts(ROOM) == ["echo: in flight"]
    assert stub.calls["send"] == 1


def _send_states(home: Path) -> list[str]:
    conn = sqlite3.connect(home / "sessions" / "state.db", timeout=30)
    try:
        return [r[0] for r in conn.execute("SELECT state FROM platform_sends")]
    finally:
        conn.close()
