"""The OpenAI-compatible agent through the real `openai` SDK against a real local server that
streams chunks (`fake_openai.py`): streaming, retries, failures and what they are called."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

import pytest

from fake_openai import Broken, Call, Calls, FakeOpenAI, NoChoices, Reply, Stall, Status
from sessiongate import GatewayConfig
from sessiongate.agents import EchoAgent, OpenAIAgent, TurnRequest, Usage, build_agent_factory
from sessiongate.agents.base import StreamingAgent
from sessiongate.agents.openai_agent import SUMMARY_INSTRUCTION
from sessiongate.core.config import OpenAIAgentConfig
from sessiongate.core.turn_events import (
    MessageCompleted,
    StreamRetry,
    TextDelta,
    ToolResult,
    TurnEnd,
    UsageReport,
)
from sessiongate.errors import AgentTurnError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator


class Sleeps:
    """The agent's injected sleep: records each backoff delay and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    # Padded reply (the agent keeps the model's text as it is) and cache-read usage to map.
    usage = {
        "prompt_tokens": 42,
        "completion_tokens": 7,
        "total_tokens": 49,
        "prompt_tokens_details": {"cached_tokens": 30},
    }
    with FakeOpenAI(reply_format=" model says: {last} ", usage=usage) as fake:
        yield fake


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def make_agent(server: FakeOpenAI, sleeps: Sleeps) -> AsyncIterator[Any]:
    made: list[OpenAIAgent] = []

    def make(**config: Any) -> OpenAIAgent:
        fields = {"base_url": server.base_url, "api_key": "sk-test", "model": "fake-model"}
        agent = OpenAIAgent(OpenAIAgentConfig(**(fields | config)), sleep=sleeps)
        made.append(agent)
        return agent

    yield make
    for agent in made:
        await agent.aclose()


@pytest.fixture
def agent(make_agent: Any) -> OpenAIAgent:
    made: OpenAIAgent = make_agent()
    return made


def request(**overrides: Any) -> TurnRequest:
    fields: dict[str, Any] = {
        "session_key": "agent:main:telegram:dm:1",
        "session_id": "20260101_000000_aaaaaaaa",
        "system_prompt": "You are helpful.",
        "messages": [
            {"role": "user", "content": "hi", "timestamp": "2026-01-01T00:00:00Z"},
            {"role": "assistant", "content": "hello", "message_id": "m1"},
            {"role": "user", "content": "what now?", "metadata": {"x": 1}},
        ],
    }
    return TurnRequest(**(fields | overrides))


async def events_of(agent: OpenAIAgent, req: TurnRequest | None = None) -> list[Any]:
    return [event async for event in agent.stream_turn(req or request())]


def of_type(events: list[Any], kind: type) -> list[Any]:
    return [event for event in events if isinstance(event, kind)]


# ---------------------------------------------------------------------------- the round-1 form


async def test_turn_sends_system_prompt_and_messages_and_maps_the_reply(server, agent) -> None:
    result = await agent.run_turn(request())
    assert result.text == " model says: what now? "
    assert result.usage == Usage(input_tokens=42, output_tokens=7, cache_read_tokens=30)
    assert result.messages == []
    [sent] = server.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["authorization"] == "Bearer sk-test"
    assert sent["body"]["model"] == "fake-model"
    # Only chat-completion fields go out: our timestamps, ids and metadata stay home.
    assert sent["body"]["messages"] == [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "what now?"},
    ]


async def test_resume_note_is_an_extra_system_message(server, agent) -> None:
    await agent.run_turn(request(resume_note="Do not redo interrupted actions."))
    messages = server.requests[0]["body"]["messages"]
    assert messages[:2] == [
        {"role": "system", "content": "You are helpful."},
        {"role": "system", "content": "Do not redo interrupted actions."},
    ]


async def test_request_model_overrides_the_configured_one(server, agent) -> None:
    await agent.run_turn(request(model="other-model"))
    assert server.requests[0]["body"]["model"] == "other-model"


