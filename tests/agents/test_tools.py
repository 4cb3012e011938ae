"""Tools: schemas from type hints and docstrings, loading by name and import path, and the
tool loop against the streaming fake server, where every bad input gets a clear result."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

import sample_tools
from fake_openai import Call, Calls, FakeOpenAI, Reply
from sessiongate import GatewayConfig
from sessiongate.agents import OpenAIAgent, TurnRequest, build_agent_factory
from sessiongate.agents.tools import ToolLoadError, load_tools, make_tool, tool
from sessiongate.core.config import OpenAIAgentConfig
from sessiongate.core.turn_events import MessageCompleted, ToolResult, TurnEnd

if TYPE_CHECKING:
    from collections.abc import AsyncIterator


async def _no_wait(seconds: float) -> None:
    return None


@pytest.fixture
async def make_agent(server: FakeOpenAI) -> AsyncIterator[Any]:
    made: list[OpenAIAgent] = []

    def make(tools: list[str], **config: Any) -> OpenAIAgent:
        settings = OpenAIAgentConfig(base_url=server.base_url, tools=tools, **config)
        agent = OpenAIAgent(settings, sleep=_no_wait)
        made.append(agent)
        return agent

    yield make
    for agent in made:
        await agent.aclose()


def request() -> TurnRequest:
    return TurnRequest(
        session_key="agent:main:api:dm:7",
        session_id="20260101_000000_aaaaaaaa",
        system_prompt="",
        messages=[{"role": "user", "content": "go"}],
    )


async def results_of(agent: OpenAIAgent) -> tuple[list[ToolResult], list[Any]]:
    events = [event async for event in agent.stream_turn(request())]
    return [e for e in events if isinstance(e, ToolResult)], events


def error_of(result: ToolResult) -> str:
    assert result.is_error
    return str(json.loads(result.content)["error"])


# ---------------------------------------------------------------------------- schemas


def test_schema_comes_from_type_hints_and_the_docstring() -> None:
    made = make_tool(sample_tools.lookup_order)
    assert made.spec() == {
        "type": "function",
        "function": {
            "name": "lookup_order",
            "description": "Look an order up by its id.",
            "parameters": {
                "type": "object",
                "properties": {
                    "order_id": {
                        "type": "string",
                        "description": "the id printed on the receipt",
                    },
                    "include_items": {
                        "type": "boolean",
                        "default": False,
                        "description": "whether to list the order's items too",
                    },
                },
                "required": ["order_id"],
                "additionalProperties": False,
            },
        },
    }


def test_literals_become_enums_and_the_context_parameter_is_hidden() -> None:
    converted = make_tool(sample_tools.convert).parameters
    assert converted["properties"]["unit"] == {
        "enum": ["cm", "in"],
        "type": "string",
        "default": "cm",
    }
    assert converted["properties"]["amount"] == {"type": "number"}
    whoami = sample_tools.caller_of.__sessiongate_tool__  # type: ignore[attr-defined]
    assert whoami.name == "whoami"
    assert whoami.timeout_seconds == 3
    assert whoami.context_parameter == "context"
    assert whoami.parameters["properties"] == {}


def test_the_decorator_leaves_the_function_callable() -> None:
    @tool
    def double(x: int) -> int:
        """Double it."""
        return 2 * x

    assert double(4) == 8
    assert double.__sessiongate_tool__.description == "Double it."  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------- loading


def test_tools_load_by_builtin_name_and_import_path() -> None:
    loaded = load_tools(
        [
            "sessions_list",
            "sample_tools:lookup_order",
            "sample_tools:convert",
            "sample_tools:caller_of",
        ]
    )
    assert [t.name for t in loaded] == ["sessions_list", "lookup_order", "convert", "whoami"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("sessions_lst", "no built-in tool of that name"),
        ("no_such_module_xyz:f", "cannot import 'no_such_module_xyz'"),
        ("sample_tools:missing", "has no 'missing'"),
        ("sample_tools:NOT_A_FUNCTION", "is not a function"),
        ("sample_tools:not_fillable", "cannot be filled from JSON"),
    ],
)
def test_a_name_that_is_no_tool_is_refused_at_load_naming_the_entry(spec, message) -> None:
    with pytest.raises(ToolLoadError, match=message) as raised:
        load_tools(["sessions_list", spec])
    assert "agent.openai.tools[1]" in str(raised.value)
    assert isinstance(raised.value, ImportError)  # the CLI reports it like a missing extra


def test_a_name_servers_refuse_is_refused() -> None:
    with pytest.raises(TypeError, match="'look up' is not 1 to 64"):
        make_tool(sample_tools.lookup_order, name="look up")


def test_two_tools_of_one_name_are_refused() -> None:
    with pytest.raises(ToolLoadError, match="two tools are named 'sessions_list'"):
        load_tools(["sessions_list", "sessions_list"])


def test_the_factory_loads_configured_tools_at_start_up() -> None:
    config = GatewayConfig(
        agent={"openai": {"base_url": "http://127.0.0.1:9/v1", "tools": ["x:y"]}}
    )
    with pytest.raises(ToolLoadError):
        build_agent_factory(config)


# ---------------------------------------------------------------------------- the tool loop


async def test_tools_run_and_their_results_go_back_to_the_model(server, make_agent) -> None:
    agent = make_agent(["sample_tools:lookup_order", "sample_tools:caller_of"])
    server.script(
        Calls([Call("lookup_order", '{"order_id": "A-1", "include_items": true}'), Call("whoami")]),
        Reply("Shipped."),
    )
    results, events = await results_of(agent)
    assert [json.loads(r.content) if r.name == "lookup_order" else r.content for r in results] == [
        {"order_id": "A-1", "status": "shipped", "items": ["book"]},
        "agent:main:api:dm:7",
    ]
    assert not any(r.is_error for r in results)
    assert events[-1] == TurnEnd(text="Shipped.")
    sent = server.requests[1]["body"]["messages"]
    assert [m["role"] for m in sent[-3:]] == ["assistant", "tool", "tool"]


async def test_parallel_calls_run_at_the_same_time(server, make_agent) -> None:
    sample_tools.PEERS.reset()
    agent = make_agent(["sample_tools:wait_for_peer"])
    server.script(
        Calls([Call("wait_for_peer", '{"name": "a"}'), Call("wait_for_peer", '{"name": "b"}')]),
        Reply("both"),
    )
    results, _ = await results_of(agent)
    # Each call returns only once the other runs too: run one after the other, both fail.
    assert [r.content for r in results] == ["a met its peer", "b met its peer"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (Call("no_such_tool"), "unknown tool 'no_such_tool'; the tools are: "),
        (Call("lookup_order", '{"order_id": '), "the arguments are not valid JSON"),
        (Call("lookup_order", "[1, 2]"), "the arguments must be a JSON object"),
        (Call("lookup_order", "{}"), "order_id: Field required"),
        (Call("lookup_order", '{"order_id": "A", "include_items": "maybe"}'), "include_items:"),
        (Call("lookup_order", '{"order_id": "A", "colour": "red"}'), "colour: unknown argument"),
        (Call("explode", '{"reason": "no"}'), "the tool failed: ValueError: cannot do that: no"),
        (Call("hang"), "did not finish within 0.05 seconds and was stopped"),
        (Call("unserialisable"), "returned a object, which cannot be serialised as JSON"),
    ],
)
async def test_bad_input_from_the_model_or_a_tool_is_a_clear_result(
    server, make_agent, call, message
) -> None:
    agent = make_agent(
        [
            "sample_tools:lookup_order",
            "sample_tools:explode",
            "sample_tools:hang",
            "sample_tools:unserialisable",
        ],
        tool_timeouts={"hang": 0.05},
    )
    server.script(Calls([call]), Reply("recovered"))
    [result], events = await results_of(agent)
    assert message in error_of(result)
    # The turn goes on: the model reads the error and answers.
    assert events[-1] == TurnEnd(text="recovered")
    sent_back = server.requests[1]["body"]["messages"][-1]
    assert sent_back["role"] == "tool"
    assert message in sent_back["content"]


async def test_a_model_that_loops_tools_past_the_cap_ends_the_turn_with_a_reason(
    server, make_agent
) -> None:
    agent = make_agent(["sample_tools:caller_of"], max_tool_iterations=3)
    server.script(*[Calls([Call("whoami")]) for _ in range(4)])
    results, events = await results_of(agent)
    assert len(server.requests) == 3
    assert len(results) == 3
    end = events[-1]
    assert end.error == "tool_loop_limit"
    assert "3" in end.text
    assert "max_tool_iterations" in (end.detail or "")
    # Everything completed before the cap is there to be kept.
    assert len([e for e in events if isinstance(e, MessageCompleted)]) == 3


async def test_a_long_result_is_cut_with_a_note(server, make_agent) -> None:
    agent = make_agent(["sample_tools:convert"], max_tool_result_chars=100)

    async def long_text() -> str:
        return "x" * 500

    agent._tools["long_text"] = make_tool(long_text)
    server.script(Calls([Call("long_text")]), Reply("ok"))
    [result], _ = await results_of(agent)
    assert result.content.startswith("x" * 100)
    assert result.content.endswith("[... 400 more characters cut]")


async def test_run_turn_returns_the_calls_and_results_before_the_reply(server, make_agent) -> None:
    agent = make_agent(["sample_tools:caller_of"])
    server.script(Calls([Call("whoami", id="c9")]), Reply("done"))
    result = await agent.run_turn(request())
    assert result.text == "done"
    assert [m["role"] for m in result.messages] == ["assistant", "tool"]
    assert result.messages[1] == {
        "role": "tool",
        "tool_call_id": "c9",
        "content": "agent:main:api:dm:7",
        "metadata": {"tool_name": "whoami"},
    }
    # Usage of both model calls adds up.
    assert result.usage.input_tokens == 20


def test_repair_makes_every_call_storable_and_sendable() -> None:
    from sessiongate.agents.tools._calls import INVALID_TOOL_NAME, repair_tool_calls
    from sessiongate.core.transcript import validate_message

    calls = [
        {"id": "a", "type": "function", "function": {"name": "", "arguments": "{}"}},
        {"id": "a", "type": "function", "function": {"name": "x" * 65, "arguments": None}},
        {"type": "function", "function": {"name": "lookup order", "arguments": {"k": 1}}},
        {"id": "b", "type": "function", "function": {"name": "lookup_order"}},
    ]
    repaired = repair_tool_calls(calls)
    assert [c["function"]["name"] for c in repaired] == [INVALID_TOOL_NAME] * 3 + ["lookup_order"]
    assert len({c["id"] for c in repaired}) == 4
    assert repaired[2]["function"]["arguments"] == '{"k": 1}'
    validate_message({"role": "assistant", "content": None, "tool_calls": repaired})
