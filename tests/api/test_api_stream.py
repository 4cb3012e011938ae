"""Streaming over HTTP: a real uvicorn server on 127.0.0.1 and a real SSE client (httpx).

`stream: true` answers `text/event-stream` (accepted, delta, message, then done or error); a
client that goes away mid-stream leaves its turn running to the end; `GET /v1/turns/{id}`
follows a turn sent with `wait: false`; in `interrupt` mode a second send interrupts the
first, whose partial text stays in the transcript marked interrupted.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import pytest

from sessiongate import GatewayConfig
from sessiongate.agents import build_agent_factory
from sessiongate.api.app import create_app
from sessiongate.api.server import build_server
from sessiongate.core.config import PlatformConfig
from sessiongate.core.turn_events import StreamRetry, TextDelta
from sessiongate.gateway import GatewayRunner
from sessiongate.testing.agents import GatedAgent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


# A safety net so a broken stream fails the test instead of hanging it; never a timing check.
GUARD_SECONDS = 10.0


async def sse(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of a server-sent-events response, as they arrive."""
    name, data = None, []
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif not line and name is not None:
            yield name, json.loads("\n".join(data))
            name, data = None, []


async def collect(
    source: httpx.Response | AsyncIterator[tuple[str, dict[str, Any]]],
) -> list[tuple[str, dict[str, Any]]]:
    """Every event to the end (of a response, or of a stream already being read)."""
    events = sse(source) if isinstance(source, httpx.Response) else source
    async with asyncio.timeout(GUARD_SECONDS):
        return [event async for event in events]


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig()


@pytest.fixture
async def serve(store, config, tmp_path, clock):
    """Start a runner (echo agent, or `agent`) and a real server; yields an httpx client."""
    running: list[tuple[GatewayRunner, Any, asyncio.Task[None]]] = []

    async def start(agent: Any = None) -> tuple[GatewayRunner, httpx.AsyncClient]:
        factory = build_agent_factory(config) if agent is None else (lambda key: agent)
        runner = GatewayRunner(
            store, config, home=tmp_path / "home", clock=clock, agent_factory=factory
        )
        await runner.start()
        ready = asyncio.Event()
        server = build_server(
            create_app(runner, store, config),
            host="127.0.0.1",
            port=0,
            graceful_timeout=5,
            install_signal_handlers=False,
            on_ready=lambda host, port: ready.set(),
        )
        serving = asyncio.create_task(server.serve())
        async with asyncio.timeout(GUARD_SECONDS):
            await ready.wait()
        running.append((runner, server, serving))
        host, port = server.bound
        return runner, httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=GUARD_SECONDS)

    yield start
    for runner, server, serving in running:
        server.should_exit = True
        await serving
        await runner.stop()


async def test_a_streamed_reply_arrives_as_accepted_deltas_messages_and_done(serve, store):
    _, http = await serve()
    async with (
        http,
        http.stream(
            "POST", "/v1/messages", json={"chat_id": "alice", "text": "hello there", "stream": True}
        ) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = await collect(response)
    names = [name for name, _ in events]
    assert names[0] == "accepted"
    assert names[-1] == "done"
    accepted, done = events[0][1], events[-1][1]
    deltas = [data["text"] for name, data in events if name == "delta"]
    assert len(deltas) == 8  # the echo agent streams each reply in 8 pieces
    assert "".join(deltas) == "echo: hello there"
    assert done == {
        "status": "replied",
        "reply": "echo: hello there",
        "turn_id": accepted["turn_id"],
    }
    messages = [data for name, data in events if name == "message"]
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "hello there"),
        ("assistant", "echo: hello there"),
    ]
    # Each message event is the message as stored: its id is the transcript entry's.
    transcript = store.load_events(accepted["session_id"])
    stored = {e["id"]: (e["role"], e["content"]) for e in transcript if e["type"] == "message"}
    assert {m["id"]: (m["role"], m["content"]) for m in messages} == stored
    assert accepted["session_key"] == store.lookup_by_session_id(accepted["session_id"]).session_key


