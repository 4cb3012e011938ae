"""The streaming section of the results: what a streamed turn costs, in processes of its own.

- `durable_messages`: in process (`GatewayRunner.handle_message`), turns whose agent streams
  `extra` completed messages (assistant tool calls and tool results, each stored in its own
  short transaction) against turns that stream none, over the same chats, interleaved
  (`durable_plan`: one of each kind per chat and round, the first kind alternating):
  `per_message_ms` is the difference of the median turn times divided by `extra` (and
  `per_message_mean_ms` the same of the means).
- `first_delta`: a gateway serving HTTP in a child process, its agent stamping (on the
  system-wide monotonic clock) when it was called and when it yielded its first delta; the
  client measures send -> first `delta` event. `overhead_ms` is that minus the agent's own
  time to first token: the gateway's and the SSE path's share.
- `sse`: one turn streaming `deltas` deltas (the agent yields to the loop between them, as a
  model read from the network does); `deltas_per_s` from the first to the last one the client
  received, and how many the stream dropped for being behind (`dropped`).

`{"status": "ok", ...}` or `{"status": "error", "reason": ...}`; `streaming_goals` turns it
into the report's goal rows.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiongate_bench.gateway import latency_summary

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sessiongate.gateway.agent import TurnRequest

__all__ = ["StreamingSizes", "durable_plan", "main", "run_streaming_section", "streaming_goals"]


@dataclass(frozen=True, slots=True)
class StreamingSizes:
    chats: int = 200
    turns: int = 4000  # each kind, in process
    extra: int = 8  # completed messages a tool turn streams (4 calls, 4 results)
    first_deltas: int = 2000
    deltas: int = 50_000

    @classmethod
    def quick(cls) -> StreamingSizes:
        # Checks that the section works, not the speed.
        return cls(turns=100, first_deltas=200, deltas=2000)


def run_streaming_section(
    *, quick: bool, sizes: StreamingSizes | None = None, timeout_s: float = 600.0
) -> dict[str, Any]:
    sizes = sizes or (StreamingSizes.quick() if quick else StreamingSizes())
    result: dict[str, Any] = {"status": "ok", "sizes": asdict(sizes)}
    with tempfile.TemporaryDirectory(prefix="sessiongate-stream-bench-") as tmp:
        work = Path(tmp)
        try:
            result["durable_messages"] = _child(
                ["durable", str(work / "durable"), json.dumps(asdict(sizes))], timeout_s
            )
            (work / "http").mkdir()
            result.update(asyncio.run(_over_http(work / "http", sizes, timeout_s)))
        except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
            return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    return result


def streaming_goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    section = results.get("streaming", {})
    names = (
        "Each extra durable message in a turn ≤ 0.2 ms",
        "Time to first delta over HTTP minus the agent's p99 ≤ 2 ms",
        "An SSE stream ≥ 5,000 deltas/s",
    )
    if section.get("status") != "ok":
        why = f"not measured: {section.get('reason', 'no streaming section')}"
        return [{"goal": name, "measured": why, "passed": None} for name in names]
    per_message = section["durable_messages"]["per_message_ms"]
    first = section["first_delta"]["overhead_ms"]["p99_ms"]
    rate = section["sse"]["deltas_per_s"]
    return [
        {"goal": names[0], "measured": f"{per_message:.3f} ms", "passed": per_message <= 0.2},
        {"goal": names[1], "measured": f"{first:.2f} ms", "passed": first <= 2.0},
        {"goal": names[2], "measured": f"{rate:,.0f} deltas/s", "passed": rate >= 5000},
    ]


# ---------------------------------------------------------------------------- the agent


class BenchAgent:
    """Streams what the message asks: `tools N` (N completed messages, then the reply),
    `stamp` (one delta carrying when it was called and when it yielded it), `burst N`
    (N deltas, yielding to the loop between them), anything else a two-delta reply."""

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[Any]:
        from sessiongate.core.turn_events import MessageCompleted, TextDelta, ToolResult, TurnEnd

        called = time.monotonic()
        words = str(request.messages[-1].get("content") or "").split()
        kind, count = [*words, "", "0"][:2]
        if kind == "stamp":
            yield TextDelta(f"{called:.9f} {time.monotonic():.9f}")
        elif kind == "burst":
            for _ in range(int(count)):
                yield TextDelta("x")
                await asyncio.sleep(0)
        elif kind == "tools":
            for i in range(int(count) // 2):
                call = {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "t", "arguments": "{}"},
                }
                yield MessageCompleted({"role": "assistant", "content": None, "tool_calls": [call]})
                yield ToolResult(f"c{i}", "t", "ok")
        yield TextDelta("done")
        yield TurnEnd("done")

    async def run_turn(self, request: TurnRequest) -> Any:
        raise NotImplementedError("the bench agent streams")

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return ""

    async def aclose(self) -> None:
        return None


# ---------------------------------------------------------------------------- children


def _child(args: list[str], timeout_s: float) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "sessiongate_bench.streaming", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} child failed: {done.stderr.strip()[-800:]}")
    data: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


def _runner(home: Path) -> Any:
    from sessiongate import GatewayConfig, SessionStore
    from sessiongate.gateway import GatewayRunner

    config = GatewayConfig()
    store = SessionStore(home / "sessions", config)
    agent = BenchAgent()
    return GatewayRunner(store, config, home=home, agent_factory=lambda _key: agent), store


def durable_plan(turns: int, chats: int) -> list[tuple[int, str]]:
    """(chat, kind) of each turn: every chat takes one turn of each kind per round, and the
    kind that goes first changes every round, so both kinds run on the same transcripts and
    after turns of both kinds. (With chat `i % chats` and an even number of chats, plain
    turns went to even chats only and tool turns read their own, five times longer,
    histories: that difference was counted as the extra messages' cost.)"""
    plan = []
    for i in range(turns):
        chat, round_ = (i // 2) % chats, i // (2 * chats)
        plan.append((chat, "tools" if (i + round_) % 2 else "plain"))
    return plan


async def _durable(home: Path, sizes: StreamingSizes) -> dict[str, Any]:
    from sessiongate import SessionSource
    from sessiongate.core.platform import Platform
    from sessiongate.gateway import MessageEvent

    runner, store = _runner(home)
    await runner.start()
    times: dict[str, list[float]] = {"plain": [], "tools": []}
    try:
        for i, (chat, kind) in enumerate(durable_plan(sizes.turns * 2 + 100, sizes.chats)):
            text = f"tools {sizes.extra}" if kind == "tools" else "plain"
            source = SessionSource(platform=Platform.API, chat_id=f"c{chat}")
            t0 = time.perf_counter()
            receipt = await runner.handle_message(MessageEvent(source=source, text=text))
            if i >= 100:  # after a warm-up: imports, caches, statements
                times[kind].append(time.perf_counter() - t0)
            if receipt.status != "replied":
                raise RuntimeError(f"turn not replied: {receipt}")
    finally:
        await runner.stop()
        store.close()
    plain, tools = latency_summary(times["plain"]), latency_summary(times["tools"])
    mean = {kind: sum(values) / len(values) for kind, values in times.items()}
    return {
        "extra": sizes.extra,
        "plain_ms": plain,
        "tools_ms": tools,
        # Medians: on a shared machine a few stalled turns move a mean by more than the cost.
        "per_message_ms": round((tools["p50_ms"] - plain["p50_ms"]) / sizes.extra, 4),
        "per_message_mean_ms": round((mean["tools"] - mean["plain"]) * 1000 / sizes.extra, 4),
    }


async def _serve(home: Path) -> None:
    """A gateway on 127.0.0.1 with the bench agent; prints `PORT <n>`, runs until stdin ends."""
    from sessiongate.api.app import create_app
    from sessiongate.api.server import build_server

    runner, store = _runner(home)
    await runner.start()
    ready = asyncio.Event()
    server = build_server(
        create_app(runner, store, runner.config),
        host="127.0.0.1",
        port=0,
        graceful_timeout=5,
        install_signal_handlers=False,
        on_ready=lambda host, port: ready.set(),
        freeze_heap=True,  # as `sessiongate run` does
    )
    serving = asyncio.create_task(server.serve())
    await ready.wait()
    assert server.bound is not None
    print(f"PORT {server.bound[1]}", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    server.should_exit = True
    await serving
    await runner.stop()
    store.close()


async def _over_http(home: Path, sizes: StreamingSizes, timeout_s: float) -> dict[str, Any]:
    import httpx

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sessiongate_bench.streaming",
        "serve",
        str(home),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdin is not None
    try:
        async with asyncio.timeout(timeout_s):
            line = (await proc.stdout.readline()).decode()
            if not line.startswith("PORT "):
                raise RuntimeError(f"the streaming server did not start: {line!r}")
            port = int(line.split()[1])
            first = await _first_deltas(port, sizes.first_deltas)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
                sse = await _burst(http, sizes.deltas)
    finally:
        proc.stdin.close()
        await proc.wait()
    return {"first_delta": first, "sse": sse}


async def _first_deltas(port: int, count: int) -> dict[str, Any]:
    """`count` streamed turns, one after another on one kept-alive connection, read by a
    bare HTTP/1.1 client: the time measured is the gateway's, not an HTTP library's (httpx
    parsing the response added about 0.2 ms to the median and 1 ms to the p99)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    overheads: list[float] = []
    agent_ttft: list[float] = []
    try:
        for i in range(count + 20):
            if i == 20:  # after the warm-up: the client's own collector stays out of it too
                gc.collect()
                gc.freeze()
            body = json.dumps({"chat_id": f"t{i % 50}", "text": "stamp", "stream": True})
            sent = time.monotonic()
            writer.write(_post(body.encode()))
            try:
                stamp, received = await _read_stream(reader)
            except asyncio.IncompleteReadError as closed:
                if closed.partial:  # closed mid-response: a real failure
                    raise
                # The server closed the kept-alive connection before this request reached it
                # (its idle timeout, on a loaded machine): reconnect and send it again.
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                sent = time.monotonic()
                writer.write(_post(body.encode()))
                stamp, received = await _read_stream(reader)
            called, yielded = map(float, stamp.split())
            if i >= 20:
                overheads.append((received - sent) - (yielded - called))
                agent_ttft.append(yielded - called)
    finally:
        gc.unfreeze()
        writer.close()
    return {
        "requests": count,
        "overhead_ms": latency_summary(overheads),
        "agent_ttft_ms": latency_summary(agent_ttft),
    }


def _post(body: bytes) -> bytes:
    head = (
        "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _read_stream(reader: asyncio.StreamReader) -> tuple[str, float]:
    """Read one chunked `text/event-stream` response to its end; the first delta's text and
    when it arrived."""
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200") or b"chunked" not in head.lower():
        raise RuntimeError(f"not a stream: {head[:200]!r}")
    pending = b""
    stamp: tuple[str, float] | None = None
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip(), 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            break
        if stamp is None:
            pending += chunk[:-2]
            start = pending.find(b"event: delta\ndata: ")
            end = pending.find(b"\n", start + 19) if start >= 0 else -1
            if end >= 0:
                stamp = (json.loads(pending[start + 19 : end])["text"], time.monotonic())
    if stamp is None:
        raise RuntimeError("the stream ended without a delta")
    return stamp


async def _burst(http: Any, deltas: int) -> dict[str, Any]:
    body = {"chat_id": "burst", "text": f"burst {deltas}", "stream": True}
    received = 0
    first = last = 0.0
    async with http.stream("POST", "/v1/messages", json=body) as response:
        async for line in response.aiter_lines():
            if line == "event: delta":
                last = time.monotonic()
                first = first or last
                received += 1
    elapsed = max(last - first, 1e-9)
    return {
        "deltas": deltas,
        "received": received,
        "dropped": deltas + 1 - received,  # + the final "done" delta
        "seconds": round(elapsed, 3),
        "deltas_per_s": round((received - 1) / elapsed, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """The children: `durable HOME SIZES_JSON` (one JSON line) and `serve HOME`."""
    parser = argparse.ArgumentParser(prog="python -m sessiongate_bench.streaming")
    parser.add_argument("mode", choices=("durable", "serve"))
    parser.add_argument("home", type=Path)
    parser.add_argument("sizes", nargs="?", default="{}")
    args = parser.parse_args(argv)
    if args.mode == "serve":
        asyncio.run(_serve(args.home))
        return 0
    sizes = StreamingSizes(**json.loads(args.sizes))
    sys.stdout.write(json.dumps(asyncio.run(_durable(args.home, sizes))) + "\n")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
