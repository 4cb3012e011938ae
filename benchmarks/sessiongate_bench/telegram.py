"""The Telegram section of the benchmark: Bot API stub → TelegramAdapter → echo agent →
sendMessage, through python-telegram-bot over loopback HTTP, in one gateway process.

Two child processes, so neither's CPU is billed to the other: the stub (`BotApiStub` under
uvicorn) and the gateway (a `GatewayRunner` with the `TelegramAdapter`, polling the stub).
The stub keeps the clock, so both figures are on one clock:

- `throughput`: `updates` DMs, one per chat, are queued before the gateway starts; from the
  first getUpdates that returns updates to the last of the `updates` replies reaching the stub.
  The goal is ≥ 500 updates/s.
- `latency`: one update at a time (the next is queued when the reply arrives): from its
  delivery by getUpdates to its reply, per message. `sdk_roundtrip_ms` is a bare Bot API call
  (getMe) through the SDK to the same stub (measured in the gateway process first), and
  `overhead_ms` = latency minus its median: what the adapter and the gateway add per message
  over the loopback HTTP channel itself.

A failure gives `{"status": "error", "reason": ...}`; the rest of the benchmark goes on.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from sessiongate_bench.gateway import latency_summary

__all__ = ["run_telegram_section"]

_THROUGHPUT_AIM = 500.0


def run_telegram_section(*, quick: bool, timeout_s: float = 600.0) -> dict[str, Any]:
    # One update per chat: a second message to a busy chat would interrupt or merge into its
    # turn (the gateway's busy-lane rule), which is not what this section measures.
    updates, sequential = (200, 20) if quick else (5000, 300)
    chats = updates
    result: dict[str, Any] = {
        "status": "ok",
        "updates": updates,
        "chats": chats,
        "sequential": sequential,
        "aim_updates_per_s": _THROUGHPUT_AIM,
    }
    try:
        import telegram  # noqa: F401  # the section needs the extra
    except ImportError:
        return {"status": "error", "reason": "python-telegram-bot is not installed ([telegram])"}
    try:
        with tempfile.TemporaryDirectory(prefix="sessiongate-telegram-bench-") as tmp:
            work = Path(tmp)
            result["throughput"] = _run(work / "t", "burst", updates, chats, timeout_s)
            result["latency"] = _run(work / "l", "sequential", sequential, 1, timeout_s)
    except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
        return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    return result


def _run(work: Path, mode: str, count: int, chats: int, timeout_s: float) -> dict[str, Any]:
    work.mkdir(parents=True)
    me = [sys.executable, "-m", "sessiongate_bench.telegram_child"]
    stub = subprocess.Popen(
        [*me, "stub", mode, str(count), str(chats)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert stub.stdout is not None
        url = stub.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError(f"the stub did not start: {url!r}")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        gateway = subprocess.run(
            [*me, "gateway", url, str(work / "home"), str(count)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if gateway.returncode != 0:
            raise RuntimeError(f"the gateway child failed: {gateway.stderr[-2000:]}")
        measured = json.loads(gateway.stdout.strip().splitlines()[-1])
        stub_line = stub.stdout.readline().strip()
        measured.update(json.loads(stub_line))
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
            # The gateway process's CPU (start-up included) per update: what the rate would
            # be bound by on an idle core, whatever else the machine runs meanwhile.
            "gateway_cpu_ms_per_update": round(cpu_s * 1000 / count, 3),
            "load_average": round(os.getloadavg()[0], 2),
            "seconds": round(span, 3),
            "sent": measured["sent"],
            "typing_calls": measured["actions"],
        }
    latencies = measured["latencies"]
    roundtrip = measured["sdk_roundtrip_s"]
    return {
        "latency_ms": latency_summary(latencies),
        "sdk_roundtrip_ms": latency_summary(roundtrip),
        "overhead_ms": latency_summary(
            [max(0.0, x - sorted(roundtrip)[len(roundtrip) // 2]) for x in latencies]
        ),
    }
