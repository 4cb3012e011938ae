"""The frameworks' own approval markers go through the gateway's approvals: the Agents SDK's
`needs_approval`, pydantic-ai's deferred tools (`requires_approval=True`) and LangGraph's
`interrupt()`, each framework's own code against the fake model server, through a real
gateway, with no tool named in `approvals.tools`."""

from __future__ import annotations

import importlib

import pytest
from agent_kinds import KINDS
from approval_chat import DELETE, Chat, tool_results, until

from fake_openai import Calls, Reply
from sessiongate import GatewayConfig

MARKED = {
    "openai-agents": ("openai-agents", "bots:guarded_agent"),
    "pydantic-ai": ("pydantic-ai", "bots:guarded_pydantic"),
    "langgraph": ("langgraph", "bots:guarded_graph"),
    # The graph's own checkpointer holds the paused run; resumed by thread id.
    "langgraph-checkpointed": ("langgraph", "bots:saved_guarded_graph"),
}


@pytest.fixture(params=list(MARKED))
def marked(request) -> tuple[str, str]:
    kind, entry = MARKED[request.param]
    importlib.import_module(KINDS[kind])  # installed with the dev extra
    return kind, entry


@pytest.fixture
async def chat(tmp_path, clock, marked, server):
    kind, entry = marked
    config = GatewayConfig(
        agents={"main": {"kind": kind, "entry": entry}},
        agent={"restart_drain_timeout": 0},
    )
    made = Chat(tmp_path, clock, config)
    await made.runner.start()
    yield made
    await made.runner.stop()
    made.store.close()


async def test_a_marked_call_waits_and_runs_once_approved(chat, server, bots):
    server.script(Calls([DELETE]), Reply("done"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    row = chat.runner.approvals.book.get(approval_id)
    assert (row.status, row.tool, row.call_id) == ("pending", "delete_file", "call_del")
    assert bots.CALLS == []
    await chat.say(f"/approve {approval_id}")
    assert (await turn).reply == "done"
    assert bots.CALLS == ["delete /srv/data"]
    assert tool_results(server, 1) == ["deleted /srv/data"]
    stored = chat.messages(turn.result().session_key)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]


async def test_a_marked_call_denied_gives_the_model_the_denial(chat, server, bots):
    server.script(Calls([DELETE]), Reply("understood"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    await chat.say(f"/deny {approval_id}")
    assert (await turn).reply == "understood"
    assert bots.CALLS == []
    assert "denied: the call was not approved" in tool_results(server, 1)[0]


async def test_a_marked_call_expires_by_the_clock(chat, server, bots, clock):
    server.script(Calls([DELETE]), Reply("too late"))
    turn = chat.send("clean up")
    await chat.prompt_id()
    clock.advance(30 * 60 + 1)
    assert (await turn).reply == "too late"
    assert bots.CALLS == []
    assert "denied: expired" in tool_results(server, 1)[0]


async def test_a_marked_call_survives_a_restart(chat, server, bots):
    server.script(Calls([DELETE]))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    await chat.restart()
    await turn
    approvals = chat.runner.approvals
    await until(lambda: approvals._wakers.get(approval_id) is not None)
    assert chat.prompts() == []  # the same approval: no second prompt
    server.script(Reply("done after restart"))
    await chat.say(f"/approve {approval_id}")
    key = approvals.book.get(approval_id).session_key
    await until(
        lambda: chat.runner.lane_store.queue_depth(key) == 0 and key not in chat.runner._lanes
    )
    assert bots.CALLS == ["delete /srv/data"]
    stored = chat.messages(key)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[-1]["content"] == "done after restart"
