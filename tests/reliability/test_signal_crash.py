"""SIGKILL the real gateway process while it serves Signal (the signal-cli stub runs in this
test's process), restart it on the same home, and count what the chat received."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from sessiongate.testing.stubs import signal as sg
from sg_process import GatewayProcess, is_drained, poll_until

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

pytestmark = pytest.mark.torture

ALICE = ("+15550000011", "a11ce000-0000-4000-8000-000000000011")


@pytest.fixture
async def daemon() -> AsyncIterator[tuple[sg.SignalCliStub, str]]:
    stub = sg.SignalCliStub()
    async with sg.serve_stub(stub) as url:
        yield stub, url


def _gateway(tmp_path: Path, url: str, account: str, *, delay: float) -> GatewayProcess:
    config = tmp_path / "config.yaml"
    config.write_text(
        "platforms:\n"
        "  signal:\n"
        f"    url: '{url}'\n"
        f"    account: '{account}'\n"
        "    allow_from: ['*']\n"
        "agent:\n"
        "  restart_drain_timeout: 1\n"
        f"  echo: {{delay_seconds: {delay}}}\n"
    )
    return GatewayProcess(tmp_path / "home", extra_args=("--config", str(config)))


def _cursor(home: Path, account: str) -> str | None:
    path = home / "sessions" / "state.db"
    if not path.exists():
        return None
    conn = sqlite3.connect(path, timeout=30)
    try:
        row = conn.execute(
            "SELECT cursor FROM platform_cursors WHERE platform = 'signal' AND account = ?",
            (account,),
        ).fetchone()
    finally:
        conn.close()
    return None if row is None else str(row[0])


def _message(text: str, stamp: int) -> dict[str, object]:
    return sg.data_envelope(text, number=ALICE[0], uuid=ALICE[1], timestamp=stamp, name="Alice")


async def test_a_kill_after_accepting_a_message_resumes_from_the_saved_position(tmp_path, daemon):
    stub, url = daemon
    gateway = _gateway(tmp_path, url, stub.account, delay=1.5)
    try:
        await gateway.start()
        await poll_until(lambda: stub.open_streams > 0)
        event = _message("survive this", 1767225600001)
        sse_id = stub.push(event)
        # Accepted: the position moved past it, and the echo agent is inside its delay.
        await poll_until(lambda: _cursor(gateway.home, stub.account) == sse_id)
        assert stub.texts() == []
        assert await gateway.kill() == -9
        stub.push(_message("while it was down", 1767225600002))
        await gateway.start()
        await poll_until(lambda: len(stub.texts()) >= 2)
        # Delivered again by a platform that lost track: still one answer.
        again = stub.push(event)
        await poll_until(lambda: _cursor(gateway.home, stub.account) == again)
        await poll_until(lambda: is_drained(gateway.home / "sessions" / "state.db"))
        assert await gateway.terminate() == 0
    finally:
        await gateway.aclose()
    assert sorted(stub.texts()) == ["echo: survive this", "echo: while it was down"]
    assert stub.resumed_from[-1] == sse_id  # resumed after it, not from the start
