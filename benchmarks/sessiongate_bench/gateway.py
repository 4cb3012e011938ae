"""The gateway-pipeline section of the results (issue 5): turns through the whole pipeline.

Each measurement runs in processes of its own, so its timings and memory are the gateway's,
with the echo agent at zero delay and the default configuration (state.db under a temporary
home, `synchronous=NORMAL`, the sessions.json mirror on):

- `in_process`: `GatewayRunner.handle_message(wait=True)`, one message at a time, round robin
  over `chats` chats on the `api` platform. The latency of each call is the per-turn overhead
  (the echo agent itself takes microseconds). A traced sample afterwards counts the SQLite
  transactions and statements per turn, the turn path's own only (not housekeeping's).
- `feed`: the same turns with 0 and with 10 subscribers of the live feed (`bench/feed.py`).
- `http`: a real `sessiongate run` (uvicorn on 127.0.0.1, log level warning) driven by httpx:
  one request at a time for the overhead percentiles, then `concurrency` requests in flight
  for turns per second (`loaded_ms`: the latencies under that load).
- `memory`: a home whose store knows `known_sessions` sessions (issue 3 aims at ≤ 150 MB with
  100,000); `sessiongate run` starts on it (`start_s` until it listens) and answers
  `memory_turns` requests over `chats` of those sessions; then its resident set (`rss_mb`) and
  its peak (`peak_rss_mb`, VmHWM). `without_mirror`: the same with `mirror_sessions_json`
  off and no sessions.json, which tells the mirror's share from the gateway's own.
- `postgres`: `in_process` again with the store on PostgreSQL, with round trips per turn
  counted from the wire (`bench/postgres.py`); skipped with the reason when no server is named.

The report reads these keys when `status` is "ok" (the others are extra detail):

    {"status": "ok", "chats": 1000, "turns": ...,
     "in_process": {"turns_per_s": float, "overhead_ms": {"p50_ms": ..., "p99_ms": ...}},
     "http":       {"turns_per_s": float, "overhead_ms": {"p50_ms": ..., "p99_ms": ...}}}

A failure gives `{"status": "error", "reason": ...}`; the rest of the benchmark goes on.
Slightly past the ~400-line budget: the in-process, HTTP and memory measurements share their
child-process plumbing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sessiongate_bench.in_process import latency_summary, measure_in_process
from sessiongate_bench.postgres import run_postgres_section

__all__ = [
    "GatewayServer",
    "GatewaySizes",
    "latency_summary",
    "main",
    "measure_in_process",
    "run_gateway_section",
]

# The address `sessiongate run` prints once it listens (cli/run.py `usage_banner`).
_LISTENING = re.compile(r"listening on (http://\S+)")
_MEMORY_AIM_MB = 150


@dataclass(frozen=True, slots=True)
class GatewaySizes:
    chats: int = 1000
    turns: int = 10_000  # in process
    http_sequential: int = 1000
    http_turns: int = 5000
    concurrency: int = 8
    known_sessions: int = 100_000
    memory_turns: int = 2000
    postgres_turns: int = 10_000  # in process on PostgreSQL (`bench/postgres.py`)

    @classmethod
    def quick(cls) -> GatewaySizes:
        # A few seconds of work in all: it checks that the section works, not the speed.
        return cls(
            turns=500,
            http_sequential=50,
            http_turns=250,
            known_sessions=2_000,
            memory_turns=100,
            postgres_turns=150,
        )


def run_gateway_section(
    *,
    quick: bool,
    sizes: GatewaySizes | None = None,
    timeout_s: float = 900.0,
    postgres_url: str | None = None,
) -> dict[str, Any]:
    """Measure the gateway pipeline; `status` is ok or error (with the reason). `postgres`
    is the same in-process measure on the server `postgres_url` names, or skipped."""
    sizes = sizes or (GatewaySizes.quick() if quick else GatewaySizes())
    result: dict[str, Any] = {"status": "ok", "chats": sizes.chats, "turns": sizes.turns}
    result["sizes"] = asdict(sizes)
    with tempfile.TemporaryDirectory(prefix="sessiongate-gateway-bench-") as tmp:
        work = Path(tmp)
        try:
            result["in_process"] = _child_json(
                ["in-process", str(work / "inproc"), str(sizes.chats), str(sizes.turns)],
                timeout_s=timeout_s,
            )
            result["feed"] = _child_json(
                ["feed", str(work / "feed"), str(sizes.chats), str(sizes.turns), "10"],
                timeout_s=timeout_s,
            )
            result["http"] = _measure_http(work / "http", sizes, timeout_s=timeout_s)
            result["memory"] = _measure_memory(work / "memory", sizes, timeout_s=timeout_s)
            result["postgres"] = run_postgres_section(
                postgres_url, chats=sizes.chats, turns=sizes.postgres_turns, timeout_s=timeout_s
            )
        except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
            return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    return result


# ---------------------------------------------------------------------------- children


def _child_json(args: list[str], *, timeout_s: float) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "sessiongate_bench.gateway", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]} child failed: {done.stderr.strip()[-800:]}")
    data: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


def _populate(home: Path, sessions: int) -> dict[str, Any]:
    """A home whose store knows `sessions` sessions, last used days ago, shut down cleanly."""
    from sessiongate import GatewayConfig, SessionSource, SessionStore
    from sessiongate.agents import build_agent_factory
    from sessiongate.core.clock import FakeClock
    from sessiongate.core.platform import Platform
    from sessiongate.gateway import GatewayRunner

    # One session a second, ending days ago: ids carry the second they were made in, and a
    # burst of thousands in one second could draw the same id twice.
    clock = FakeClock(datetime.now(UTC) - timedelta(days=3, seconds=sessions))
    config = GatewayConfig()
    started = time.perf_counter()
    store = SessionStore(home / "sessions", config, clock=clock)
    try:
        with store.database.transaction():
            for i in range(sessions):
                clock.advance(1)
                store.get_or_create_session(
                    SessionSource(platform=Platform.API, chat_id=f"known-{i}")
                )

        async def clean_stop() -> None:
            runner = GatewayRunner(
                store, config, home=home, clock=clock, agent_factory=build_agent_factory(config)
            )
            await runner.start()
            await runner.stop()

        asyncio.run(clean_stop())
    finally:
        store.close()
    return {"sessions": sessions, "seconds": round(time.perf_counter() - started, 2)}


# ---------------------------------------------------------------------------- servers


class GatewayServer:
    """`sessiongate run` on 127.0.0.1 in a child process, stopped with SIGTERM."""

    def __init__(self, home: Path, *, timeout_s: float, env: dict[str, str] | None = None) -> None:
        home.mkdir(parents=True, exist_ok=True)
        self._stderr = open(home / "server.log", "wb")  # noqa: SIM115 (closed in stop)
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sessiongate",
                "run",
                "--home",
                str(home),
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--log-level",
                "warning",
            ],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith("SESSIONGATE_")},
                **(env or {}),
            },
        )
        self.url = self._wait_for_banner(timeout_s)
        self.start_s = round(time.perf_counter() - started, 3)

    def _wait_for_banner(self, timeout_s: float) -> str:
        stdout = self.process.stdout
        assert stdout is not None
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([stdout], [], [], left)
            line = stdout.readline() if ready else ""
            if not line:  # timed out, or the server exited
                break
            match = _LISTENING.search(line)
            if match:
                return match.group(1)
        self.stop()
        raise RuntimeError("sessiongate run did not start listening (see its server.log)")

    def memory_mb(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) of the server process in MB."""
        fields: dict[str, float] = {}
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        for line in status.splitlines():
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024
        return round(fields["VmRSS"], 1), round(fields["VmHWM"], 1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()


async def _drive(
    url: str, messages: list[dict[str, Any]], *, concurrency: int
) -> tuple[float, list[float]]:
    """POST every message with `concurrency` in flight; (seconds, latencies)."""
    import httpx

    latencies: list[float] = []
    pending = iter(messages)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60.0) as client:

        async def worker() -> None:
            for body in pending:
                t0 = time.perf_counter()
                response = await client.post("/v1/messages", json=body)
                latencies.append(time.perf_counter() - t0)
                if response.status_code != 200 or response.json()["status"] != "replied":
                    raise RuntimeError(f"HTTP turn failed: {response.status_code} {response.text}")

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return time.perf_counter() - started, latencies