async def test_tool_call_messages_keep_their_fields(server, agent) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "use the tool"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    await agent.run_turn(request(messages=messages))
    sent = server.requests[0]["body"]["messages"][1:]
    assert sent == [
        {"role": "user", "content": "use the tool"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]


async def test_summarize_asks_the_model_for_a_summary(server, agent) -> None:
    summary = await agent.summarize(
        [{"role": "user", "content": "my name is Ada"}, {"role": "assistant", "content": "hi"}]
    )
    assert summary == "model says: user: my name is Ada\nassistant: hi"
    sent = server.requests[0]["body"]["messages"]
    assert sent[0] == {"role": "system", "content": SUMMARY_INSTRUCTION}


async def test_works_without_an_api_key(server, monkeypatch, sleeps) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyless = OpenAIAgent(OpenAIAgentConfig(base_url=server.base_url), sleep=sleeps)
    try:
        result = await keyless.run_turn(request())
    finally:
        await keyless.aclose()
    assert result.text.strip() == "model says: what now?"
    assert server.requests[0]["body"]["model"] == "gpt-4o-mini"


def test_missing_openai_package_names_the_extra(monkeypatch) -> None:
    # A None entry in sys.modules makes `import openai` raise ImportError, as if not installed.
    monkeypatch.setitem(sys.modules, "openai", None)
    config = GatewayConfig(agent={"openai": {"base_url": "http://127.0.0.1:9/v1"}})
    with pytest.raises(ImportError, match=r"pip install 'sessiongate\[openai\]'"):
        OpenAIAgent(config.agent.openai)
    with pytest.raises(ImportError, match=r"sessiongate\[openai\]"):
        build_agent_factory(config)


async def test_factory_builds_echo_agents_by_default() -> None:
    factory = build_agent_factory(GatewayConfig(agent={"echo": {"delay_seconds": 0.25}}))
    made = factory("agent:main:local:dm:me")
    assert isinstance(made, EchoAgent)
    assert made.delay_seconds == 0.25
    assert factory("other") is not made


@pytest.mark.parametrize(
    "openai_config", [{"base_url": "http://127.0.0.1:9/v1"}, {"api_key": "sk-only-a-key"}]
)
async def test_factory_builds_openai_agents_when_configured(openai_config) -> None:
    factory = build_agent_factory(GatewayConfig(agent={"openai": openai_config}))
    made = factory("agent:main:local:dm:me")
    try:
        assert isinstance(made, OpenAIAgent)
    finally:
        await made.aclose()


# ---------------------------------------------------------------------------- streaming


async def test_a_turn_streams_deltas_then_the_message_usage_and_end(server, agent) -> None:
    server.script(Reply(["Hel", "lo, ", "Ada", "!"]))
    events = await events_of(agent)
    assert [e.text for e in of_type(events, TextDelta)] == ["Hel", "lo, ", "Ada", "!"]
    assert of_type(events, UsageReport) == [
        UsageReport(input_tokens=42, output_tokens=7, cache_read_tokens=30)
    ]
    assert of_type(events, MessageCompleted) == [
        MessageCompleted({"role": "assistant", "content": "Hello, Ada!"})
    ]
    assert events[-1] == TurnEnd(text="Hello, Ada!")
    assert len(of_type(events, TurnEnd)) == 1
    assert isinstance(agent, StreamingAgent)  # the gateway streams it
    body = server.requests[0]["body"]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "tools" not in body  # no tools configured: none offered


async def test_a_turn_without_a_usage_chunk_reports_no_usage(server, agent) -> None:
    server.script(NoChoices())  # first attempt: no choices at all
    server.script(Reply("fine"))
    events = await events_of(agent)
    # Usage of the empty attempt is not the reply's; the retried call reports its own.
    assert len(of_type(events, UsageReport)) == 1
    assert events[-1] == TurnEnd(text="fine")


@pytest.mark.parametrize("how", ["abort", "truncate", "garbage"])
async def test_a_broken_stream_is_a_failed_attempt_retried_never_a_half_message(
    server, agent, sleeps, how
) -> None:
    server.script(Broken(["The answer ", "is"], how=how), Reply("The answer is 42."))
    events = await events_of(agent)
    # The user saw the broken attempt's deltas, then the retry that voids them; only the
    # whole message completes.
    shown = [e for e in events if isinstance(e, TextDelta | StreamRetry)]
    assert shown[:3] == [
        TextDelta("The answer "),
        TextDelta("is"),
        StreamRetry(attempt=2, reason="agent_unavailable"),
    ]
    assert "".join(e.text for e in shown[3:]) == "The answer is 42."
    assert of_type(events, MessageCompleted) == [
        MessageCompleted({"role": "assistant", "content": "The answer is 42."})
    ]
    assert events[-1] == TurnEnd(text="The answer is 42.")
    assert len(server.requests) == 2
    assert sleeps.delays == [1.0]


async def test_a_stream_that_keeps_breaking_ends_the_turn_as_unavailable(
    server, make_agent, sleeps
) -> None:
    agent = make_agent(max_retries=2, retry_backoff_seconds=0.5)
    server.script(*[Broken(["par"]) for _ in range(3)])
    events = await events_of(agent)
    assert of_type(events, MessageCompleted) == []
    # Each retry is announced, numbered; the last failure is the end, not a retry.
    assert [e.attempt for e in of_type(events, StreamRetry)] == [2, 3]
    end = events[-1]
    assert end.error == "agent_unavailable"
    assert "temporarily unavailable" in end.text
    assert len(server.requests) == 3
    assert sleeps.delays == [0.5, 1.0]


# ---------------------------------------------------------------------------- failures


async def test_a_200_without_choices_is_a_failed_turn_not_an_empty_reply(
    server, make_agent
) -> None:
    agent = make_agent(max_retries=0)
    server.script(NoChoices())
    events = await events_of(agent)
    assert of_type(events, MessageCompleted) == []
    end = events[-1]
    assert end.error == "agent_empty_response"
    assert end.text  # the user is told something, never an empty reply
    server.script(NoChoices())
    with pytest.raises(AgentTurnError) as raised:
        await agent.run_turn(request())
    assert raised.value.code == "agent_empty_response"
    assert raised.value.notice == end.text


async def test_a_reply_with_no_text_and_no_tool_calls_is_empty(server, make_agent) -> None:
    agent = make_agent(max_retries=0)
    server.script(Reply([]))
    events = await events_of(agent)
    assert events[-1].error == "agent_empty_response"


@pytest.mark.parametrize(
    ("status", "message", "setting"),
    [
        (401, "Incorrect API key provided", "agent.openai.api_key"),
        (403, "forbidden", "agent.openai.api_key"),
        (404, "The model `nope` does not exist", "agent.openai.model"),
        (404, "Not Found", "agent.openai.base_url"),
    ],
)
async def test_a_rejected_key_or_unknown_model_is_misconfigured_and_names_the_setting(
    server, agent, sleeps, caplog, status, message, setting
) -> None:
    server.script(Status(status, message))
    with caplog.at_level(logging.INFO, logger="sessiongate.agents"):
        events = await events_of(agent)
    end = events[-1]
    assert end.error == "agent_misconfigured"
    assert "misconfigured" in end.text
    assert end.metadata["setting"] == setting
    assert len(server.requests) == 1  # not retried: it will not pass by itself
    assert sleeps.delays == []
    [line] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert line.levelno == logging.WARNING
    assert setting in line.getMessage()
    assert line.exc_info is None  # one line, no traceback


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_rate_limits_and_5xx_are_retried_with_backoff_then_succeed(
    server, agent, sleeps, status
) -> None:
    server.script(Status(status), Status(status))
    events = await events_of(agent)
    assert events[-1] == TurnEnd(text=" model says: what now? ")
    assert len(server.requests) == 3
    assert sleeps.delays == [1.0, 2.0]


async def test_retry_after_is_honoured_up_to_the_cap(server, make_agent, sleeps) -> None:
    agent = make_agent(max_retries=3, retry_backoff_max_seconds=10)
    server.script(
        Status(429, headers={"Retry-After": "7"}),
        Status(429, headers={"Retry-After": "60"}),
        Status(429, headers={"Retry-After": "soon"}),
    )
    events = await events_of(agent)
    assert isinstance(events[-1], TurnEnd)
    assert events[-1].error is None
    assert sleeps.delays == [7.0, 10.0, 4.0]


async def test_retries_run_out_as_temporarily_unavailable_with_one_warning(
    server, make_agent, sleeps, caplog
) -> None:
    agent = make_agent(max_retries=1)
    server.script(Status(500), Status(503))
    with caplog.at_level(logging.INFO, logger="sessiongate.agents"):
        events = await events_of(agent)
    end = events[-1]
    assert end.error == "agent_unavailable"
    assert "HTTP 503" in (end.detail or "")
    assert len(server.requests) == 2
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].exc_info is None
    server.script(Status(500), Status(500))
    with pytest.raises(AgentTurnError) as raised:
        await agent.run_turn(request())
    assert raised.value.code == "agent_unavailable"


