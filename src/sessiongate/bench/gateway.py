"""The gateway-pipeline section of the results: the hook for issue 5's end-to-end benchmark.

To be written once `sessiongate.gateway` has its runner: turns per second end to end with the
echo agent at zero delay, over 1,000 chats, in process and over HTTP, with percentiles of the
per-turn overhead. Until then the section is reported as skipped, with the reason.

The report reads these keys when `status` is "ok" (sizes are free to choose):

    {"status": "ok", "chats": 1000, "turns": ...,
     "in_process": {"turns_per_s": float, "overhead_ms": {"p50_ms": ..., "p99_ms": ...}},
     "http":       {"turns_per_s": float, "overhead_ms": {"p50_ms": ..., "p99_ms": ...}}}
"""

from __future__ import annotations

import importlib.util
from typing import Any

__all__ = ["run_gateway_section"]


def run_gateway_section(*, quick: bool) -> dict[str, Any]:
    """Measure the gateway pipeline, or say why it was skipped."""
    del quick  # the sizes will depend on it
    if importlib.util.find_spec("sessiongate.gateway.runner") is None:
        return {"status": "skipped", "reason": "sessiongate.gateway has no runner yet"}
    return {
        "status": "skipped",
        "reason": "the gateway benchmark is not written yet "
        "(sessiongate/bench/gateway.py: run_gateway_section)",
    }
