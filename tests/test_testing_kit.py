"""The public test kit's scripted agents, through a real gateway (the root `make_gateway`)."""

from __future__ import annotations

import pytest

from sessiongate.core.turn_events import MessageCompleted, ToolResult
from sessiongate.testing import FailingAgent, GatedAgent, HeldAgent, ScriptedAgent


async def test_a_scripted_agent_answers_each_turn_with_its_next_reply(make_gateway):
    call = {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}
    agent = ScriptedAgent(
        [
            "first",
            [
                MessageCompleted({"role": "assistant", "content": None, "tool_calls": [call]}),
                ToolResult("c1", "look", "seen"),
                "sec",
                "ond",
            ],
        ]
    )
    gw = await make_gateway(agent)
    await gw.adapter.receive("one")
    await gw.runner.wait_idle()
    await gw.adapter.receive("two")
    await gw.runner.wait_idle()
    assert gw.adapter.texts() == ["first", "second"]
    assert [r.messages[-1]["content"] for r in agent.requests] == ["one", "two"]
    sid = gw.store.get_or_create_session(gw.adapter.source()).session_id
    roles = [m["role"] for m in gw.store.load_transcript(sid)]
    assert roles == ["user", "assistant", "user", "assistant", "tool", "assistant"]


async def test_a_scripted_agent_without_replies_left_says_so():
    agent = ScriptedAgent(["only"])
    await anext(aiter(agent.stream_turn(_request())))
    with pytest.raises(AssertionError, match="no reply left"):
        await anext(aiter(agent.stream_turn(_request())))


async def test_a_gated_agent_stops_before_a_closed_gate(make_gateway):
    agent = GatedAgent(["par", "tial"])
    gate = agent.gate(1)
    gw = await make_gateway(agent)
    await gw.adapter.receive("hi", wait=False)
    assert await agent.shown.get() == "par"
    assert agent.shown.empty()
    assert gw.adapter.texts() == []
    gate.set()
    await gw.runner.wait_idle()
    assert gw.adapter.texts() == ["partial"]


async def test_a_held_agent_holds_the_turn_until_released(make_gateway):
    agent = HeldAgent(lambda request: f"done: {request.messages[-1]['content']}")
    gw = await make_gateway(agent)
    await gw.adapter.receive("hi", wait=False)
    await agent.started.wait()
    assert gw.adapter.texts() == []
    agent.release.set()
    await gw.runner.wait_idle()
    assert gw.adapter.texts() == ["done: hi"]


async def test_a_failing_agent_ends_the_turn_with_its_error(make_gateway):
    gw = await make_gateway(FailingAgent("agent_misconfigured", "Not set up."))
    await gw.adapter.receive("hi")
    await gw.runner.wait_idle()
    assert gw.adapter.texts() == ["Not set up."]


def _request():
    from sessiongate.gateway.agent import TurnRequest

    return TurnRequest("k", "s", "", [{"role": "user", "content": "x"}])