async def test_a_server_that_does_not_answer_in_time_is_retried_then_unavailable(
    server, make_agent
) -> None:
    # A real client timeout against a stalled server (0.2 s of wall time, no clock moved).
    agent = make_agent(timeout_seconds=0.2, max_retries=1)
    server.script(Stall(5), Stall(5))
    events = await events_of(agent)
    assert events[-1].error == "agent_unavailable"
    assert "in time" in (events[-1].detail or "")
    assert len(server.requests) == 2


async def test_a_refused_request_is_not_retried(server, agent, sleeps) -> None:
    events = await events_of(agent, request(model="no-such-model"))  # the fake's 400
    assert events[-1].error == "agent_failed"
    assert len(server.requests) == 1
    assert sleeps.delays == []


async def test_an_unreachable_server_is_unavailable(sleeps) -> None:
    with FakeOpenAI() as gone:
        base_url = gone.base_url
    agent = OpenAIAgent(OpenAIAgentConfig(base_url=base_url, max_retries=1), sleep=sleeps)
    try:
        events = await events_of(agent)
    finally:
        await agent.aclose()
    assert events[-1].error == "agent_unavailable"
    assert sleeps.delays == [1.0]


async def test_summarize_failure_raises_an_agent_error(server, make_agent) -> None:
    agent = make_agent(max_retries=0)
    server.script(Status(401))
    with pytest.raises(AgentTurnError) as raised:
        await agent.summarize([{"role": "user", "content": "x"}])
    assert raised.value.code == "agent_misconfigured"


