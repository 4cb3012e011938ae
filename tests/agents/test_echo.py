from __future__ import annotations

from typing import Any

from sessiongate.agents import Agent, EchoAgent, TurnRequest


def request(messages: list[dict[str, Any]]) -> TurnRequest:
    return TurnRequest(
        session_key="agent:main:local:dm:me",
        session_id="20260101_000000_aaaaaaaa",
        system_prompt="You are a test.",
        messages=messages,
    )


async def test_echo_replies_with_the_last_user_text() -> None:
    agent = EchoAgent()
    result = await agent.run_turn(
        request(
            [
                {"role": "user", "content": "first"},
                {"role": "assistant", "content": "echo: first"},
                {"role": "user", "content": "second"},
                {"role": "tool", "tool_call_id": "c1", "content": "not a user"},
            ]
        )
    )
    assert result.text == "echo: second"
    assert result.cost_usd == 0.0
    assert result.usage.input_tokens > 0
    assert result.usage.output_tokens > 0
    assert agent.turns == 1


async def test_echo_with_no_user_text_echoes_nothing() -> None:
    result = await EchoAgent().run_turn(request([{"role": "user", "content": [{"type": "x"}]}]))
    assert result.text == "echo: "


async def test_echo_summarize_mentions_the_conversation_and_aclose_is_harmless() -> None:
    agent: Agent = EchoAgent()
    summary = await agent.summarize(
        [
            {"role": "user", "content": "remember the blue door"},
            {"role": "assistant", "content": "ok"},
        ]
    )
    assert "blue door" in summary
    await agent.aclose()
    await agent.aclose()
