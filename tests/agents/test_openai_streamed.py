"""End to end: the OpenAI-compatible agent in the streamed gateway, through the real SDK
against the streaming fake server, and over HTTP with a real SSE client. Each completed
message is durable the moment it completes (a tool sees its own call stored), deltas reach the
client as the model sends them, and the transcript holds each message once."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any
from unittest.mock import ANY
from urllib.parse import quote

import httpx

from fake_openai import Broken, Call, Calls, Reply
from live_server import serving
from sessiongate.api.app import create_app
from sessiongate.api.server import build_server
from sse import SSEReader

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

# A safety net so a broken stream fails the test instead of hanging it; never a timing check.
GUARD_SECONDS = 10.0


async def test_each_completed_message_is_stored_as_it_completes(make_gateway) -> None:
    gw = await make_gateway(tools=["sample_tools:stored_roles"])
    gw.server.script(Calls([Call("stored_roles", id="c1")]), Reply(["All ", "stored."]))
    receipt = await gw.say("alice", "check the store")
    assert receipt.reply == "All stored."
    # While the tool ran, the user message and the assistant's call were already on disk.
    [seen] = gw.tool_results(1)
    assert seen == ["user", "assistant"]
    entry = gw.store.get_session(gw.key("alice"))
    transcript = gw.store.load_transcript(entry.session_id)
    assert [(m["role"], m.get("tool_call_id")) for m in transcript] == [
        ("user", None),
        ("assistant", None),
        ("tool", "c1"),
        ("assistant", None),
    ]
    assert transcript[1]["tool_calls"][0]["id"] == "c1"
    assert transcript[-1]["content"] == "All stored."


async def sse(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    name, data = None, []
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            data.append(line[len("data: ") :])
        elif not line and name is not None:
            yield name, json.loads("\n".join(data))
            name, data = None, []


async def test_a_streamed_http_turn_with_a_tool_call(make_gateway) -> None:
    gw = await make_gateway(tools=["sample_tools:lookup_order"])
    ready = asyncio.Event()
    server = build_server(
        create_app(gw.runner, gw.store, gw.runner.config),
        host="127.0.0.1",
        port=0,
        graceful_timeout=5,
        install_signal_handlers=False,
        on_ready=lambda host, port: ready.set(),
    )
    serving = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(GUARD_SECONDS):
            await ready.wait()
        host, port = server.bound
        gw.server.script(
            Calls([Call("lookup_order", '{"order_id": "A-7"}', id="c7")], pieces=4),
            Reply(["Order ", "A-7 ", "has ", "shipped."]),
        )
        body = {"chat_id": "dora", "text": "where is A-7?", "stream": True}
        async with (
            httpx.AsyncClient(base_url=f"http://{host}:{port}", timeout=GUARD_SECONDS) as http,
            http.stream("POST", "/v1/messages", json=body) as response,
            asyncio.timeout(GUARD_SECONDS),
        ):
            assert response.status_code == 200
            events = [event async for event in sse(response)]
    finally:
        server.should_exit = True
        await serving
    names = [name for name, _ in events]
    assert names[0] == "accepted"
    assert names[-1] == "done"
    assert [data["text"] for name, data in events if name == "delta"] == [
        "Order ",
        "A-7 ",
        "has ",
        "shipped.",
    ]
    messages = [data for name, data in events if name == "message"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["function"] == {
        "name": "lookup_order",
        "arguments": '{"order_id": "A-7"}',
    }
    assert messages[2]["tool_call_id"] == "c7"
    assert json.loads(messages[2]["content"]) == {"order_id": "A-7", "status": "shipped"}
    assert events[-1][1]["reply"] == "Order A-7 has shipped."
    # The message events are the stored messages, each once.
    session_id = events[0][1]["session_id"]
    stored = [e["id"] for e in gw.store.load_events(session_id) if e["type"] == "message"]
    assert [m["id"] for m in messages] == stored


def base_url(server: Any) -> str:
    host, port = server.bound
    return f"http://{host}:{port}"


def shown_text(events: list[tuple[str, dict[str, Any]]]) -> str:
    """The text a client shows from a turn's events (docs/API.md): the deltas, where a `retry`
    drops those since the last assistant message."""
    settled = text = ""
    for name, data in events:
        if name == "delta":
            text += data["text"]
        elif name == "message" and data["role"] == "assistant":
            settled = text
        elif name == "retry":
            text = settled
    return text


async def test_a_stream_broken_mid_way_is_shown_once_after_its_retry(make_gateway) -> None:
    gw = await make_gateway(
        tools=["sample_tools:lookup_order"], max_retries=2, retry_backoff_seconds=0
    )
    gw.server.script(
        Calls([Call("lookup_order", '{"order_id": "A-7"}', id="c7")], text="Let me look. "),
        Broken(["Order ", "A-7 ", "ha"]),
        Reply(["Order ", "A-7 ", "has ", "shipped."]),
    )
    body = {"chat_id": "erin", "text": "where is A-7?", "stream": True}
    async with (
        serving(create_app(gw.runner, gw.store, gw.runner.config)) as server,
        httpx.AsyncClient(base_url=base_url(server), timeout=GUARD_SECONDS) as http,
        http.stream("POST", "/v1/messages", json=body) as response,
        asyncio.timeout(GUARD_SECONDS),
    ):
        events = [event async for event in sse(response)]
    names = [name for name, _ in events]
    # The retry names the next attempt; the broken one's deltas came before it (those the
    # client had not been sent yet were dropped, not sent void).
    retry = names.index("retry")
    assert events[retry][1] == {"attempt": 2, "reason": "agent_unavailable"}
    assert names[:retry].count("message") == 3  # the user's, the tool call and its result
    final = "Order A-7 has shipped."
    assert "".join(d["text"] for n, d in events[retry:] if n == "delta") == final
    assert events[-1] == ("done", {"status": "replied", "reply": final, "turn_id": ANY})
    # What the client assembles is each message once: the text before the tool call, then
    # the final reply, never the broken attempt's text.
    assert shown_text(events) == "Let me look. " + final
    entry = gw.store.get_session(gw.key("erin"))
    transcript = gw.store.load_transcript(entry.session_id)
    assert [m["content"] for m in transcript if m["role"] == "assistant"] == [
        "Let me look. ",
        final,
    ]
    assert len(gw.server.requests) == 3


async def test_a_stream_retry_shows_on_the_live_feed_as_turn_retry(make_gateway) -> None:
    gw = await make_gateway(max_retries=2, retry_backoff_seconds=0)
    gw.server.script(Broken(["Half a "]), Reply(["Whole ", "reply."]))
    async with (
        serving(create_app(gw.runner, gw.store, gw.runner.config)) as server,
        httpx.AsyncClient(base_url=base_url(server), timeout=GUARD_SECONDS) as http,
        http.stream("GET", "/v1/events") as feed,
        asyncio.timeout(GUARD_SECONDS),
    ):
        assert feed.status_code == 200
        body = {"chat_id": "fay", "text": "hello", "stream": True}
        async with http.stream("POST", "/v1/messages", json=body) as response:
            turn = [event async for event in sse(response)]
        seen = await SSEReader(feed).until("turn.finished")
    accepted = turn[0][1]
    assert [name for name, _ in turn].count("retry") == 1
    kinds = [event.event for event in seen]
    # Between the turn's start and its end, in the order it happened.
    assert kinds.index("turn.started") < kinds.index("turn.retry") < kinds.index("turn.finished")
    [retry] = [event for event in seen if event.event == "turn.retry"]
    assert retry.data == {
        "id": retry.id,
        "type": "turn.retry",
        "at": ANY,
        "session_key": accepted["session_key"],
        "session_id": accepted["session_id"],
        "turn_id": accepted["turn_id"],
        "attempt": 2,
        "reason": "agent_unavailable",
    }
    assert seen[-1].data["status"] == "replied"


async def test_an_incognito_turn_s_retry_stays_off_the_live_feed(make_gateway) -> None:
    gw = await make_gateway(max_retries=2, retry_backoff_seconds=0)
    gw.server.script(Broken(["Half a "]), Reply(["Whole."]), Reply(["Seen."]))
    async with (
        serving(create_app(gw.runner, gw.store, gw.runner.config)) as server,
        httpx.AsyncClient(base_url=base_url(server), timeout=GUARD_SECONDS) as http,
        http.stream("GET", "/v1/events") as feed,
        asyncio.timeout(GUARD_SECONDS),
    ):
        created = await http.post("/v1/sessions", json={"chat_id": "gil", "incognito": True})
        assert created.status_code == 201, created.text
        path = f"/v1/sessions/{quote(created.json()['session_key'], safe='')}/messages"
        async with http.stream("POST", path, json={"text": "psst", "stream": True}) as response:
            hidden = [event async for event in sse(response)]
        assert [name for name, _ in hidden].count("retry") == 1
        # A turn of an ordinary session after it: the feed has said all it will of the first.
        sent = await http.post("/v1/messages", json={"chat_id": "hal", "text": "hello"})
        seen = await SSEReader(feed).until("turn.finished", turn_id=sent.json()["turn_id"])
    assert "turn.retry" not in [event.event for event in seen]
    assert all(event.data["session_key"] != created.json()["session_key"] for event in seen)
