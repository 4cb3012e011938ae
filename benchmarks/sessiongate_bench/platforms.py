"""The platform-adapter section of the benchmark: per-message overhead of the Slack, Discord
and Matrix adapters over loopback, each through its real SDK against its stub.

Each platform runs in a child process of its own (`python -m sessiongate_bench.platforms
PLATFORM COUNT HOME`), with the stub and a gateway (`GatewayRunner`, the echo agent at zero
delay, the adapter) on one event loop:

- `latency_ms`: one message at a time, each in a chat of its own: from the stub handing the
  event to the SDK (Slack: a Socket Mode envelope; Discord: a gateway DISPATCH) to the reply
  arriving at the stub (chat.postMessage; POST /channels/{id}/messages).
- `sdk_roundtrip_ms`: a bare API call through the same SDK to the same stub (auth.test; GET
  /users/@me): what one loopback request costs on its own.
- `overhead_ms` = latency minus the round trip's median: what the adapter, the kit and the
  gateway add per message (the claim, the durable hand-off, the turn, the send bookkeeping) on
  top of the two loopback hops the message needs anyway.

Matrix also runs a burst: `messages` events at once, each in a room of its own, delivered by
the stub's `/sync` (the adapter takes them as one batch, moves `since` once) and answered
through `PUT .../send`: `updates_per_s` end to end. Its floor is the stub alone in the same
run, no gateway behind it: one `/sync` carrying the burst and as many sends through the same
SDK (`stub_floor_updates_per_s`).

A platform whose SDK is missing, or that fails, gives `{"status": "error", "reason": ...}`;
the rest of the benchmark goes on.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sessiongate_bench.gateway import latency_summary

__all__ = ["run_platforms_section"]

PLATFORMS = ("slack", "discord", "matrix")
_SDK = {"slack": "slack_sdk", "discord": "discord", "matrix": "mautrix"}


def run_platforms_section(*, quick: bool, timeout_s: float = 300.0) -> dict[str, Any]:
    count = 50 if quick else 300
    section: dict[str, Any] = {"status": "ok", "messages": count}
    with tempfile.TemporaryDirectory(prefix="sessiongate-platforms-bench-") as tmp:
        for platform in PLATFORMS:
            section[platform] = _measure(platform, count, Path(tmp) / platform, timeout_s)
    return section


def _measure(platform: str, count: int, home: Path, timeout_s: float) -> dict[str, Any]:
    try:
        __import__(_SDK[platform])
    except ImportError:
        return {"status": "error", "reason": f"the [{platform}] extra is not installed"}
    try:
        child = subprocess.run(
            [sys.executable, "-m", "sessiongate_bench.platforms", platform, str(count), str(home)],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    if child.returncode != 0:
        return {"status": "error", "reason": child.stderr[-1000:]}
    measured = json.loads(child.stdout.strip().splitlines()[-1])
    latencies, roundtrip = measured["latencies"], measured["roundtrip"]
    median = sorted(roundtrip)[len(roundtrip) // 2]
    result: dict[str, Any] = {
        "status": "ok",
        "latency_ms": latency_summary(latencies),
        "sdk_roundtrip_ms": latency_summary(roundtrip),
        "overhead_ms": latency_summary([max(0.0, x - median) for x in latencies]),
    }
    if "burst_seconds" in measured:
        result["updates_per_s"] = round(count / measured["burst_seconds"], 1)
        result["stub_floor_updates_per_s"] = round(count / measured["floor_seconds"], 1)
    return result


# ---------------------------------------------------------------------------- the child


async def _gateway(home: Path, platform: str, section: dict[str, Any], adapter_of: Any) -> Any:
    from sessiongate import GatewayConfig, SessionStore
    from sessiongate.agents import build_agent_factory
    from sessiongate.gateway import GatewayRunner

    config = GatewayConfig(platforms={platform: section}, mirror_sessions_json=False)
    store = SessionStore(home / "sessions", config)
    adapter = adapter_of(config.platforms[platform])
    runner = GatewayRunner(
        store, config, home=home, agent_factory=build_agent_factory(config), adapters=[adapter]
    )
    await runner.start()
    return store, runner, adapter


async def _slack(count: int, home: Path) -> dict[str, Any]:
    from sessiongate.adapters.slack import SlackAdapter
    from sessiongate.testing.stubs import slack as sl

    stub = sl.SlackStub()
    replied: asyncio.Queue[float] = asyncio.Queue()
    stub.on_call = lambda m, _p: (
        replied.put_nowait(time.perf_counter()) if m == "chat.postMessage" else None
    )
    async with sl.serve_stub(stub) as url:
        section = {"bot_token": stub.bot_token, "app_token": stub.app_token,
                   "base_url": url + "/api/", "allow_from": ["*"]}  # fmt: skip
        store, runner, adapter = await _gateway(home, "slack", section, SlackAdapter)
        try:
            while not stub.open_sockets:  # noqa: ASYNC110  # the receiver connects
                await asyncio.sleep(0.01)
            latencies = []
            for i in range(count):
                ts = f"1767225600.{i:06d}"
                event = {"type": "message", "channel": f"D{i:08d}", "channel_type": "im",
                         "user": f"U{i:08d}", "text": "ping", "ts": ts}  # fmt: skip
                started = time.perf_counter()
                stub.push_event({"type": "event_callback", "event_id": f"Ev{i}", "event": event})
                latencies.append(await replied.get() - started)
            roundtrip = []
            for _ in range(count):
                started = time.perf_counter()
                await adapter.client.web.auth_test()
                roundtrip.append(time.perf_counter() - started)
        finally:
            await runner.stop()
            store.close()
    return {"latencies": latencies, "roundtrip": roundtrip}


async def _discord(count: int, home: Path) -> dict[str, Any]:
    from discord.http import Route

    from sessiongate.adapters.discord import DiscordAdapter
    from sessiongate.testing.stubs import discord as dc

    stub = dc.DiscordStub()
    replied: asyncio.Queue[float] = asyncio.Queue()
    stub.on_call = lambda r, _p: replied.put_nowait(time.perf_counter()) if r == "send" else None
    async with dc.serve_stub(stub) as url:
        section = {"token": stub.token, "api_base_url": url, "allow_from": ["*"]}
        store, runner, adapter = await _gateway(home, "discord", section, DiscordAdapter)
        try:
            await stub.session_ready.wait()
            latencies = []
            for i in range(count):
                message = {
                    "id": str(1250000000000000000 + i), "channel_id": str(1100000000000000000 + i),
                    "type": 0, "content": "ping", "author": dc.user(str(5000 + i), f"u{i}"),
                    "timestamp": "2026-01-01T00:00:00.000000+00:00", "edited_timestamp": None,
                    "tts": False, "mention_everyone": False, "mentions": [], "mention_roles": [],
                    "attachments": [], "embeds": [], "pinned": False, "flags": 0,
                }  # fmt: skip
                started = time.perf_counter()
                stub.dispatch("MESSAGE_CREATE", message)
                latencies.append(await replied.get() - started)
            roundtrip = []
            for _ in range(count):
                started = time.perf_counter()
                await adapter.client.bot.http.request(Route("GET", "/users/@me"))
                roundtrip.append(time.perf_counter() - started)
        finally:
            await runner.stop()
            store.close()
    return {"latencies": latencies, "roundtrip": roundtrip}


async def _matrix(count: int, home: Path) -> dict[str, Any]:
    from sessiongate.adapters.kit.outbound import Target
    from sessiongate.adapters.matrix import MatrixAdapter
    from sessiongate.testing.stubs import matrix as mx

    stub = mx.HomeserverStub()
    rooms = [f"!r{i}:{mx.SERVER}" for i in range(2 * count)]
    for i, room in enumerate(rooms):
        stub.add_room(room, [f"@u{i}:{mx.SERVER}"], direct=True)
    replied: asyncio.Queue[float] = asyncio.Queue()
    stub.on_call = lambda c, _b: replied.put_nowait(time.perf_counter()) if c == "send" else None
    async with mx.serve_stub(stub) as url:
        section = {"homeserver": url, "access_token": stub.token, "allow_from": ["*"]}
        store, runner, adapter = await _gateway(home, "matrix", section, MatrixAdapter)
        try:
            latencies = []
            for i in range(count):
                started = time.perf_counter()
                stub.push_text(rooms[i], f"@u{i}:{mx.SERVER}", "ping")
                latencies.append(await replied.get() - started)
            started = time.perf_counter()
            for i in range(count, 2 * count):
                stub.push_text(rooms[i], f"@u{i}:{mx.SERVER}", "ping")
            for _ in range(count):
                await replied.get()
            burst = time.perf_counter() - started
            roundtrip = []
            for _ in range(count):
                started = time.perf_counter()
                await adapter.client._client().whoami()
                roundtrip.append(time.perf_counter() - started)
            # The floor: the stub alone answering what the burst needed of it.
            stub.on_call = None
            position = f"s{len(stub.log_entries) - count}"
            started = time.perf_counter()
            await adapter.client.sync(position, timeout_ms=0)
            for i in range(count, 2 * count):
                await adapter.client.send_text(Target(chat_id=rooms[i]), "echo: ping", markup=False)
            floor = time.perf_counter() - started
        finally:
            await runner.stop()
            store.close()
    return {"latencies": latencies, "roundtrip": roundtrip, "burst_seconds": burst,
            "floor_seconds": floor}  # fmt: skip


def main(argv: list[str]) -> int:
    platform, count, home = argv[0], int(argv[1]), Path(argv[2])
    home.mkdir(parents=True, exist_ok=True)
    run = {"slack": _slack, "discord": _discord, "matrix": _matrix}[platform]
    print(json.dumps(asyncio.run(run(count, home))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
