"""The agent kinds section at its smallest size: a real model server process, a real gateway
and each framework's own code in a child process. No speed is asserted; the shape of the
results and the counts are."""

from __future__ import annotations

from rich.console import Console

from sessiongate_bench.agent_kinds import (
    KINDS,
    AgentKindsSizes,
    agent_kinds_lines,
    run_agent_kinds_section,
)
from sessiongate_bench.harness import _print_agent_kinds
from sessiongate_bench.model_server import answer_for

TOOLS = [{"type": "function", "function": {"name": "order_status", "parameters": {}}}]


def test_every_kind_is_measured_and_split_into_model_framework_and_gateway():
    section = run_agent_kinds_section(
        quick=True, sizes=AgentKindsSizes(turns=1, approvals=1), timeout_s=600
    )
    assert section["status"] == "ok", section
    assert list(section["kinds"]) == list(KINDS)
    calls = {kind: part["model_calls_per_turn"] for kind, part in section["kinds"].items()}
    # Installed with the dev extra: every kind runs; the tool kinds call the model twice.
    assert calls == {
        "echo": 0,
        "openai": 2,
        "python": 1,
        "openai-agents": 2,
        "pydantic-ai": 2,
        "langgraph": 2,
    }
    for part in section["kinds"].values():
        assert part["turns"] == 1
        for figure in ("total_ms", "model_ms", "framework_ms", "gateway_ms"):
            assert set(part[figure]) == {"p50_ms", "p95_ms", "p99_ms", "max_ms"}
        assert part["total_ms"]["p50_ms"] > 0
    echo = section["kinds"]["echo"]
    assert echo["model_ms"]["max_ms"] == echo["framework_ms"]["max_ms"] == 0
    assert echo["gateway_ms"] == echo["total_ms"]
    approvals = section["approvals"]
    assert (approvals["status"], approvals["approvals"]) == ("ok", 1)
    assert approvals["latency_ms"]["p50_ms"] > 0
    lines = agent_kinds_lines(section)
    assert sum(line.startswith(f"| {kind} |") for kind in KINDS for line in lines) == 6
    assert any("from the operator's decision to the tool running" in line for line in lines)
    console = Console(width=100, record=True, color_system=None)
    _print_agent_kinds(console, section)
    summary = console.export_text()
    assert "a turn of each agent kind" in summary
    assert "approval → tool running" in summary


def test_a_section_that_failed_is_reported_as_not_measured():
    lines = agent_kinds_lines({"status": "error", "reason": "boom"})
    assert lines == ["## Agent kinds", "", "Not measured: boom.", ""]
    assert agent_kinds_lines({}) == []


def test_the_model_server_calls_the_tool_it_is_asked_for_then_answers():
    user = {"role": "user", "content": "call order_status"}
    assert answer_for({"messages": [user], "tools": TOOLS}) == ("", "order_status")
    assert answer_for({"messages": [user]}) == ("ok", None)  # the tool is not offered
    tool_result = {"role": "tool", "content": "order 1001: shipped", "tool_call_id": "c"}
    assert answer_for({"messages": [user, tool_result], "tools": TOOLS}) == ("done", None)
    hello = {"role": "user", "content": "hello"}
    assert answer_for({"messages": [hello], "tools": TOOLS}) == ("ok", None)
