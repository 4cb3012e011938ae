"""SIGTERM with an upload stalled halfway: the gateway drops it at once, still drains the turn
that runs, and exits without waiting out uvicorn's graceful timeout.

A client sends its headers with `Content-Length: 100` and 11 bytes of body, then nothing. Were
the request left waiting for the rest, the shutdown would sit out the whole graceful timeout
(`agent.restart_drain_timeout`, 60 s here) and uvicorn would then cancel the request into a
plain-text 500 with a traceback in the log. The body timeout is set far beyond the test too, so
only the shutdown can end that request.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx

from live_server import raw_connection, read_response, request_head
from sg_process import GatewayProcess, clean_env, poll_until, read_turn_states

if TYPE_CHECKING:
    from pathlib import Path

# Hang guards, far below the 60 s graceful timeout a held shutdown would take; never timing
# assertions.
GUARD_SECONDS = 30.0


async def test_sigterm_drops_a_stalled_upload_at_once_and_still_drains_the_running_turn(
    tmp_path: Path,
):
    home = tmp_path / "home"
    db = home / "sessions" / "state.db"
    env = clean_env(
        SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="3",
        SESSIONGATE_AGENT__RESTART_DRAIN_TIMEOUT="60",
        SESSIONGATE_API__BODY_TIMEOUT_SECONDS="600",
    )
    gateway = GatewayProcess(home, env=env)
    try:
        url = await gateway.start()
        address = urlsplit(url)
        assert address.hostname is not None
        assert address.port is not None
        async with (
            raw_connection(address.hostname, address.port) as (reader, writer),
            httpx.AsyncClient(timeout=GUARD_SECONDS) as client,
        ):
            headers = {"Content-Type": "application/json", "Content-Length": "100"}
            writer.write(request_head("POST", "/v1/messages", headers) + b'{"chat_id":')
            await writer.drain()
            running = asyncio.ensure_future(
                client.post(f"{url}/v1/messages", json={"chat_id": "r", "text": "slow turn"})
            )
            await poll_until(lambda: read_turn_states(db).get("running", 0) == 1)
            gateway.signal(15)
            dropped = await read_response(reader)
            reply = await running
            code = await gateway.wait_exit(guard=GUARD_SECONDS)
    finally:
        await gateway.aclose()
    assert code == 0
    # The stalled upload: a JSON answer, not a plain-text 500.
    assert dropped.status == 503
    assert dropped.headers["content-type"] == "application/json"
    assert dropped.json()["error"]["code"] == "shutting_down"
    # The running turn was drained, not cut off.
    assert reply.status_code == 200, reply.text
    assert reply.json()["reply"] == "echo: slow turn"
    assert read_turn_states(db).get("running", 0) == 0
    log = gateway.log_text()
    assert "Traceback" not in log
    assert "graceful shutdown exceeded" not in log
    assert "error" not in {json.loads(line)["level"] for line in log.splitlines() if line}
