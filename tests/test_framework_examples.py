"""The framework examples under `examples/` (a support bot with one tool on the OpenAI Agents
SDK, pydantic-ai and LangGraph) run for real behind the gateway, loaded by the same `entry`
their docstrings show, against the fake OpenAI-compatible model server: the model calls the
tool, the tool runs, and the call, its result and the reply are in the transcript."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest

from fake_openai import Call, Calls, FakeOpenAI, Reply
from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.agents import build_agent_factory
from sessiongate.gateway import GatewayRunner, MessageEvent

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# kind -> (module, the entry's attribute, the package the framework needs)
FRAMEWORK_EXAMPLES = {
    "openai-agents": ("support_openai_agents", "agent", "agents"),
    "pydantic-ai": ("support_pydantic_ai", "agent", "pydantic_ai"),
    "langgraph": ("support_langgraph", "graph", "langgraph"),
}


@pytest.fixture
def server():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(params=list(FRAMEWORK_EXAMPLES))
async def example(request, server, monkeypatch):
    """(kind, entry) of one example, its module fresh and pointed at the fake server."""
    kind = request.param
    module_name, attribute, package = FRAMEWORK_EXAMPLES[kind]
    importlib.import_module(package)  # installed with the dev extra
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("SUPPORT_BOT_BASE_URL", server.base_url)
    monkeypatch.setenv("SUPPORT_BOT_MODEL", "fake-model")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    sys.modules.pop(module_name, None)
    yield kind, f"{module_name}:{attribute}"
    module = sys.modules.pop(module_name, None)
    # The example's HTTP client (LangGraph's: the chat model's own), closed on the test's loop.
    client = getattr(module, "client", None)
    if client is None and module is not None:
        client = module.model.bound.root_async_client
    await client.close()


async def test_each_framework_example_runs_its_tool_through_the_gateway(tmp_path, example, server):
    kind, entry = example
    server.script(
        Calls([Call("order_status", '{"order_id": "1001"}', id="call_1")]),
        Reply("Your order 1001 shipped on Monday."),
    )
    config = GatewayConfig(agents={"main": {"kind": kind, "entry": entry}})
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
        entry_row = store.get_session(receipt.session_key)
        stored = [m for m in store.load_transcript(entry_row.session_id) if m.get("role")]

    assert receipt.reply == "Your order 1001 shipped on Monday."
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    [call] = stored[1]["tool_calls"]
    assert call["function"]["name"] == "order_status"
    assert json.loads(call["function"]["arguments"]) == {"order_id": "1001"}
    # The tool ran: its result is stored, paired with the call, and went back to the model.
    assert stored[2]["tool_call_id"] == call["id"]
    assert "order 1001: shipped on Monday" in stored[2]["content"]
    assert "order 1001: shipped on Monday" in json.dumps(server.requests[1]["body"]["messages"])
    assert stored[3]["content"] == "Your order 1001 shipped on Monday."
    assert len(server.requests) == 2
