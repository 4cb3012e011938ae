"""One contract every agent kind keeps: the built-in OpenAI-compatible agent and each
framework bridge (OpenAI Agents SDK, pydantic-ai, LangGraph), each run for real against the
same fake model server, through a real gateway.

- the reply streams, and every completed message (a tool call, its result) is stored as it
  completes, paired;
- a tool that raises ends in an error result or a clear failure, never a stuck lane;
- a turn cut off after its tool ran resumes from what was stored, without running the tool
  again;
- `/stop` ends a turn whose model hangs;
- usage reaches the session's counters.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from agent_kinds import agent_settings

from fake_openai import Call, Calls, Reply, Stall
from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.agents import build_agent_factory
from sessiongate.core.turn_events import TextDelta, TurnEnd
from sessiongate.gateway import GatewayRunner, MessageEvent
from sessiongate.gateway.agent import TurnRequest

USAGE = {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}
KEY = "agent:main:api:dm:alice"
GUARD = 30  # a hang guard for a condition that never comes true, never a timing assertion


class Gateway:
    def __init__(self, tmp_path, clock, config: GatewayConfig) -> None:
        self.config = config
        self.store = SessionStore(tmp_path / "sessions", config, clock=clock)
        self.home = tmp_path
        self.clock = clock
        self.runner = self._runner()

    def _runner(self) -> GatewayRunner:
        return GatewayRunner(
            self.store,
            self.config,
            home=self.home,
            clock=self.clock,
            agent_factory=build_agent_factory(self.config),
        )

    async def say(self, text: str, *, wait: bool = True):
        source = SessionSource(platform="api", chat_id="alice", user_id="alice")
        return await self.runner.handle_message(MessageEvent(source=source, text=text), wait=wait)

    async def restart(self) -> None:
        await self.runner.stop()
        self.runner = self._runner()
        await self.runner.start()

    def messages(self) -> list[dict]:
        entry = self.store.get_session(KEY)
        return [e for e in self.store.load_transcript(entry.session_id) if e.get("role")]


@pytest.fixture
async def gateway(tmp_path, clock, kind, server):
    config = GatewayConfig(**agent_settings(kind, server.base_url))
    made = Gateway(tmp_path, clock, config)
    await made.runner.start()
    yield made
    await made.runner.stop()
    made.store.close()


async def _until(predicate) -> None:
    """Wait for `predicate` to come true, checking between passes of the loop."""
    async with asyncio.timeout(GUARD):
        for _ in iter(predicate, True):
            await asyncio.sleep(0.01)


async def test_a_tool_turn_is_stored_as_it_completes(gateway, server, bots):
    server.script(
        Calls([Call("lookup_order", '{"order_id": "A-1"}', id="call_1")], usage=USAGE),
        Reply("It shipped.", usage=USAGE),
    )
    receipt = await gateway.say("where is A-1?")
    assert receipt.reply == "It shipped."
    assert bots.CALLS == ["A-1"]
    stored = gateway.messages()
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    call = stored[1]["tool_calls"][0]
    assert call["function"]["name"] == "lookup_order"
    assert json.loads(call["function"]["arguments"]) == {"order_id": "A-1"}
    assert stored[2]["tool_call_id"] == call["id"]
    assert "order A-1: shipped" in stored[2]["content"]
    assert stored[3]["content"] == "It shipped."
    # The tool's result went back to the model with the history the transcript holds.
    second = server.requests[1]["body"]["messages"]
    assert any("order A-1: shipped" in str(m.get("content")) for m in second)
    entry = gateway.store.get_session(KEY)
    assert entry.input_tokens >= 24
    assert entry.output_tokens >= 8


async def test_the_reply_streams(kind, server, bots):
    config = GatewayConfig(**agent_settings(kind, server.base_url))
    agent = build_agent_factory(config)(KEY)
    server.script(Reply(["It ", "has ", "shipped."]))
    request = TurnRequest(
        session_key=KEY,
        session_id="s1",
        system_prompt="You are in a test.",
        messages=[{"role": "user", "content": "status?"}],
    )
    events = [event async for event in agent.stream_turn(request)]
    deltas = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert deltas == "It has shipped."
    assert isinstance(events[-1], TurnEnd)
    assert events[-1].text == "It has shipped."
    # The session context reached the model.
    assert "You are in a test." in server.bodies_text()
    await agent.aclose()


async def test_history_is_the_transcript(gateway, server):
    server.script(Reply("First answer."), Reply("Second answer."))
    await gateway.say("remember the word kumquat")
    await gateway.say("what was the word?")
    second = server.requests[1]["body"]["messages"]
    texts = [str(m.get("content")) for m in second]
    assert "remember the word kumquat" in texts
    assert "First answer." in texts
    assert texts[-1] == "what was the word?"


async def test_a_tool_that_raises_never_sticks_the_lane(gateway, server, bots):
    server.script(
        Calls([Call("lookup_order", '{"order_id": "BOOM"}', id="call_b")]),
        Reply("The order system is down, sorry."),
    )
    receipt = await gateway.say("where is BOOM?")
    assert str(receipt.status) in ("replied", "failed")
    assert bots.CALLS == ["BOOM"]
    server.clear_script()
    server.script(Reply("Still here."))
    after = await gateway.say("hello again")
    assert after.reply == "Still here."


async def test_a_cut_off_turn_resumes_without_running_its_tool_again(gateway, server, bots):
    server.script(
        Calls([Call("lookup_order", '{"order_id": "A-1"}', id="call_r")]),
        Stall(600),  # the model hangs after the tool ran: the gateway stops meanwhile
    )
    gateway.config.agent.restart_drain_timeout = 0
    await gateway.say("where is A-1?", wait=False)
    await _until(lambda: any(m["role"] == "tool" for m in gateway.messages()))
    # The model was asked again (and hangs): the turn is cut off after its tool, mid-loop.
    await _until(lambda: len(server.requests) == 2)
    assert bots.CALLS == ["A-1"]
    server.script(Reply("It shipped, as I found."))
    await gateway.restart()
    await _until(lambda: gateway.messages()[-1].get("content") == "It shipped, as I found.")
    assert bots.CALLS == ["A-1"], "the completed tool ran again"
    resumed = server.requests[-1]["body"]["messages"]
    assert any("order A-1: shipped" in str(m.get("content")) for m in resumed)


async def test_stop_ends_a_turn_whose_model_hangs(gateway, server):
    server.script(Stall(600))
    await gateway.say("tell me a long story", wait=False)
    await _until(lambda: len(server.requests) == 1)  # the model has the call, and hangs
    async with asyncio.timeout(GUARD):
        answer = await gateway.say("/stop")
    assert str(answer.status) == "command"
    await _until(lambda: gateway.runner.statistics().running_turns == 0)
    server.script(Reply("Ready."))
    assert (await gateway.say("are you there?")).reply == "Ready."
