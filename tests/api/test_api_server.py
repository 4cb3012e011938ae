"""End to end: a real uvicorn server on 127.0.0.1 (a free port) and a real HTTP client."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

import httpx
import pytest

from sessiongate import GatewayConfig
from sessiongate.api.app import create_app
from sessiongate.api.server import build_server


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(api={"max_body_bytes": 4096})


async def test_a_real_server_answers_and_shuts_down_cleanly(store, config, runner):
    await runner.start()
    try:
        app = create_app(runner, store, config)
        ready = asyncio.Event()
        server = build_server(
            app,
            host="127.0.0.1",
            port=0,
            graceful_timeout=5,
            install_signal_handlers=False,
            on_ready=lambda host, port: ready.set(),
        )
        serving = asyncio.create_task(server.serve())
        waiting = asyncio.create_task(ready.wait())
        await asyncio.wait({serving, waiting}, return_when=asyncio.FIRST_COMPLETED)
        assert server.bound is not None, "the server did not start"
        host, port = server.bound
        async with httpx.AsyncClient(base_url=f"http://{host}:{port}") as http:
            health = await http.get("/healthz")
            assert health.json()["status"] == "ok"
            sent = await http.post("/v1/messages", json={"chat_id": "a:b/c", "text": "over http"})
            assert sent.status_code == 200, sent.text
            assert sent.json()["reply"] == "echo: over http"
            key = sent.json()["session_key"]
            row = await http.get(f"/v1/sessions/{quote(key, safe='')}")
            assert row.status_code == 200, row.text
            assert row.json()["session_key"] == key

            async def chunks():
                for _ in range(16):
                    yield b" " * 1024

            big = await http.post(
                "/v1/messages", content=chunks(), headers={"Content-Type": "application/json"}
            )
            assert big.status_code == 413
            assert big.json()["error"]["code"] == "payload_too_large"
            declared = await http.post(
                "/v1/messages",
                content=b" " * 8192,
                headers={"Content-Type": "application/json"},
            )
            assert declared.status_code == 413
        server.should_exit = True
        await serving
        waiting.cancel()
    finally:
        await runner.stop()
    assert store.get_session(key) is not None


@pytest.mark.parametrize("freeze", [False, True])
async def test_a_server_that_owns_its_process_freezes_the_heap_once_it_listens(
    store, config, runner, freeze
):
    import gc

    from live_server import serving

    await runner.start()
    gc.unfreeze()
    try:
        async with serving(create_app(runner, store, config), freeze_heap=freeze):
            assert (gc.get_freeze_count() > 0) is freeze
    finally:
        gc.unfreeze()  # the rest of the test run collects as before
        await runner.stop()