async def test_a_session_addressed_by_key_streams_too(serve, store):
    _, http = await serve()
    async with http:
        first = await http.post("/v1/messages", json={"chat_id": "bob", "text": "one"})
        key = first.json()["session_key"]
        async with http.stream(
            "POST",
            f"/v1/sessions/{quote(key, safe='')}/messages",
            json={"text": "two", "stream": True},
        ) as response:
            events = await collect(response)
    assert events[0] == ("accepted", events[0][1])
    assert events[0][1]["session_key"] == key
    assert events[-1][1]["reply"] == "echo: two"


async def test_a_client_that_disconnects_mid_stream_leaves_the_turn_to_finish(serve, store):
    agent = GatedAgent()
    gate = agent.gate(1)
    runner, http = await serve(agent)
    async with http:
        async with http.stream(
            "POST", "/v1/messages", json={"chat_id": "carol", "text": "go", "stream": True}
        ) as response:
            stream = sse(response)
            accepted = await anext(stream)
            assert accepted[0] == "accepted"
            turn_id = accepted[1]["turn_id"]
            while (event := await anext(stream))[0] != "delta":
                pass
            assert event[1] == {"text": "par"}
        # The response is closed: the client is gone. The turn goes on when the agent does.
        gate.set()
        async with asyncio.timeout(GUARD_SECONDS):
            await runner.wait_idle()
        turn = await http.get(f"/v1/turns/{turn_id}")
    assert turn.status_code == 200
    body = turn.json()
    assert (body["state"], body["reply"], body["error"]) == ("delivered", "partial reply", None)
    entry = store.get_session(body["session_key"])
    assert [(m["role"], m["content"]) for m in store.load_transcript(entry.session_id)] == [
        ("user", "go"),
        ("assistant", "partial reply"),
    ]


async def test_a_turn_that_fails_ends_its_stream_with_an_error_event(serve):
    agent = GatedAgent()
    agent.fail = True
    _, http = await serve(agent)
    async with (
        http,
        http.stream(
            "POST", "/v1/messages", json={"chat_id": "dan", "text": "hi", "stream": True}
        ) as response,
    ):
        events = await collect(response)
    assert events[-1] == (
        "error",
        {"code": "turn_failed", "message": "The agent is misconfigured."},
    )


async def test_a_refused_stream_is_an_ordinary_json_error(serve, config):
    config.platforms["api"] = PlatformConfig(allow_from=["someone-else"])
    _, http = await serve()
    async with http:
        response = await http.post(
            "/v1/messages",
            json={"chat_id": "eve", "user_id": "eve", "text": "hi", "stream": True},
        )
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "unauthorized"


async def test_a_command_sent_with_stream_ends_at_once_with_its_answer(serve):
    _, http = await serve()
    async with (
        http,
        http.stream(
            "POST", "/v1/messages", json={"chat_id": "fay", "text": "/help", "stream": True}
        ) as response,
    ):
        events = await collect(response)
    assert [name for name, _ in events] == ["accepted", "done"]
    assert events[-1][1]["status"] == "command"
    assert "/stop" in events[-1][1]["reply"]


async def test_wait_false_answers_a_turn_id_that_get_turn_follows(serve):
    agent = GatedAgent()
    gate = agent.gate(0)
    runner, http = await serve(agent)
    async with http:
        sent = await http.post(
            "/v1/messages", json={"chat_id": "gus", "text": "first", "wait": False}
        )
        assert sent.status_code == 202
        turn_id = sent.json()["turn_id"]
        assert isinstance(turn_id, int)
        running = await http.get(f"/v1/turns/{turn_id}")
        assert running.json()["state"] == "running"
        gate.set()
        async with asyncio.timeout(GUARD_SECONDS):
            await runner.wait_idle()
        done = await http.get(f"/v1/turns/{turn_id}")
        missing = await http.get("/v1/turns/999999")
        bad = await http.get("/v1/turns/0")
    assert done.json()["state"] == "delivered"
    assert done.json()["reply"] == "partial reply"
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "turn_not_found"
    assert bad.status_code == 422


