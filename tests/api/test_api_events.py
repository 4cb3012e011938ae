"""`GET /v1/events` end to end: a real uvicorn server on 127.0.0.1 and httpx streaming."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
import pytest
from tests.api.conftest import TOKEN
from tests.sse import SSEReader

from sessiongate import GatewayConfig
from sessiongate.api.app import create_app
from sessiongate.api.server import build_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


@pytest.fixture
def config(request: pytest.FixtureRequest) -> GatewayConfig:
    """SQLite, or a PostgreSQL schema for the tests marked `on_both_backends`."""
    if getattr(request, "param", "sqlite") == "sqlite":
        return GatewayConfig(api={"token": TOKEN})
    schema = request.getfixturevalue("pg_schema")
    return GatewayConfig(api={"token": TOKEN}, store={"url": schema.url})  # type: ignore[arg-type]


on_both_backends = pytest.mark.parametrize("config", ["sqlite", "postgres"], indirect=True)


@contextlib.asynccontextmanager
async def served(runner, store, config) -> AsyncIterator[httpx.AsyncClient]:
    await runner.start()
    server = build_server(
        create_app(runner, store, config),
        host="127.0.0.1",
        port=0,
        graceful_timeout=5,
        install_signal_handlers=False,
        on_shutdown=runner.stop,
    )
    serving = asyncio.create_task(server.serve())
    try:
        while server.bound is None:
            assert not serving.done(), "the server did not start"
            await asyncio.sleep(0.01)
        host, port = server.bound
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(
            base_url=f"http://{host}:{port}", headers=headers, timeout=30
        ) as http:
            yield http
    finally:
        server.should_exit = True
        await serving
        await runner.stop()


@contextlib.asynccontextmanager
async def feed(http: httpx.AsyncClient, **params: str) -> AsyncIterator[SSEReader]:
    headers = {}
    if "last_event_id" in params:
        headers["Last-Event-ID"] = params.pop("last_event_id")
    async with http.stream("GET", "/v1/events", params=params, headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        yield SSEReader(response)


@on_both_backends
async def test_a_turn_shows_as_session_transcript_turn_and_queue_events(runner, store, config):
    async with served(runner, store, config) as http, feed(http) as events:
        sent = await http.post("/v1/messages", json={"chat_id": "alice", "text": "hi"})
        assert sent.status_code == 200, sent.text
        key, session_id = sent.json()["session_key"], sent.json()["session_id"]
        seen = await events.until("turn.finished")
        kinds = [e.event for e in seen]
        assert kinds[0] == "session.created"
        assert "turn.started" in kinds
        appended = [e.data for e in seen if e.event == "transcript.appended"]
        assert [a["entry_type"] for a in appended] == ["message", "message"]
        assert all(a["session_key"] == key and a["session_id"] == session_id for a in appended)
        assert seen[-1].data["status"] == "replied"
        assert seen[-1].data["turn_id"] == sent.json()["turn_id"]
        ids = [e.id for e in seen]
        assert all(e.id == e.data["id"] for e in seen)
        assert len(set(ids)) == len(ids)


@on_both_backends
async def test_archive_and_delete_are_their_own_events(runner, store, config):
    async with served(runner, store, config) as http:
        sent = (await http.post("/v1/messages", json={"chat_id": "bob", "text": "x"})).json()
        path = f"/v1/sessions/{quote(sent['session_key'], safe='')}"
        async with feed(http) as events:
            patched = await http.patch(
                path, json={"archived": True, "expected_session_id": sent["session_id"]}
            )
            assert patched.status_code == 200, patched.text
            archived = await events.next()
            assert archived.event == "session.archived"
            assert archived.data["session_key"] == sent["session_key"]
            assert (await http.delete(path)).status_code in (200, 204)
            deleted = await events.until("session.deleted")
            assert [e.event for e in deleted] == ["session.deleted"]


async def test_the_session_key_filter_keeps_only_that_session(runner, store, config):
    async with served(runner, store, config) as http:
        first = (await http.post("/v1/messages", json={"chat_id": "carol", "text": "a"})).json()
        key = first["session_key"]
        async with feed(http, session_key=key) as events:
            await http.post("/v1/messages", json={"chat_id": "dave", "text": "b"})
            await http.post("/v1/messages", json={"chat_id": "carol", "text": "c"})
            seen = await events.until("turn.finished")
            assert {e.data["session_key"] for e in seen} == {key}


async def test_a_reconnect_with_last_event_id_gets_what_it_missed(runner, store, config):
    async with served(runner, store, config) as http:
        async with feed(http) as events:
            await http.post("/v1/messages", json={"chat_id": "erin", "text": "one"})
            last = (await events.until("turn.finished"))[-1]
        # Disconnected: these happen while nobody listens.
        missed = (await http.post("/v1/messages", json={"chat_id": "erin", "text": "two"})).json()
        async with feed(http, last_event_id=last.id or "") as events:
            replayed = await events.until("turn.finished")
            assert replayed[-1].data["turn_id"] == missed["turn_id"]
            assert all(e.event != "reset" for e in replayed)


async def test_an_unknown_last_event_id_gets_reset_then_live_events(runner, store, config):
    async with (
        served(runner, store, config) as http,
        feed(http, last_event_id="0123456789ab-5") as events,
    ):
        reset = await events.next()
        assert reset.event == "reset"
        assert reset.data["reason"] == "restarted"
        await http.post("/v1/messages", json={"chat_id": "fay", "text": "after"})
        assert (await events.until("turn.finished"))[-1].data["status"] == "replied"


@pytest.mark.parametrize("sequence", ["\u00b2", "1\u00b2", "\u00b9\u00b2"])
async def test_a_last_event_id_of_this_epoch_with_odd_digits_gets_reset(
    runner, store, config, sequence
):
    # `²` passes `str.isdigit` and fails `int`; on the wire it is one latin-1 byte.
    last_event_id = f"{runner.feed.epoch}-{sequence}".encode("latin-1")
    async with (
        served(runner, store, config) as http,
        http.stream("GET", "/v1/events", headers={"Last-Event-ID": last_event_id}) as response,
    ):
        assert response.status_code == 200
        reset = await SSEReader(response).next()
        assert reset.event == "reset"
        assert reset.data["reason"] == "unknown"


async def test_events_need_the_token(runner, store, config):
    async with served(runner, store, config) as http:
        response = await http.get("/v1/events", headers={"Authorization": "Bearer wrong"})
        assert response.status_code == 401
        assert response.json()["error"]["code"]
        bad = await http.get("/v1/events", params={"session_key": "a\x00b"})
        assert bad.status_code == 400
        assert bad.json()["error"]["code"]


@pytest.mark.parametrize(
    "config", [GatewayConfig(api={"token": TOKEN}, feed={"max_lag_events": 1000})]
)
async def test_a_client_that_stops_reading_never_blocks_turns_and_gets_reset(runner, store, config):
    async with served(runner, store, config) as http, feed(http) as stalled:
        # More than the socket buffers hold, while the client reads nothing.
        for chunk in range(100):
            for i in range(1000):
                runner.feed.publish("queue.changed", {"session_key": f"k{chunk}", "depth": i})
            await asyncio.sleep(0)
        for i in range(5):
            sent = await http.post("/v1/messages", json={"chat_id": "busy", "text": f"t{i}"})
            assert sent.status_code == 200, sent.text
            assert sent.json()["status"] == "replied"
        seen = await stalled.until("reset", guard=120)
        assert seen[-1].data["reason"] == "lagging"
        assert len(seen) < 100_000  # it skipped ahead instead of reading everything
        # From the reset on it is live again.
        last = await http.post("/v1/messages", json={"chat_id": "busy", "text": "after"})
        await stalled.until("turn.finished", guard=60, turn_id=last.json()["turn_id"])


@pytest.mark.parametrize(
    "config",
    [
        GatewayConfig(
            api={"token": TOKEN}, busy_input_mode="queue", agent={"echo": {"delay_seconds": 0.3}}
        )
    ],
)
async def test_a_message_waiting_on_a_busy_lane_shows_as_queue_changed(runner, store, config):
    async with served(runner, store, config) as http, feed(http) as events:
        first = await http.post("/v1/messages", json={"chat_id": "q", "text": "1", "wait": False})
        assert first.status_code == 202, first.text
        await events.until("turn.started")
        second = await http.post("/v1/messages", json={"chat_id": "q", "text": "2", "wait": False})
        assert second.status_code == 202, second.text
        waiting = await events.until("queue.changed")
        assert waiting[-1].data["depth"] == 1
        assert waiting[-1].data["session_key"] == second.json()["session_key"]
        claimed = await events.until("queue.changed")
        assert claimed[-1].data["depth"] == 0
        assert [e.event for e in claimed].count("turn.finished") == 1  # the first turn's
        assert (await events.until("turn.finished"))[-1].data["status"] == "replied"
