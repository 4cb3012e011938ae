"""MCP tools through a real gateway: the OpenAI-compatible agent against the fake model server,
calling real MCP servers (`tests/mcp_servers.py`) over stdio (a subprocess) and streamable
HTTP (a loopback port)."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import TYPE_CHECKING, Any

import pytest

from fake_openai import Call, Calls, FakeOpenAI
from mcp_servers import HTTP_TOKEN, STDIO_SERVER, HttpMcpServer
from sessiongate import GatewayConfig, SessionStore
from sessiongate.agents import build_agent_factory
from sessiongate.core.platform import Platform
from sessiongate.core.source import SessionSource
from sessiongate.gateway import GatewayRunner, MessageEvent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from sessiongate.core.clock import FakeClock

STDIO = {"command": sys.executable, "args": [STDIO_SERVER]}


class Gateway:
    def __init__(self, runner: GatewayRunner, store: SessionStore, server: FakeOpenAI) -> None:
        self.runner = runner
        self.store = store
        self.server = server

    async def say(self, text: str, user: str = "alice") -> Any:
        source = SessionSource(platform=Platform.API, chat_id=user, user_id=user)
        return await self.runner.handle_message(MessageEvent(source=source, text=text))

    def stored_tool_messages(self, user: str = "alice") -> list[dict[str, Any]]:
        entry = self.store.get_session(f"agent:main:api:dm:{user}")
        assert entry is not None
        return [m for m in self.store.load_transcript(entry.session_id) if m["role"] == "tool"]

    def mcp_servers(self) -> Any:
        return self.runner._agent_factory.mcp_servers  # type: ignore[attr-defined]


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(reply_format="done: {last}") as fake:
        yield fake


@pytest.fixture
async def make_gateway(tmp_path: Path, clock: FakeClock, model: FakeOpenAI) -> AsyncIterator[Any]:
    made: list[Gateway] = []

    async def make(servers: dict[str, Any], tools: list[str], **openai: Any) -> Gateway:
        config = GatewayConfig(
            agent={
                "openai": {
                    "base_url": model.base_url,
                    "model": "fake-model",
                    "max_retries": 0,
                    "tools": tools,
                    **openai,
                }
            },
            mcp_servers=servers,
        )
        home = tmp_path / f"home{len(made)}"
        store = SessionStore(home / "sessions", config, clock=clock)
        runner = GatewayRunner(
            store, config, home=home, agent_factory=build_agent_factory(config), clock=clock
        )
        await runner.start()
        made.append(Gateway(runner, store, model))
        return made[-1]

    yield make
    for gateway in made:
        await gateway.runner.stop()
        gateway.store.close()


def sent_tools(request: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in request["body"].get("tools", [])}


def warnings_about(caplog: pytest.LogCaptureFixture, server: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno >= logging.WARNING and getattr(r, "mcp_server", None) == server
    ]


async def wait_until_up(gw: Gateway, name: str) -> None:
    server = gw.mcp_servers().servers[name]
    while not server.is_up:
        await server.wait_settled()
        await asyncio.sleep(0)


async def test_the_servers_schemas_reach_the_model_and_a_result_is_stored(make_gateway) -> None:
    gw = await make_gateway({"files": STDIO}, ["mcp:files:*"])
    gw.server.script(
        Calls([Call("mcp__files__read", '{"path": "notes.txt"}', id="c1")]),
    )
    receipt = await gw.say("read my notes")
    assert receipt.status == "replied"
    assert receipt.reply == "done: contents of notes.txt"
    tools = sent_tools(gw.server.requests[0])
    assert set(tools) == {
        "mcp__files__read",
        "mcp__files__stat",
        "mcp__files__fail",
        "mcp__files__crash",
        "mcp__files__hang",
        "mcp__files__pid",
    }
    read = tools["mcp__files__read"]
    assert read["description"] == "Read a file by its path."
    assert read["parameters"]["properties"]["path"]["type"] == "string"
    assert read["parameters"]["required"] == ["path"]
    [result] = gw.stored_tool_messages()
    assert result["tool_call_id"] == "c1"
    assert result["content"] == "contents of notes.txt"
    assert result["name"] == "mcp__files__read"
    assert "is_error" not in result.get("metadata", {})
    # Another session (another agent instance) uses the same server process.
    gw.server.script(Calls([Call("mcp__files__read", '{"path": "bob.txt"}')]))
    assert (await gw.say("mine?", user="bob")).reply == "done: contents of bob.txt"
    assert gw.mcp_servers().servers["files"].starts == 1


async def test_named_tools_structured_content_and_error_results(make_gateway) -> None:
    gw = await make_gateway(
        {"files": STDIO}, ["mcp:files:stat", "mcp:files:fail", "mcp:files:read"]
    )
    gw.server.script(
        Calls([Call("mcp__files__stat", '{"path": "a"}')]),
        Calls([Call("mcp__files__fail")]),
        Calls([Call("mcp__files__read", '{"path": 3}')]),
    )
    receipt = await gw.say("how big is a?")
    assert receipt.status == "replied"
    assert set(sent_tools(gw.server.requests[0])) == {
        "mcp__files__stat",
        "mcp__files__fail",
        "mcp__files__read",
    }
    stat, fail, read = gw.stored_tool_messages()
    # A result with structured content only: that content, as JSON.
    assert json.loads(stat["content"]) == {"path": "a", "size": 42}
    # An error result of the server is an error tool result, with its text.
    assert fail["metadata"]["is_error"] is True
    assert json.loads(fail["content"])["error"].endswith("the disk is on fire")
    # Arguments that do not match the schema: the server says so, the model reads it.
    assert read["metadata"]["is_error"] is True
    assert "path" in json.loads(read["content"])["error"]


async def test_a_server_that_crashes_mid_call_gives_an_error_and_is_restarted(
    make_gateway, caplog
) -> None:
    gw = await make_gateway({"files": STDIO}, ["mcp:files:*"])
    gw.server.script(Calls([Call("mcp__files__crash")]))
    with caplog.at_level(logging.INFO):
        receipt = await gw.say("crash it")
    assert receipt.status == "replied"  # the turn went on to the model's answer
    [result] = gw.stored_tool_messages()
    assert result["metadata"]["is_error"] is True
    error = json.loads(result["content"])["error"]
    assert error.startswith("MCP server 'files' is unavailable: its connection closed")
    [warning] = warnings_about(caplog, "files")
    assert "exited" in warning.getMessage()
    # The next call goes to a new process.
    gw.server.script(Calls([Call("mcp__files__read", '{"path": "b"}')]))
    assert (await gw.say("again")).reply == "done: contents of b"
    assert gw.mcp_servers().servers["files"].starts == 2


async def test_a_server_that_never_starts_answers_with_an_error_and_one_log_line(
    make_gateway, caplog, tmp_path
) -> None:
    with caplog.at_level(logging.INFO):
        gw = await make_gateway(
            {"ghost": {"command": str(tmp_path / "no-such-server")}}, ["mcp:ghost:lookup"]
        )
        # The named tool is offered, with an open schema, so the model learns why it fails.
        gw.server.script(Calls([Call("mcp__ghost__lookup", '{"q": "x"}')]))
        receipt = await gw.say("look it up")
        gw.server.script(Calls([Call("mcp__ghost__lookup", '{"q": "y"}')]))
        await gw.say("again")
    assert receipt.status == "replied"
    assert "mcp__ghost__lookup" in sent_tools(gw.server.requests[0])
    for result in gw.stored_tool_messages():
        assert result["metadata"]["is_error"] is True
        error = json.loads(result["content"])["error"]
        assert error.startswith("MCP server 'ghost' is unavailable: cannot run it")
    [warning] = warnings_about(caplog, "ghost")
    assert "no-such-server" in warning.getMessage()
    assert not [r for r in caplog.records if r.exc_info]


async def test_a_hanging_call_is_stopped_at_the_tool_timeout(make_gateway) -> None:
    gw = await make_gateway({"files": STDIO}, ["mcp:files:*"], tool_timeout_seconds=0.5)
    gw.server.script(
        Calls([Call("mcp__files__hang")]), Calls([Call("mcp__files__read", '{"path": "c"}')])
    )
    receipt = await gw.say("wait for it")
    assert receipt.status == "replied"
    hung, read = gw.stored_tool_messages()
    assert "did not finish within 0.5 seconds" in json.loads(hung["content"])["error"]
    # The server itself is fine: the next call is answered.
    assert read["content"] == "contents of c"


async def test_a_server_slow_to_start_does_not_hold_up_the_gateway(make_gateway, caplog) -> None:
    slow = {**STDIO, "env": {"MCP_TEST_STARTUP_DELAY": "60"}, "startup_timeout_seconds": 0.3}
    with caplog.at_level(logging.INFO):
        gw = await make_gateway({"slow": slow}, ["mcp:slow:read"])
        gw.server.script(Calls([Call("mcp__slow__read", '{"path": "x"}')]))
        receipt = await gw.say("read")
    assert receipt.status == "replied"
    [result] = gw.stored_tool_messages()
    error = json.loads(result["content"])["error"]
    assert error.startswith("MCP server 'slow' is unavailable: it did not answer in time")
    [warning] = warnings_about(caplog, "slow")
    assert "startup_timeout_seconds" in warning.getMessage()


async def test_tools_of_a_server_over_streamable_http(make_gateway) -> None:
    with HttpMcpServer() as http:
        gw = await make_gateway(
            {"remote": {"url": http.url, "headers": {"Authorization": HTTP_TOKEN}}},
            ["mcp:remote:read", "mcp:remote:fail"],
        )
        gw.server.script(
            Calls([Call("mcp__remote__read", '{"path": "r"}'), Call("mcp__remote__fail")])
        )
        receipt = await gw.say("read remotely")
        await gw.runner.stop()
    assert receipt.status == "replied"
    tools = sent_tools(gw.server.requests[0])
    assert set(tools) == {"mcp__remote__read", "mcp__remote__fail"}
    assert tools["mcp__remote__read"]["parameters"]["required"] == ["path"]
    read, fail = gw.stored_tool_messages()
    assert read["content"] == "contents of r"
    assert fail["metadata"]["is_error"] is True


async def test_an_http_server_refusing_the_headers_is_unavailable(make_gateway, caplog) -> None:
    with HttpMcpServer() as http, caplog.at_level(logging.INFO):
        gw = await make_gateway(
            {"remote": {"url": http.url, "headers": {"Authorization": "Bearer wrong"}}},
            ["mcp:remote:read"],
        )
        gw.server.script(Calls([Call("mcp__remote__read", '{"path": "r"}')]))
        receipt = await gw.say("read remotely")
        await gw.runner.stop()
    assert receipt.status == "replied"
    [result] = gw.stored_tool_messages()
    assert json.loads(result["content"])["error"].startswith("MCP server 'remote' is unavailable")
    [warning] = warnings_about(caplog, "remote")
    assert "Bearer wrong" not in warning.getMessage()