async def test_a_message_queued_behind_a_busy_lane_polls_as_queued(serve, config):
    config.busy_input_mode = "queue"
    agent = GatedAgent()
    gate = agent.gate(0)
    runner, http = await serve(agent)
    async with http:
        first = await http.post("/v1/messages", json={"chat_id": "hal", "text": "a", "wait": False})
        second = await http.post(
            "/v1/messages", json={"chat_id": "hal", "text": "b", "wait": False}
        )
        second_id = second.json()["turn_id"]
        assert second_id != first.json()["turn_id"]
        waiting = await http.get(f"/v1/turns/{second_id}")
        assert waiting.json()["state"] == "queued"
        gate.set()
        async with asyncio.timeout(GUARD_SECONDS):
            await runner.wait_idle()
        finished = await http.get(f"/v1/turns/{second_id}")
    assert finished.json()["state"] == "delivered"


async def test_in_interrupt_mode_a_second_send_interrupts_the_first_and_keeps_what_was_seen(
    serve, store
):
    agent = GatedAgent()
    agent.gate(2)  # the first reply stops after "partial": the second send cuts it there
    runner, http = await serve(agent)
    async with http:
        async with http.stream(
            "POST", "/v1/messages", json={"chat_id": "ivy", "text": "first", "stream": True}
        ) as response:
            stream = sse(response)
            accepted = (await anext(stream))[1]
            async with asyncio.timeout(GUARD_SECONDS):
                assert await agent.shown.get() == "par"
                assert await agent.shown.get() == "tial"
            agent.gates.clear()  # the next turn runs straight through
            second = await http.post(
                "/v1/messages", json={"chat_id": "ivy", "text": "second", "wait": False}
            )
            assert second.status_code == 202
            rest = await collect(stream)
        assert rest[-1][0] == "done"
        assert rest[-1][1]["status"] == "interrupted"
        async with asyncio.timeout(GUARD_SECONDS):
            await runner.wait_idle()
        first_turn = (await http.get(f"/v1/turns/{accepted['turn_id']}")).json()
    assert first_turn["state"] == "interrupted"
    messages = store.load_transcript(accepted["session_id"])
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "first"),
        ("assistant", "partial"),
        ("user", "second"),
        ("assistant", "partial reply"),
    ]
    assert messages[1]["metadata"]["interrupted"] == "interrupt"


async def test_stop_mid_stream_keeps_the_partial_text_marked_interrupted(serve, store):
    agent = GatedAgent()
    agent.gate(1)
    _, http = await serve(agent)
    async with (
        http,
        http.stream(
            "POST", "/v1/messages", json={"chat_id": "jo", "text": "long job", "stream": True}
        ) as response,
    ):
        stream = sse(response)
        accepted = (await anext(stream))[1]
        async with asyncio.timeout(GUARD_SECONDS):
            assert await agent.shown.get() == "par"
        stop = await http.post("/v1/messages", json={"chat_id": "jo", "text": "/stop"})
        assert stop.json()["status"] == "command"
        rest = await collect(stream)
    assert rest[-1] == (
        "done",
        {"status": "interrupted", "reply": None, "turn_id": accepted["turn_id"]},
    )
    messages = store.load_transcript(accepted["session_id"])
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "long job"),
        ("assistant", "par"),
    ]
    assert messages[1]["metadata"]["interrupted"] == "stop"


def retrying_agent() -> GatedAgent:
    """Streams "Hel", "lo wor", then its model call is retried: "Hel", "lo" (a gate before
    the last part)."""
    agent = GatedAgent()
    agent.parts = ["Hel", "lo wor", StreamRetry(attempt=2, reason="agent_unavailable"), "Hel", "lo"]
    agent.reply = "Hello"
    agent.gate(4)
    return agent


