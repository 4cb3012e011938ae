"""The runnable examples under `examples/` run, and do what the docs say they do."""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fake_openai import Call, Calls, FakeOpenAI, Reply
from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.agents import build_agent_factory
from sessiongate.gateway import GatewayRunner, MessageEvent

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GUARD = 60  # a hang guard for a child or a reply that never comes, never a timing assertion


@pytest.fixture
def examples_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        timeout=GUARD,
        check=False,
    )


def test_the_agent_example_holds_a_conversation():
    done = _run("custom_agent.py", "where is my parcel?", "order #1002 please", "any news?")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "you> where is my parcel?",
        "bot> Which order? Send its number, like #1001.",
        "you> order #1002 please",
        "bot> Order 1002: waiting for stock.",
        "you> any news?",
        "bot> Order 1002: waiting for stock.",  # remembered from the stored transcript
    ]


def test_the_tool_example_prints_the_schemas_the_model_gets():
    done = _run("custom_tool.py")
    assert done.returncode == 0, done.stderr
    specs = [json.loads(chunk) for chunk in done.stdout.replace("}\n{", "}\n\x00{").split("\x00")]
    names = [spec["function"]["name"] for spec in specs]
    assert names == ["lookup_order", "convert_length"]
    unit = specs[1]["function"]["parameters"]["properties"]["unit"]
    assert unit["enum"] == ["cm", "in"]
    assert "context" not in specs[1]["function"]["parameters"]["properties"]


async def test_the_tool_example_runs_in_a_turn(tmp_path, examples_on_path):
    with FakeOpenAI() as server:
        server.script(
            Calls([Call("lookup_order", '{"order_id": "1001", "include_items": true}')]),
            Reply("Your kettle shipped."),
        )
        config = GatewayConfig(
            agent={
                "openai": {
                    "base_url": server.base_url,
                    "model": "fake-model",
                    "max_retries": 0,
                    "tools": ["custom_tool:lookup_order", "custom_tool:convert"],
                }
            }
        )
        with SessionStore(tmp_path / "sessions", config) as store:
            runner = GatewayRunner(
                store, config, home=tmp_path, agent_factory=build_agent_factory(config)
            )
            await runner.start()
            try:
                source = SessionSource(platform="api", chat_id="alice", user_id="alice")
                receipt = await runner.handle_message(
                    MessageEvent(source=source, text="where is order 1001?")
                )
            finally:
                await runner.stop()
        assert receipt.reply == "Your kettle shipped."
        sent_back = [
            json.loads(m["content"])
            for m in server.requests[1]["body"]["messages"]
            if m["role"] == "tool"
        ]
        assert sent_back == [{"order_id": "1001", "status": "shipped", "items": ["kettle"]}]


async def test_the_adapter_example_serves_a_tcp_chat(tmp_path, examples_on_path):
    example = importlib.import_module("custom_adapter")
    adapter = example.LineChatAdapter(port=0)
    ready, stop = asyncio.Event(), asyncio.Event()
    serving = asyncio.create_task(example.serve(tmp_path, adapter, ready, stop))
    try:
        async with asyncio.timeout(GUARD):
            await ready.wait()
            reader, writer = await asyncio.open_connection("127.0.0.1", adapter.port)
            writer.write(b"not json\n")
            assert "error" in json.loads(await reader.readline())
            writer.write(json.dumps({"user": "alice", "text": "hello there"}).encode() + b"\n")
            answer = json.loads(await reader.readline())
            assert answer["text"] == "echo: hello there"
            assert answer["turn_id"] is not None
            writer.close()
            await writer.wait_closed()
    finally:
        stop.set()
        async with asyncio.timeout(GUARD):
            await serving