def _messages(count: int, chats: int, *, prefix: str, offset: int = 0) -> list[dict[str, Any]]:
    return [
        {"chat_id": f"{prefix}{(offset + i) % chats}", "text": f"hello {offset + i}"}
        for i in range(count)
    ]


def _measure_http(home: Path, sizes: GatewaySizes, *, timeout_s: float) -> dict[str, Any]:
    server = GatewayServer(home, timeout_s=timeout_s)
    try:
        asyncio.run(_drive(server.url, _messages(50, 50, prefix="warm"), concurrency=1))
        _, sequential = asyncio.run(
            _drive(
                server.url, _messages(sizes.http_sequential, sizes.chats, prefix="c"), concurrency=1
            )
        )
        load = _messages(sizes.http_turns, sizes.chats, prefix="c", offset=sizes.http_sequential)
        seconds, loaded = asyncio.run(_drive(server.url, load, concurrency=sizes.concurrency))
    finally:
        server.stop()
    return {
        "turns": sizes.http_turns,
        "concurrency": sizes.concurrency,
        "seconds": round(seconds, 3),
        "turns_per_s": round(sizes.http_turns / seconds, 1),
        "overhead_ms": latency_summary(sequential),
        "loaded_ms": latency_summary(loaded),
    }


def _measure_memory(home: Path, sizes: GatewaySizes, *, timeout_s: float) -> dict[str, Any]:
    populated = _child_json(["populate", str(home), str(sizes.known_sessions)], timeout_s=timeout_s)
    # The same store without the sessions.json mirror, to tell its share from the gateway's.
    plain = home.with_name(home.name + "-without-mirror")
    shutil.copytree(home, plain, ignore=shutil.ignore_patterns("sessions.json", "server.log"))
    result: dict[str, Any] = {
        "known_sessions": sizes.known_sessions,
        "populate_s": populated["seconds"],
        "turns": sizes.memory_turns,
        "aim_mb": _MEMORY_AIM_MB,
        **_serve_known(home, sizes, env={}, timeout_s=timeout_s),
    }
    result["without_mirror"] = _serve_known(
        plain, sizes, env={"SESSIONGATE_MIRROR_SESSIONS_JSON": "false"}, timeout_s=timeout_s
    )
    return result


