"""The Telegram section of the benchmark: real child processes (the Bot API stub and a gateway
polling it through python-telegram-bot). No speed is asserted; the shape and counts are."""

from __future__ import annotations

from sessiongate_bench.report import evaluate_goals
from sessiongate_bench.telegram import run_telegram_section


def test_the_section_measures_throughput_and_per_message_overhead():
    section = run_telegram_section(quick=True, timeout_s=300)
    assert section["status"] == "ok", section.get("reason")
    burst = section["throughput"]
    assert burst["sent"] == section["updates"]
    assert burst["updates_per_s"] > 0
    assert burst["gateway_cpu_ms_per_update"] > 0
    one = section["latency"]
    for part in ("latency_ms", "sdk_roundtrip_ms", "overhead_ms"):
        assert one[part]["p50_ms"] <= one[part]["p99_ms"]
    assert one["latency_ms"]["p50_ms"] > 0
    (goal,) = [
        g for g in evaluate_goals({"telegram": section, "stores": {}}) if "Telegram" in g["goal"]
    ]
    assert goal["passed"] in (True, False)
