"""An incognito session in a real gateway process, SIGKILLed mid-turn: nothing of it is on
disk before or after, the durable conversation beside it survives, and the restarted gateway
refuses its key instead of starting a new session on disk."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx

from sg_process import GatewayProcess, clean_env, count_rows

if TYPE_CHECKING:
    from pathlib import Path

GUARD_SECONDS = 60.0
MARK = b"okapi-"


def _on_disk(home: Path) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_file() and MARK in p.read_bytes()]


async def test_a_killed_gateway_leaves_no_trace_of_an_incognito_session(tmp_path):
    home = tmp_path / "home"
    # Slow enough that the kill lands while the incognito turn still runs.
    gateway = GatewayProcess(home, env=clean_env(SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="0.5"))
    try:
        url = await gateway.start()
        async with httpx.AsyncClient(base_url=url, timeout=GUARD_SECONDS) as client:
            durable = await client.post("/v1/messages", json={"chat_id": "kept", "text": "kept"})
            assert durable.json()["status"] == "replied"
            created = await client.post("/v1/sessions", json={"chat_id": "me", "incognito": True})
            assert created.status_code == 201
            key = created.json()["session_key"]
            path = f"/v1/sessions/{quote(key, safe='')}"
            first = await client.post(f"{path}/messages", json={"text": "okapi-1"})
            assert first.json()["reply"] == "echo: okapi-1"
            running = asyncio.ensure_future(
                client.post(f"{path}/messages", json={"text": "okapi-2"})
            )
            queued = await client.post(f"{path}/messages", json={"text": "okapi-3", "wait": False})
            assert queued.status_code == 202
            assert _on_disk(home) == []
            await gateway.kill()
            running.cancel()
        url = await gateway.start()
        async with httpx.AsyncClient(base_url=url, timeout=GUARD_SECONDS) as client:
            refused = await client.post(f"{path}/messages", json={"text": "okapi-4"})
            assert refused.status_code == 404
            assert "ended when the gateway restarted" in refused.json()["error"]["message"]
            assert (await client.get(path)).status_code == 404
            listed = (await client.get("/v1/sessions")).json()["sessions"]
            assert [r["session_key"] for r in listed] == ["agent:main:api:dm:kept"]
            hidden = (await client.get("/v1/sessions", params={"incognito": True})).json()
            assert hidden["total"] == 0
        await gateway.terminate()
        assert _on_disk(home) == []
        db = home / "sessions" / "state.db"
        assert (count_rows(db, "inbox"), count_rows(db, "turns")) == (0, 1)
    finally:
        await gateway.aclose()
