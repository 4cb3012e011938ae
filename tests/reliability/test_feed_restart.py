"""The event feed across a real gateway restart: a reconnect with an id from before the restart
gets `reset`, never a replay of someone else's events under reused ids."""

from __future__ import annotations

import signal

import httpx
import pytest
from tests.reliability.sg_process import GatewayProcess
from tests.sse import SSEReader


async def _one_turn(http: httpx.AsyncClient, url: str, text: str) -> tuple[list, dict]:
    async with http.stream("GET", f"{url}/v1/events") as response:
        assert response.status_code == 200
        events = SSEReader(response)
        sent = await http.post(f"{url}/v1/messages", json={"chat_id": "ops", "text": text})
        assert sent.status_code == 200, sent.text
        return await events.until("turn.finished"), sent.json()


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
async def test_an_id_from_before_a_restart_gets_reset(tmp_path, stop):
    gateway = GatewayProcess(tmp_path / "home")
    try:
        url = await gateway.start()
        async with httpx.AsyncClient(timeout=30) as http:
            before, _ = await _one_turn(http, url, "before")
            last_id = before[-1].id
            assert last_id is not None
            if stop == signal.SIGTERM:
                # The drain ends open streams, so the graceful stop does not wait on them.
                async with http.stream("GET", f"{url}/v1/events") as response:
                    reader = SSEReader(response)
                    gateway.signal(signal.SIGTERM)
                    with pytest.raises((EOFError, httpx.RemoteProtocolError)):
                        await reader.next()
                assert await gateway.wait_exit() == 0
            else:
                await gateway.kill()
            url = await gateway.start()
            headers = {"Last-Event-ID": last_id}
            async with http.stream("GET", f"{url}/v1/events", headers=headers) as response:
                events = SSEReader(response)
                reset = await events.next()
                assert reset.event == "reset"
                assert reset.data["reason"] == "restarted"
                sent = await http.post(
                    f"{url}/v1/messages", json={"chat_id": "ops", "text": "after"}
                )
                after = await events.until("turn.finished", turn_id=sent.json()["turn_id"])
            old_ids = {e.id for e in before}
            assert not old_ids & {e.id for e in after}
            assert all(e.data["session_key"] == before[0].data["session_key"] for e in after)
    finally:
        await gateway.aclose()
