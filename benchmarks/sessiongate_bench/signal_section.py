"""The Signal section of the benchmark: signal-cli stub → SSE stream → SignalAdapter → echo
agent → JSON-RPC `send`, over loopback HTTP, beside the stub's own floor in the same run.

Two child processes per measurement, so neither's CPU is billed to the other: the stub
(`SignalCliStub` under uvicorn, which keeps the clock) and its consumer, either the gateway (a
`GatewayRunner` with the `SignalAdapter` and the echo agent) or the floor (a bare loop reading
the stream and answering each event with one `send`, no gateway: what the stub and the two
loopback hops cost on their own).

- `throughput`: `updates` DMs, one per sender, pushed once the consumer's stream is open: from
  the first event written to the stream to the last reply reaching the stub.
- `latency`: one message at a time (the next is pushed when the reply arrives): from the
  event written to the stream to its reply, per message.

The gateway runs with its defaults, so it also puts the acknowledgement reaction on each
message (one more JSON-RPC call the floor does not make). A failure gives
`{"status": "error", "reason": ...}`; the rest of the benchmark goes on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sessiongate_bench.gateway import latency_summary

__all__ = ["run_signal_section"]


def run_signal_section(
    *, quick: bool, timeout_s: float = 600.0, sizes: tuple[int, int] | None = None
) -> dict[str, Any]:
    """`sizes`: (burst updates, sequential messages), else the quick or full defaults."""
    updates, sequential = sizes or ((300, 50) if quick else (3000, 300))
    result: dict[str, Any] = {"status": "ok", "updates": updates, "sequential": sequential}
    try:
        with tempfile.TemporaryDirectory(prefix="sessiongate-signal-bench-") as tmp:
            work = Path(tmp)
            for consumer in ("gateway", "floor"):
                result[consumer] = {
                    "throughput": _run(work / consumer / "t", consumer, "burst", updates,
                                       timeout_s),
                    "latency": _run(work / consumer / "l", consumer, "sequential", sequential,
                                    timeout_s),
                }  # fmt: skip
    except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
        return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    return result


def _run(work: Path, consumer: str, mode: str, count: int, timeout_s: float) -> dict[str, Any]:
    work.mkdir(parents=True)
    me = [sys.executable, "-m", "sessiongate_bench.signal_child"]
    stub = subprocess.Popen(
        [*me, "stub", mode, str(count)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert stub.stdout is not None
        url = stub.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"the stub did not start: {url!r}")
        args = [url, str(work / "home"), str(count)] if consumer == "gateway" else [url, str(count)]
        child = subprocess.run(
            [*me, consumer, *args], capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if child.returncode != 0:
            raise RuntimeError(f"the {consumer} child failed: {child.stderr[-2000:]}")
        measured: dict[str, Any] = json.loads(stub.stdout.readline().strip())
    finally:
        if stub.stdin is not None:
            stub.stdin.close()
        try:
            stub.wait(timeout=30)
        except subprocess.TimeoutExpired:
            stub.kill()
            stub.wait()
        if stub.stdout is not None:
            stub.stdout.close()
    if mode == "burst":
        span = measured["last_send"] - measured["first_delivery"]
        return {
            "updates_per_s": round(count / span, 1) if span > 0 else 0.0,
            "seconds": round(span, 3),
            "sent": measured["sent"],
            "reactions": measured["reactions"],
        }
    return {"latency_ms": latency_summary(measured["latencies"])}
