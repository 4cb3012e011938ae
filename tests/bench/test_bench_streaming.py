"""The streaming section of the benchmark at tiny sizes: a real child process for the turns,
a real gateway serving HTTP in another, a real SSE client. No speed is asserted; the shape
of the results and the counts are."""

from __future__ import annotations

from sessiongate_bench.streaming import (
    StreamingSizes,
    durable_plan,
    run_streaming_section,
    streaming_goals,
)

TINY = StreamingSizes(chats=5, turns=20, extra=4, first_deltas=5, deltas=300)


def test_the_streaming_section_measures_messages_first_deltas_and_a_burst():
    section = run_streaming_section(quick=True, sizes=TINY, timeout_s=300)
    assert section["status"] == "ok", section
    durable = section["durable_messages"]
    assert durable["extra"] == 4
    assert durable["tools_ms"]["p50_ms"] > 0
    assert section["first_delta"]["requests"] == 5
    assert section["first_delta"]["agent_ttft_ms"]["max_ms"] >= 0
    burst = section["sse"]
    # Every delta arrives (the burst is below a watcher's buffer), plus the closing "done".
    assert (burst["received"], burst["dropped"]) == (301, 0)
    goals = streaming_goals({"streaming": section})
    assert [goal["passed"] is not None for goal in goals] == [True, True, True]


def test_a_missing_section_is_reported_as_not_measured():
    goals = streaming_goals({"streaming": {"status": "error", "reason": "boom"}})
    assert {goal["measured"] for goal in goals} == {"not measured: boom"}


def test_both_kinds_of_turn_run_on_every_chat_and_each_goes_first_in_turn():
    from collections import Counter

    plan = durable_plan(4 * 2 * 6, chats=6)  # four rounds
    assert Counter(plan) == {(chat, kind): 4 for chat in range(6) for kind in ("plain", "tools")}
    firsts = [kind for i, (chat, kind) in enumerate(plan) if chat == 0 and i % 2 == 0]
    assert firsts == ["plain", "tools", "plain", "tools"]
