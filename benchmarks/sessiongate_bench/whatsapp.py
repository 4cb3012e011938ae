"""The WhatsApp section of the benchmark: a signed webhook POST → `/hooks/whatsapp` →
`WhatsAppAdapter` → echo agent → the reply through pywa to the Graph API stub, over loopback
HTTP, side by side with the stub's own floor measured in the same run.

Each figure comes from a child process of its own (`bench/whatsapp_child.py`) holding the stub,
the receiver and the poster playing Meta on one event loop. The receiver is the gateway
(`gateway`) or a bare one that verifies the signature, reads the JSON and sends the same reply
through the same pywa client with no gateway behind it (`floor`):

- `throughput`: `messages` webhooks, one user each, posted 4 at a time (Meta posts
  concurrently); from the first post to the last reply reaching the stub: messages/s for the
  gateway and for the floor.
- `latency`: one message at a time, from its post to its reply at the stub (p50 / p99), for
  both; `overhead_ms` = the gateway's latency minus the floor's median: what the adapter and
  the gateway add per message (signature, claim, durable hand-off, turn, send bookkeeping).

A failure gives `{"status": "error", "reason": ...}`; the rest of the benchmark goes on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sessiongate_bench.gateway import latency_summary

__all__ = ["run_whatsapp_section"]


def run_whatsapp_section(
    *, quick: bool, timeout_s: float = 600.0, sizes: tuple[int, int] | None = None
) -> dict[str, Any]:
    """`sizes`: (burst messages, sequential messages), for a smaller run than `quick`'s."""
    messages, sequential = sizes or ((200, 30) if quick else (2000, 300))
    try:
        import pywa_async  # noqa: F401  # the section needs the extra
    except ImportError:
        return {"status": "error", "reason": "pywa is not installed ([whatsapp])"}
    result: dict[str, Any] = {"status": "ok", "messages": messages, "sequential": sequential}
    try:
        with tempfile.TemporaryDirectory(prefix="sessiongate-whatsapp-bench-") as tmp:
            work = Path(tmp)
            runs = {
                (receiver, mode): _child(
                    receiver, mode, count, work / f"{receiver}-{mode}", timeout_s
                )
                for receiver in ("floor", "gateway")
                for mode, count in (("burst", messages), ("sequential", sequential))
            }
    except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
        return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    result["throughput"] = {
        receiver: {
            "messages_per_s": round(messages / runs[receiver, "burst"]["seconds"], 1),
            "seconds": round(runs[receiver, "burst"]["seconds"], 3),
            "sent": runs[receiver, "burst"]["sent"],
        }
        for receiver in ("floor", "gateway")
    }
    floor, gateway = runs["floor", "sequential"], runs["gateway", "sequential"]
    median = sorted(floor["latencies"])[len(floor["latencies"]) // 2]
    result["latency"] = {
        "gateway_ms": latency_summary(gateway["latencies"]),
        "floor_ms": latency_summary(floor["latencies"]),
        "overhead_ms": latency_summary([max(0.0, x - median) for x in gateway["latencies"]]),
    }
    return result


def _child(receiver: str, mode: str, count: int, home: Path, timeout_s: float) -> dict[str, Any]:
    home.mkdir(parents=True)
    child = subprocess.run(
        [sys.executable, "-m", "sessiongate_bench.whatsapp_child", receiver, mode, str(count),
         str(home)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )  # fmt: skip
    if child.returncode != 0:
        raise RuntimeError(f"the {receiver} {mode} child failed: {child.stderr[-1500:]}")
    measured: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    if measured["seconds"] <= 0:
        raise RuntimeError(f"the {receiver} {mode} child measured nothing")
    return measured
