"""The Signal section of the benchmark: real child processes (the signal-cli stub, and the
gateway or the bare floor reading its event stream). No speed is asserted; shape and counts."""

from __future__ import annotations

from sessiongate_bench.report import _signal_lines
from sessiongate_bench.signal_section import run_signal_section


def test_the_section_measures_the_gateway_beside_the_stubs_floor():
    section = run_signal_section(quick=True, timeout_s=120, sizes=(40, 8))
    assert section["status"] == "ok", section.get("reason")
    for consumer in ("gateway", "floor"):
        burst = section[consumer]["throughput"]
        assert burst["sent"] == 40
        assert burst["updates_per_s"] > 0
        latency = section[consumer]["latency"]["latency_ms"]
        assert 0 < latency["p50_ms"] <= latency["p99_ms"]
    assert section["gateway"]["throughput"]["reactions"] == 40
    assert section["floor"]["throughput"]["reactions"] == 0
    lines = _signal_lines(section)
    assert lines[0] == "## Signal adapter"
    assert "updates/s" in lines[2]