def _serve_known(
    home: Path, sizes: GatewaySizes, *, env: dict[str, str], timeout_s: float
) -> dict[str, Any]:
    """Serve a populated home, answer `memory_turns` requests, read the server's memory."""
    server = GatewayServer(home, env=env, timeout_s=timeout_s)
    try:
        chats = min(sizes.chats, sizes.known_sessions)
        asyncio.run(
            _drive(
                server.url,
                _messages(sizes.memory_turns, chats, prefix="known-"),
                concurrency=sizes.concurrency,
            )
        )
        rss, peak = server.memory_mb()
    finally:
        server.stop()
    return {"start_s": server.start_s, "rss_mb": rss, "peak_rss_mb": peak}


# ---------------------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    """The child processes: `in-process HOME CHATS TURNS`, `feed HOME CHATS TURNS
    SUBSCRIBERS` (`bench/feed.py`) and `populate HOME SESSIONS`, each printing one JSON
    line."""
    parser = argparse.ArgumentParser(prog="python -m sessiongate_bench.gateway")
    sub = parser.add_subparsers(dest="mode", required=True)
    inproc = sub.add_parser("in-process")
    inproc.add_argument("home", type=Path)
    inproc.add_argument("chats", type=int)
    inproc.add_argument("turns", type=int)
    feed = sub.add_parser("feed")
    feed.add_argument("home", type=Path)
    feed.add_argument("chats", type=int)
    feed.add_argument("turns", type=int)
    feed.add_argument("subscribers", type=int)
    populate = sub.add_parser("populate")
    populate.add_argument("home", type=Path)
    populate.add_argument("sessions", type=int)
    args = parser.parse_args(argv)
    if args.mode == "in-process":
        result = asyncio.run(measure_in_process(args.home, args.chats, args.turns))
    elif args.mode == "feed":
        from sessiongate_bench.feed import measure_feed

        result = asyncio.run(measure_feed(args.home, args.chats, args.turns, args.subscribers))
    else:
        result = _populate(args.home, args.sessions)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
