"""The child processes of the Telegram benchmark section (`bench/telegram.py`): the Bot API
stub (`stub burst|sequential COUNT CHATS`) and the gateway polling it (`gateway URL HOME
COUNT`). A module of its own, so `python -m` runs it without the benchmark package having
imported it first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]


async def _stub_main(mode: str, count: int, chats: int) -> None:
    from sessiongate.testing.stubs.telegram import BotApiStub, serve_stub

    stub = BotApiStub()
    times: dict[str, float] = {}
    latencies: list[float] = []
    done = asyncio.Event()
    pushed = 0

    def push() -> None:
        nonlocal pushed
        chat = 10_000 + pushed % chats
        stub.push_message(f"bench {pushed}", chat_id=chat, user_id=chat)
        pushed += 1

    def on_call(method: str, params: dict[str, Any]) -> None:
        now = time.perf_counter()
        if method == "sendMessage" and str(params.get("text", "")).startswith("echo: bench"):
            number = int(str(params["text"]).rsplit(" ", 1)[-1])
            delivered = stub.delivered_at.get(number + 1)  # update ids count from 1
            if delivered is not None:
                latencies.append(now - delivered)
            if len(stub.sent) + 1 >= count:
                times["last_send"] = now
                done.set()
            elif mode == "sequential":
                push()

    stub.on_call = on_call
    if mode == "burst":
        for _ in range(count):
            push()
    else:
        push()
    async with serve_stub(stub) as url:
        print(url, flush=True)
        await done.wait()
        # Let the last sendMessage be answered before the report.
        await asyncio.sleep(0.2)
        print(
            json.dumps(
                {
                    "first_delivery": min(stub.delivered_at.values(), default=0.0),
                    "last_send": times.get("last_send", 0.0),
                    "sent": len(stub.sent),
                    "actions": len(stub.actions),
                    "latencies": latencies,
                }
            ),
            flush=True,
        )
        await asyncio.to_thread(sys.stdin.read)


async def _gateway_main(url: str, home: Path, count: int) -> None:
    from sessiongate import GatewayConfig, SessionStore
    from sessiongate.adapters.telegram import TelegramAdapter
    from sessiongate.adapters.telegram.client import TelegramClient
    from sessiongate.agents import build_agent_factory
    from sessiongate.core.config import TelegramConfig
    from sessiongate.gateway import GatewayRunner

    token = "1000:TESTTOKEN"
    # The bare channel: one Bot API call through the SDK to the stub, before the gateway exists.
    probe = TelegramClient(token, base_url=url)
    await probe.open()
    roundtrip: list[float] = []
    for _ in range(50):
        start = time.perf_counter()
        await probe.bot.get_me()
        roundtrip.append(time.perf_counter() - start)
    await probe.close()
    config = GatewayConfig(
        platforms={
            "telegram": {
                "token": token,
                "base_url": url,
                "allow_from": ["*"],
                "poll_timeout_seconds": 1,
            }
        }
    )
    section = config.platforms["telegram"]
    assert isinstance(section, TelegramConfig)
    store = SessionStore(home / "sessions", config)
    adapter = TelegramAdapter(section)
    runner = GatewayRunner(
        store, config, home=home, agent_factory=build_agent_factory(config), adapters=[adapter]
    )
    await runner.start()
    try:
        await asyncio.wait_for(adapter.wait_events(count), 600)
        await runner.wait_idle()
    finally:
        await runner.stop()
        store.close()
    print(json.dumps({"sdk_roundtrip_s": roundtrip, "gateway_sent": adapter.counters.sent}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sessiongate_bench.telegram")
    sub = parser.add_subparsers(dest="role", required=True)
    stub = sub.add_parser("stub")
    stub.add_argument("mode", choices=["burst", "sequential"])
    stub.add_argument("count", type=int)
    stub.add_argument("chats", type=int)
    gateway = sub.add_parser("gateway")
    gateway.add_argument("url")
    gateway.add_argument("home", type=Path)
    gateway.add_argument("count", type=int)
    args = parser.parse_args(argv)
    if args.role == "stub":
        asyncio.run(_stub_main(args.mode, args.count, args.chats))
    else:
        asyncio.run(_gateway_main(args.url, args.home, args.count))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
