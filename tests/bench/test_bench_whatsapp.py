"""The WhatsApp section of the benchmark: real child processes (the Graph API stub, the
gateway's webhook route or the bare floor receiver, and the poster playing Meta). No speed is
asserted; the shape and counts are."""

from __future__ import annotations

from sessiongate_bench.report import _whatsapp_lines
from sessiongate_bench.whatsapp import run_whatsapp_section


def test_the_section_measures_the_gateway_beside_the_stubs_floor():
    section = run_whatsapp_section(quick=True, timeout_s=300, sizes=(40, 10))
    assert section["status"] == "ok", section.get("reason")
    for receiver in ("floor", "gateway"):
        burst = section["throughput"][receiver]
        assert burst["sent"] == 40
        assert burst["messages_per_s"] > 0
    one = section["latency"]
    for part in ("gateway_ms", "floor_ms", "overhead_ms"):
        assert one[part]["p50_ms"] <= one[part]["p99_ms"]
    assert one["gateway_ms"]["p50_ms"] > 0
    text = "\n".join(_whatsapp_lines(section))
    assert "## WhatsApp adapter" in text
    assert "floor" in text