# ---------------------------------------------------------------------------- tool streams


async def test_tool_call_deltas_split_across_chunks_are_reassembled(server, make_agent) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    from sessiongate.agents.tools import make_tool

    agent = make_agent()
    agent._tools = {"add": make_tool(add)}
    server.script(Calls([Call("add", '{"a": 20, "b": 22}', id="c1")], pieces=5), Reply("It is 42."))
    events = await events_of(agent)
    [call_message, final] = of_type(events, MessageCompleted)
    assert call_message.message == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 20, "b": 22}'},
            }
        ],
    }
    assert of_type(events, ToolResult) == [ToolResult("c1", "add", "42")]
    assert final.message == {"role": "assistant", "content": "It is 42."}
    assert events[-1] == TurnEnd(text="It is 42.")
    # Both calls' usage is reported; the second request carries the call and its result.
    assert len(of_type(events, UsageReport)) == 2
    second = server.requests[1]["body"]["messages"][-2:]
    assert second == [
        {"role": "assistant", "tool_calls": call_message.message["tool_calls"]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    assert server.requests[0]["body"]["tools"][0]["function"]["name"] == "add"
    assert server.requests[0]["body"]["parallel_tool_calls"] is True


# ---------------------------------------------------------------------------- documentation


def test_every_openai_setting_is_described_and_in_docs_agents_md() -> None:
    from pathlib import Path

    from sessiongate.core.config import SessionToolsConfig

    docs = (Path(__file__).parents[2] / "docs" / "AGENTS.md").read_text(encoding="utf-8")
    for prefix, model in (("", OpenAIAgentConfig), ("session_tools.", SessionToolsConfig)):
        for name, field in model.model_fields.items():
            if name == "session_tools":
                continue  # a section: its keys are checked one by one
            assert field.description, f"{prefix}{name} has no description"
            assert f"| `{prefix}{name}` |" in docs, f"{prefix}{name} is not in docs/AGENTS.md"
