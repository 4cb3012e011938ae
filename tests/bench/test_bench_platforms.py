"""The platform adapters' section at its quick size: each adapter through its platform's SDK
and loopback stub, in child processes. No speed is asserted; the shape and the report are."""

from __future__ import annotations

from sessiongate_bench.platforms import run_platforms_section
from sessiongate_bench.report import _platform_lines


def test_each_platform_adapter_has_its_per_message_overhead() -> None:
    section = run_platforms_section(quick=True)
    assert section["status"] == "ok"
    for name in ("slack", "discord", "matrix"):
        part = section[name]
        assert part["status"] == "ok", part.get("reason")
        for measure in ("latency_ms", "sdk_roundtrip_ms", "overhead_ms"):
            assert set(part[measure]) == {"p50_ms", "p95_ms", "p99_ms", "max_ms"}
    # Matrix's burst, end to end, beside the stub's own floor from the same run.
    assert section["matrix"]["updates_per_s"] > 0
    assert section["matrix"]["stub_floor_updates_per_s"] > 0
    text = "\n".join(_platform_lines(section))
    assert "## Platform adapters" in text
    assert "- slack: latency" in text
    assert "- matrix: latency" in text
    assert "updates/s end to end; the stub alone" in text
