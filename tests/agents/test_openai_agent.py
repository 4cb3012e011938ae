"""The OpenAI-compatible agent against a real local HTTP server speaking chat completions."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import openai
import pytest

from fake_openai import FakeOpenAI
from sessiongate import GatewayConfig
from sessiongate.agents import EchoAgent, OpenAIAgent, TurnRequest, Usage, build_agent_factory
from sessiongate.agents.openai_agent import SUMMARY_INSTRUCTION
from sessiongate.core.config import OpenAIAgentConfig

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator


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
async def agent(server: FakeOpenAI) -> AsyncIterator[OpenAIAgent]:
    made = OpenAIAgent(
        OpenAIAgentConfig(base_url=server.base_url, api_key="sk-test", model="fake-model")
    )
    yield made
    await made.aclose()


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


async def test_turn_sends_system_prompt_and_messages_and_maps_the_reply(server, agent) -> None:
    result = await agent.run_turn(request())
    assert result.text == " model says: what now? "
    assert result.usage == Usage(input_tokens=42, output_tokens=7, cache_read_tokens=30)
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


async def test_server_errors_surface_to_the_caller(server, agent) -> None:
    with pytest.raises(openai.BadRequestError):
        await agent.run_turn(request(model="no-such-model"))


async def test_works_without_an_api_key(server, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    keyless = OpenAIAgent(OpenAIAgentConfig(base_url=server.base_url))
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
