"""The child processes of the Signal benchmark section (`bench/signal_section.py`): the
signal-cli stub
(`stub burst|sequential COUNT`), the gateway reading it (`gateway URL HOME COUNT`), and the
floor (`floor URL COUNT`: a bare loop that answers each event straight from the stream, with
no gateway). A module of its own, so `python -m` runs it without the benchmark package having
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

_BASE_STAMP = 1767225600000


async def _stub_main(mode: str, count: int) -> None:
    from sessiongate.testing.stubs.signal import SignalCliStub, data_envelope, serve_stub

    latencies: list[float] = []
    times: dict[str, float] = {}
    done = asyncio.Event()
    pushed = 0

    class BenchStub(SignalCliStub):
        def _api_send(self, params: dict[str, Any]) -> Any:
            result = super()._api_send(params)
            text = str(params.get("message", ""))
            if text.startswith("echo: bench "):
                now = time.perf_counter()
                number = int(text.rsplit(" ", 1)[-1])
                delivered = self.delivered_at.get(_BASE_STAMP + number)
                if delivered is not None:
                    latencies.append(now - delivered)
                if len(latencies) >= count:
                    times["last_send"] = now
                    done.set()
                elif mode == "sequential":
                    push()
            return result

    stub = BenchStub()

    def push() -> None:
        nonlocal pushed
        # One sender per message: a second message to a busy chat would merge into its turn.
        n = pushed
        stub.push(data_envelope(f"bench {n}", number=f"+1666{n:07d}", timestamp=_BASE_STAMP + n,
                                uuid=f"00000000-0000-4000-8000-{n:012d}"))  # fmt: skip
        pushed += 1

    async with serve_stub(stub) as url:
        print(url, flush=True)
        # signal-cli sends a new stream only what comes after it opened.
        while not stub.open_streams:  # noqa: ASYNC110  # the consumer is another process
            await asyncio.sleep(0.005)
        if mode == "burst":
            for _ in range(count):
                push()
        else:
            push()
        await done.wait()
        print(
            json.dumps(
                {
                    "first_delivery": min(stub.delivered_at.values(), default=0.0),
                    "last_send": times.get("last_send", 0.0),
                    "sent": len(stub.sent),
                    "reactions": len(stub.reactions),
                    "typing_calls": len(stub.typing),
                    "latencies": latencies,
                }
            ),
            flush=True,
        )
        await asyncio.to_thread(sys.stdin.read)


async def _gateway_main(url: str, home: Path, count: int) -> None:
    from sessiongate import GatewayConfig, SessionStore
    from sessiongate.adapters.signal import SignalAdapter
    from sessiongate.agents import build_agent_factory
    from sessiongate.core.config import SignalConfig
    from sessiongate.gateway import GatewayRunner

    config = GatewayConfig(
        platforms={"signal": {"url": url, "account": "+15550000001", "allow_from": ["*"]}}
    )
    section = config.platforms["signal"]
    assert isinstance(section, SignalConfig)
    store = SessionStore(home / "sessions", config)
    adapter = SignalAdapter(section)
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
    print(json.dumps({"gateway_sent": adapter.counters.sent}))


async def _floor_main(url: str, count: int) -> None:
    """The stub's own floor: read the stream and answer each message at once, one JSON-RPC
    send per event, in order: what the two loopback hops cost with nothing between them."""
    from sessiongate.adapters.signal.client import SignalClient

    client = SignalClient(url, "+15550000001")
    answered = 0
    try:
        async with client.events(None) as events:
            async for sse in events:
                if sse.comment or sse.event != "receive":
                    continue
                envelope = json.loads(sse.data)["envelope"]
                text = envelope["dataMessage"]["message"]
                params = {"recipient": [envelope["sourceUuid"]], "message": f"echo: {text}"}
                await client.rpc("send", params)
                answered += 1
                if answered >= count:
                    break
    finally:
        await client.close()
    print(json.dumps({"floor_sent": answered}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sessiongate_bench.signal_child")
    sub = parser.add_subparsers(dest="role", required=True)
    stub = sub.add_parser("stub")
    stub.add_argument("mode", choices=["burst", "sequential"])
    stub.add_argument("count", type=int)
    gateway = sub.add_parser("gateway")
    gateway.add_argument("url")
    gateway.add_argument("home", type=Path)
    gateway.add_argument("count", type=int)
    floor = sub.add_parser("floor")
    floor.add_argument("url")
    floor.add_argument("count", type=int)
    args = parser.parse_args(argv)
    if args.role == "stub":
        asyncio.run(_stub_main(args.mode, args.count))
    elif args.role == "gateway":
        asyncio.run(_gateway_main(args.url, args.home, args.count))
    else:
        asyncio.run(_floor_main(args.url, args.count))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
