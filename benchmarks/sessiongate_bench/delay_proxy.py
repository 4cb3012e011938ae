"""A loopback TCP proxy that adds a fixed round trip: a database in another zone, on one machine.

`python -m sessiongate_bench.delay_proxy HOST PORT RTT_MS` listens on 127.0.0.1 (a free port,
printed as `PORT <n>`) and forwards every connection to HOST:PORT. Each chunk read in either
direction is held for half the round trip from the moment it was read, then written in the
order it was read: the delay adds to latency without limiting throughput, as distance does.
It runs until its stdin closes.

The delay is kept with the event loop's clock, so it is accurate to about the loop's timer
resolution (a fraction of a millisecond on Linux); `measure_round_trip` tells the figure the
proxy really adds, and the section reports that figure beside the one asked for.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["DelayProxy", "measure_round_trip"]

_CHUNK = 256 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy reader to writer, each chunk `delay` seconds after it was read, in order."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, data = await queue.get()
            if not data:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()

    sending = asyncio.create_task(send())
    try:
        while data := await reader.read(_CHUNK):
            queue.put_nowait((loop.time() + delay, data))
    except OSError:
        pass
    finally:
        queue.put_nowait((loop.time() + delay, b""))
        with contextlib.suppress(OSError):
            await sending


async def _serve(host: str, port: int, rtt_ms: float) -> None:
    one_way = rtt_ms / 2000

    async def connection(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        try:
            await asyncio.gather(
                _pipe(client_r, server_w, one_way), _pipe(server_r, client_w, one_way)
            )
        finally:
            for w in (client_w, server_w):
                w.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


@dataclass
class DelayProxy:
    """The proxy in a child process; `port` is where to connect instead of the target."""

    process: subprocess.Popen[str]
    port: int

    @classmethod
    @contextlib.contextmanager
    def running(cls, host: str, port: int, rtt_ms: float) -> Iterator[DelayProxy]:
        command = [sys.executable, "-m", "sessiongate_bench.delay_proxy", host, str(port)]
        process = subprocess.Popen(
            [*command, str(rtt_ms)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            if not line.startswith("PORT "):
                raise RuntimeError(f"the delay proxy did not start: {line!r}")
            yield cls(process, int(line.split()[1]))
        finally:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()


def measure_round_trip(query: Callable[[], object], *, samples: int = 50) -> float:
    """The median time of `query()` in ms (after a few to warm up)."""
    for _ in range(5):
        query()
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        query()
        times.append(time.perf_counter() - t0)
    times.sort()
    return round(times[len(times) // 2] * 1000, 3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sessiongate_bench.delay_proxy")
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("rtt_ms", type=float)
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.host, args.port, args.rtt_ms))
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
