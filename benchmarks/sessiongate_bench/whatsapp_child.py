"""The child process of the WhatsApp benchmark section (`bench/whatsapp.py`):
`python -m sessiongate_bench.whatsapp_child gateway|floor burst|sequential COUNT HOME`.

One event loop holds the Graph API stub (uvicorn), the receiver of the signed webhooks
(uvicorn) and the poster playing Meta (httpx), so what is measured is the same in both modes
but the receiver:

- `gateway`: the gateway's own HTTP app (`create_app`) with the `WhatsAppAdapter` behind
  `POST /hooks/whatsapp`, a `GatewayRunner` and the echo agent: signature, claim, durable
  hand-off, the turn, the reply through pywa to the stub.
- `floor`: a bare receiver with no gateway behind it: it checks the same signature, reads the
  JSON, answers 200 and sends the same reply through the same pywa client. What the stub, the
  two loopback hops and the SDK cost on their own.

Prints one JSON line: `seconds` (first post to last reply at the stub), `latencies` (per
message, post to reply, in sequential mode), `sent`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request

__all__ = ["main"]

# Webhook posts in flight at once in burst mode (Meta posts concurrently). More gave less on
# one event loop: with 32, the floor took about twice as long for 300 messages as with 4 (the
# loop juggles the connections of the poster, the receiver and the stub at once).
_IN_FLIGHT = 4


@asynccontextmanager
async def _serve(app: Any) -> AsyncIterator[str]:
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", access_log=False
        )
    )
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:  # uvicorn offers no event for it
            if task.done():
                task.result()
                raise RuntimeError("a bench server did not start")
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


async def _gateway(stack: AsyncExitStack, stub: Any, url: str, home: Path) -> str:
    from sessiongate import GatewayConfig, SessionStore
    from sessiongate.adapters.whatsapp import WhatsAppAdapter
    from sessiongate.agents import build_agent_factory
    from sessiongate.api.app import create_app
    from sessiongate.core.config import WhatsAppConfig
    from sessiongate.gateway import GatewayRunner

    config = GatewayConfig(
        platforms={
            "whatsapp": {
                "token": stub.token,
                "phone_number_id": stub.phone_number_id,
                "app_secret": stub.app_secret,
                "verify_token": "bench",
                "base_url": url,
                "allow_from": ["*"],
            }
        }
    )
    section = config.platforms["whatsapp"]
    assert isinstance(section, WhatsAppConfig)
    store = SessionStore(home / "sessions", config)
    adapter = WhatsAppAdapter(section)
    runner = GatewayRunner(
        store, config, home=home, agent_factory=build_agent_factory(config), adapters=[adapter]
    )
    await runner.start()

    async def stop() -> None:
        await runner.stop()
        store.close()

    stack.push_async_callback(stop)
    app = create_app(runner, store, config)
    app.state.hooks = {"whatsapp": adapter}
    base = await stack.enter_async_context(_serve(app))
    return f"{base}/hooks/whatsapp"


async def _floor(stack: AsyncExitStack, stub: Any, url: str) -> str:
    from pywa.utils import webhook_updates_validator
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from sessiongate.adapters.kit.outbound import Target
    from sessiongate.adapters.whatsapp.client import WhatsAppClient

    client = WhatsAppClient(stub.token, phone_number_id=stub.phone_number_id, base_url=url)
    stack.push_async_callback(client.close)
    tasks: set[asyncio.Task[Any]] = set()

    async def hook(request: Request) -> JSONResponse:
        body = await request.body()
        signature = request.headers.get("x-hub-signature-256", "")
        if not webhook_updates_validator(stub.app_secret, body, signature):
            return JSONResponse({}, status_code=401)
        value = json.loads(body)["entry"][0]["changes"][0]["value"]
        message = value["messages"][0]
        reply = f"echo: {message['text']['body']}"
        task = asyncio.create_task(client.send_text(Target(message["from"]), reply, markup=True))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return JSONResponse({"ok": True})

    base = await stack.enter_async_context(
        _serve(Starlette(routes=[Route("/", hook, methods=["POST"])]))
    )
    return f"{base}/"


async def _run(receiver: str, mode: str, count: int, home: Path) -> dict[str, Any]:
    import httpx

    from sessiongate.testing.stubs.whatsapp import GraphApiStub, serve_stub, sign

    stub = GraphApiStub()
    arrived: dict[int, float] = {}
    all_in = asyncio.Event()
    next_one = asyncio.Event()

    def on_call(call: str, body: dict[str, Any]) -> None:
        text = str((body.get("text") or {}).get("body", ""))
        if call == "messages" and text.startswith("echo: bench "):
            arrived[int(text.rsplit(" ", 1)[-1])] = time.perf_counter()
            next_one.set()
            if len(arrived) >= count:
                all_in.set()

    stub.on_call = on_call
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(serve_stub(stub))
        if receiver == "gateway":
            target = await _gateway(stack, stub, url, home)
        else:
            target = await _floor(stack, stub, url)
        http = await stack.enter_async_context(
            httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=_IN_FLIGHT))
        )
        slots = asyncio.Semaphore(_IN_FLIGHT)

        async def post(n: int) -> float:
            # One user per message: a second message to a busy chat would merge into its turn.
            body = stub.message(f"bench {n}", sender=f"1555{n:07d}", message_id=f"wamid.B{n}")
            raw = json.dumps(body, separators=(",", ":")).encode()
            headers = {"content-type": "application/json",
                       "x-hub-signature-256": sign(stub.app_secret, raw)}  # fmt: skip
            async with slots:
                started = time.perf_counter()
                answer = await http.post(target, content=raw, headers=headers)
            if answer.status_code != 200:
                raise RuntimeError(f"the webhook answered {answer.status_code}: {answer.text}")
            return started

        latencies: list[float] = []
        first = time.perf_counter()
        if mode == "burst":
            await asyncio.gather(*(post(n) for n in range(count)))
            await asyncio.wait_for(all_in.wait(), 600)
        else:
            for n in range(count):
                next_one.clear()
                started = await post(n)
                while n not in arrived:
                    await asyncio.wait_for(next_one.wait(), 60)
                    next_one.clear()
                latencies.append(arrived[n] - started)
        seconds = max(arrived.values()) - first
        return {"seconds": seconds, "latencies": latencies, "sent": len(stub.sent)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sessiongate_bench.whatsapp_child")
    parser.add_argument("receiver", choices=["gateway", "floor"])
    parser.add_argument("mode", choices=["burst", "sequential"])
    parser.add_argument("count", type=int)
    parser.add_argument("home", type=Path)
    args = parser.parse_args(argv)
    result = asyncio.run(_run(args.receiver, args.mode, args.count, args.home))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
