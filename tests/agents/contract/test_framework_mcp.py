"""MCP tools through the framework bridges: `agents.<id>.tools: [mcp:files:*]` gives an OpenAI
Agents SDK agent and a pydantic-ai agent the tools of a real MCP server
(`tests/mcp_servers.py`, over stdio), started once by the gateway; the framework's own code
calls them against the fake model server, and `approvals.tools: [mcp:files:*]` applies."""

from __future__ import annotations

import asyncio
import importlib
import sys

import pytest
from agent_kinds import ENTRIES, KINDS
from approval_chat import Chat, tool_results

from fake_openai import Call, Calls, Reply
from mcp_servers import STDIO_SERVER
from sessiongate import GatewayConfig

STDIO = {"command": sys.executable, "args": [STDIO_SERVER]}
READ = Call("mcp__files__read", '{"path": "notes.txt"}', id="call_read")


@pytest.fixture(params=["openai-agents", "pydantic-ai"])
def bridge(request) -> str:
    importlib.import_module(KINDS[request.param])  # installed with the dev extra
    return request.param


async def started(tmp_path, clock, bridge: str, **approvals) -> Chat:
    spec = {"kind": bridge, "entry": ENTRIES[bridge], "tools": ["mcp:files:*"]}
    if approvals:
        spec["approvals"] = approvals
    config = GatewayConfig(agents={"main": spec}, mcp_servers={"files": STDIO})
    chat = Chat(tmp_path, clock, config)
    await chat.runner.start()
    server = chat.runner._agent_factory.mcp_servers.servers["files"]
    while not server.is_up:
        await server.wait_settled()
        await asyncio.sleep(0)
    return chat


@pytest.fixture
async def make(tmp_path, clock, bridge, server):
    made: list[Chat] = []

    async def make_chat(**approvals) -> Chat:
        made.append(await started(tmp_path, clock, bridge, **approvals))
        return made[-1]

    yield make_chat
    for chat in made:
        await chat.runner.stop()
        chat.store.close()


async def test_the_bridge_calls_the_mcp_servers_tool(make, server):
    chat = await make()
    server.script(Calls([READ]), Reply("your notes say hello"))
    receipt = await chat.say("read my notes")
    assert receipt.reply == "your notes say hello"
    offered = {t["function"]["name"] for t in server.requests[0]["body"]["tools"]}
    assert {"mcp__files__read", "mcp__files__stat", "lookup_order"} <= offered
    assert tool_results(server, 1) == ["contents of notes.txt"]
    stored = chat.messages(receipt.session_key)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2]["content"] == "contents of notes.txt"


async def test_an_mcp_pattern_in_approvals_applies(make, server):
    chat = await make(tools=["mcp:files:*"])
    server.script(Calls([READ]), Reply("read it"))
    turn = chat.send("read my notes")
    approval_id = await chat.prompt_id()
    row = chat.runner.approvals.book.get(approval_id)
    assert (row.tool, row.call_id) == ("mcp__files__read", "call_read")
    await chat.say(f"/approve {approval_id}")
    assert (await turn).reply == "read it"
    assert tool_results(server, 1) == ["contents of notes.txt"]


def test_an_entry_agent_names_only_mcp_tools():
    with pytest.raises(ValueError, match="names only MCP tools"):
        GatewayConfig(
            agents={"main": {"kind": "pydantic-ai", "entry": "bots:x", "tools": ["bots:lookup"]}}
        )
    with pytest.raises(ValueError, match="not in mcp_servers"):
        GatewayConfig(
            agents={"main": {"kind": "pydantic-ai", "entry": "bots:x", "tools": ["mcp:nope:*"]}}
        )


def test_a_graph_takes_no_mcp_tools_and_the_start_says_so(bots):
    from sessiongate.agents import build_agent_factory
    from sessiongate.agents.entry import AgentLoadError

    importlib.import_module("langgraph")
    config = GatewayConfig(
        agents={
            "main": {"kind": "langgraph", "entry": ENTRIES["langgraph"], "tools": ["mcp:files:*"]}
        },
        mcp_servers={"files": STDIO},
    )
    with pytest.raises(AgentLoadError, match="takes no MCP tools"):
        build_agent_factory(config)