async def test_a_retried_stream_restarts_its_text_on_sse_and_in_get_turn(serve, store):
    agent = retrying_agent()
    _, http = await serve(agent)
    async with (
        http,
        http.stream(
            "POST", "/v1/messages", json={"chat_id": "kim", "text": "hi", "stream": True}
        ) as response,
    ):
        stream = sse(response)
        accepted = (await anext(stream))[1]
        seen = []
        while (event := await anext(stream))[0] != "retry":
            seen.append(event)
        assert event[1] == {"attempt": 2, "reason": "agent_unavailable"}
        async with asyncio.timeout(GUARD_SECONDS):
            for part in ["Hel", "lo wor", "Hel"]:
                assert await agent.shown.get() == part
        # While the turn runs: the text being generated started over, once.
        live = (await http.get(f"/v1/turns/{accepted['turn_id']}")).json()
        assert (live["state"], live["partial"], live["retries"]) == ("running", "Hel", 1)
        agent.gates[4].set()
        rest = await collect(stream)
        done = (await http.get(f"/v1/turns/{accepted['turn_id']}")).json()
    # The deltas after the retry are the whole reply; the ones before it are void.
    after = [data["text"] for name, data in rest if name == "delta"]
    assert "".join(after) == "Hello"
    assert rest[-1][1]["reply"] == "Hello"
    assert (done["partial"], done["retries"]) == (None, None)  # not running any more
    messages = store.load_transcript(accepted["session_id"])
    assert [(m["role"], m["content"]) for m in messages] == [("user", "hi"), ("assistant", "Hello")]


async def test_a_stop_after_a_retry_keeps_only_the_new_attempts_text(serve, store):
    agent = retrying_agent()
    runner, http = await serve(agent)
    async with http:
        sent = await http.post("/v1/messages", json={"chat_id": "lee", "text": "hi", "wait": False})
        async with asyncio.timeout(GUARD_SECONDS):
            for part in ["Hel", "lo wor", "Hel"]:
                assert await agent.shown.get() == part
        await http.post("/v1/messages", json={"chat_id": "lee", "text": "/stop"})
        async with asyncio.timeout(GUARD_SECONDS):
            await runner.wait_idle()
        turn = (await http.get(f"/v1/turns/{sent.json()['turn_id']}")).json()
    assert turn["state"] == "interrupted"
    messages = store.load_transcript(turn["session_id"])
    # What the user saw of the message in progress is the new attempt's text only.
    assert [(m["role"], m["content"]) for m in messages] == [("user", "hi"), ("assistant", "Hel")]


async def test_events_ready_together_leave_in_one_write():
    from sessiongate.api.sse import turn_events
    from sessiongate.gateway.messages import Receipt
    from sessiongate.gateway.streams import StreamedMessage, TurnWatch

    watch = TurnWatch()
    accepted = Receipt("k", "s", "queued", None, 7)
    chunks = turn_events(accepted, watch)
    # What the turn publishes before the stream first writes goes out with `accepted`.
    watch.push(StreamedMessage({"id": 1, "role": "user", "content": "hi"}))
    watch.push(TextDelta("Hel"))
    watch.push(TextDelta("lo wor"))
    watch.push(StreamRetry(attempt=2, reason="agent_unavailable"))  # drops the two, unsent
    watch.push(TextDelta("Hel"))
    first = await anext(chunks)
    assert [line for line in first.splitlines() if line.startswith("event:")] == [
        "event: accepted",
        "event: message",
        "event: retry",
        "event: delta",
    ]
    watch.push(TextDelta("lo"))
    watch.finish(Receipt("k", "s", "replied", "Hello", 7))
    last = await anext(chunks)
    assert [line for line in last.splitlines() if line.startswith("event:")] == [
        "event: delta",
        "event: done",
    ]
    assert [chunk async for chunk in chunks] == []
