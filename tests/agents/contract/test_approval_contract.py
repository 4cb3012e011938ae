"""Approvals every agent kind keeps: a tool named in `approvals.tools` waits for a person,
through a real gateway, a loopback Telegram chat, a real store and the fake clock; the
built-in OpenAI-compatible agent and each framework bridge run for real against the fake
model server.

- the call is asked (the approval `pending`, the prompt in the chat) and nothing runs;
- approved, the tool runs once and the turn finishes;
- denied, the model gets the denial; expired by the clock, `denied: expired`;
- a restart while it waits keeps it pending, and the decision after the restart runs the
  tool exactly once.
"""

from __future__ import annotations

import re

import pytest
from agent_kinds import agent_settings
from approval_chat import DELETE, Chat, tool_results, until

from fake_openai import Call, Calls, Reply
from sessiongate import GatewayConfig


def settings(kind: str, base_url: str) -> dict:
    made = agent_settings(kind, base_url)
    approvals = {"tools": ["delete_file"], "timeout_minutes": 30}
    if kind == "openai":
        made["agent"]["approvals"] = approvals
        made["agent"]["restart_drain_timeout"] = 0
    else:
        made["agents"]["main"]["approvals"] = approvals
        made["agent"] = {"restart_drain_timeout": 0}
    return made


@pytest.fixture
async def chat(tmp_path, clock, kind, server):
    made = Chat(tmp_path, clock, GatewayConfig(**settings(kind, server.base_url)))
    await made.runner.start()
    yield made
    await made.runner.stop()
    made.store.close()


async def test_an_approved_call_runs_once(chat, server, bots):
    server.script(Calls([DELETE]), Reply("done"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    # The prompt shows the call (a framework may give the arguments in its own JSON spacing).
    assert re.search(r'delete_file\(\{"path": ?"/srv/data"\}\)', chat.prompts()[0])
    row = chat.runner.approvals.book.get(approval_id)
    assert (row.status, row.tool, row.call_id) == ("pending", "delete_file", "call_del")
    assert bots.CALLS == []  # nothing runs before the decision
    answer = await chat.say(f"/approve {approval_id}")
    assert answer.reply == f"Approved: delete_file [{approval_id}]."
    assert (await turn).reply == "done"
    assert bots.CALLS == ["delete /srv/data"]
    assert tool_results(server, 1) == ["deleted /srv/data"]
    stored = chat.messages(turn.result().session_key)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2]["content"] == "deleted /srv/data"
    assert chat.runner.approvals.book.get(approval_id).used


async def test_a_denied_call_gives_the_model_the_denial(chat, server, bots):
    server.script(Calls([DELETE]), Reply("understood"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    await chat.say(f"/deny {approval_id}")
    assert (await turn).reply == "understood"
    assert bots.CALLS == []
    (denied,) = tool_results(server, 1)
    assert "denied: the call was not approved" in denied
    stored = chat.messages(turn.result().session_key)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert "denied: the call was not approved" in stored[2]["content"]


async def test_an_approval_expires_by_the_clock(chat, server, bots, clock):
    server.script(Calls([DELETE]), Reply("too late"))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    clock.advance(30 * 60 + 1)
    assert (await turn).reply == "too late"
    assert bots.CALLS == []
    assert "denied: expired" in tool_results(server, 1)[0]
    assert chat.runner.approvals.book.get(approval_id).status == "expired"


async def test_a_restart_while_waiting_resumes_once(chat, server, bots):
    server.script(Calls([DELETE]))
    turn = chat.send("clean up")
    approval_id = await chat.prompt_id()
    await chat.restart()  # the drain leaves the waiting turn for the next start
    await turn
    approvals = chat.runner.approvals
    await until(lambda: approvals._wakers.get(approval_id) is not None)
    assert approvals.book.get(approval_id).status == "pending"
    assert chat.prompts() == []  # the same approval: no second prompt
    assert bots.CALLS == []
    server.script(Reply("done after restart"))
    assert (await chat.say(f"/approve {approval_id}")).reply.startswith("Approved")
    key = approvals.book.get(approval_id).session_key
    await until(
        lambda: chat.runner.lane_store.queue_depth(key) == 0 and key not in chat.runner._lanes
    )
    assert bots.CALLS == ["delete /srv/data"]
    stored = chat.messages(key)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2]["content"] == "deleted /srv/data"
    assert stored[-1]["content"] == "done after restart"


@pytest.mark.parametrize("kind", ["openai", "openai-agents", "pydantic-ai"], indirect=True)
async def test_a_call_that_ran_before_the_pause_is_not_run_again_after_a_restart(
    chat, server, bots
):
    # The frameworks run a call that needs no approval before they pause on one that does;
    # the resumed turn keeps its stored result.
    lookup = Call("lookup_order", '{"order_id": "A-1"}', id="call_look")
    server.script(Calls([DELETE, lookup]))
    turn = chat.send("clean up and check A-1")
    approval_id = await chat.prompt_id()
    await chat.restart()
    await turn
    approvals = chat.runner.approvals
    await until(lambda: approvals._wakers.get(approval_id) is not None)
    server.script(Reply("done"))
    await chat.say(f"/approve {approval_id}")
    key = approvals.book.get(approval_id).session_key
    await until(
        lambda: chat.runner.lane_store.queue_depth(key) == 0 and key not in chat.runner._lanes
    )
    assert sorted(bots.CALLS) == ["A-1", "delete /srv/data"]
    stored = chat.messages(key)
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool", "assistant"]
    assert stored[-1]["content"] == "done"
