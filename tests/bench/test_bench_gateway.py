"""The gateway section of the benchmark at tiny sizes: real child processes, a real
`sessiongate run` on 127.0.0.1, real SQLite files. No speed is asserted (the benchmark's own
report holds the figures); the shape of the results and the counts are."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from sessiongate_bench.gateway import GatewaySizes, latency_summary, run_gateway_section
from sessiongate_bench.in_process import _traced_turns
from sessiongate_bench.report import evaluate_goals

TINY = GatewaySizes(
    chats=20,
    turns=40,
    http_sequential=10,
    http_turns=40,
    concurrency=4,
    known_sessions=200,
    memory_turns=20,
)


@pytest.fixture(scope="module")
def section(long_run: Any) -> dict[str, Any]:
    with long_run():
        return run_gateway_section(quick=True, sizes=TINY, timeout_s=300)


def test_latency_summary_uses_the_nearest_rank():
    samples = [i / 1000 for i in range(1, 101)]  # 1..100 ms
    assert latency_summary(samples) == {
        "p50_ms": 50.0,
        "p95_ms": 95.0,
        "p99_ms": 99.0,
        "max_ms": 100.0,
    }
    assert latency_summary([])["p99_ms"] == 0.0


def test_quick_sizes_keep_a_thousand_chats():
    quick = GatewaySizes.quick()
    assert quick.chats == GatewaySizes().chats == 1000
    assert GatewaySizes().known_sessions == 100_000


def test_the_section_measures_all_three_parts(section):
    assert section["status"] == "ok", section.get("reason")
    assert (section["chats"], section["turns"]) == (20, 40)
    for part in ("in_process", "http"):
        measured = section[part]
        assert measured["turns_per_s"] > 0
        overhead = measured["overhead_ms"]
        assert 0 < overhead["p50_ms"] <= overhead["p95_ms"] <= overhead["p99_ms"]
        assert overhead["p99_ms"] <= overhead["max_ms"]
    assert section["http"]["concurrency"] == 4
    memory = section["memory"]
    assert memory["known_sessions"] == 200
    for measured in (memory, memory["without_mirror"]):
        assert 0 < measured["rss_mb"] <= measured["peak_rss_mb"]
        assert measured["start_s"] > 0


def test_an_idle_lane_turn_costs_two_transactions(section):
    # One transaction routes, accepts and claims; one commits the outcome (delivered with it).
    assert section["in_process"]["transactions_per_turn"] == 2.0


def test_the_report_reads_the_section(section):
    goals = {g["goal"]: g for g in evaluate_goals({"stores": {}, "gateway": section})}
    throughput = goals["Gateway ≥ 1,000 turns/s in process"]
    assert throughput["passed"] is not None
    assert "turns/s" in throughput["measured"]


def test_a_failure_is_reported_not_raised(monkeypatch):
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    result = run_gateway_section(quick=True, sizes=TINY, timeout_s=30)
    assert result["status"] == "error"
    assert "nonexistent" in result["reason"]


async def test_the_traced_sample_counts_only_the_turn_paths_own_transactions(tmp_path):
    from sessiongate import GatewayConfig, SessionSource, SessionStore
    from sessiongate.agents import build_agent_factory
    from sessiongate.core.platform import Platform
    from sessiongate.gateway import GatewayRunner, MessageEvent

    config = GatewayConfig()
    store = SessionStore(tmp_path / "sessions", config)
    runner = GatewayRunner(store, config, home=tmp_path, agent_factory=build_agent_factory(config))
    await runner.start()
    background = 0
    stop = asyncio.Event()

    async def housekeeping_like() -> None:
        # A transaction of its own on the same connection between every step of the turns.
        nonlocal background
        while not stop.is_set():
            with store.database.transaction():
                background += 1
            await asyncio.sleep(0)

    def event(chat: str) -> MessageEvent:
        return MessageEvent(source=SessionSource(platform=Platform.API, chat_id=chat), text="hi")

    # The first message may arrive while recovery still runs (its lane then queues it), as
    # the benchmark's warm-up turns absorb.
    await runner.handle_message(event("warm"))
    noise = asyncio.create_task(housekeeping_like())
    try:
        events = [event(f"c{i}") for i in range(10)]
        before = background
        traced = await _traced_turns(store, runner, events)
        assert background > before  # the noise did run during the sample
    finally:
        stop.set()
        await noise
        await runner.stop()
        store.close()
    # Each turn: one to route, accept and claim, one to commit the outcome, and nothing else.
    assert traced.count("BEGIN IMMEDIATE") == 2 * len(events)
