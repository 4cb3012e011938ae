"""The gateway measured in process: turns per second and the overhead of each, then what a
sample of turns asks of the database (SQLite's statements traced, or PostgreSQL's round trips
when a server is named). The children of `bench/gateway.py` and `bench/postgres.py` both run
it.
"""

from __future__ import annotations

import contextvars
import time
from typing import TYPE_CHECKING, Any

from sessiongate_bench.postgres_trace import server_cpu_reader, traced_turns

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from sessiongate import GatewayConfig, SessionStore
    from sessiongate.gateway import GatewayRunner, MessageEvent

__all__ = ["latency_summary", "measure_in_process"]


def latency_summary(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99/max in milliseconds (nearest rank)."""
    if not seconds:
        return {"p50_ms": 0.0, "p95_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    ordered = sorted(seconds)

    def rank(p: float) -> float:
        index = min(len(ordered) - 1, max(0, round(p * len(ordered)) - 1))
        return round(ordered[index] * 1000, 3)

    return {
        "p50_ms": rank(0.50),
        "p95_ms": rank(0.95),
        "p99_ms": rank(0.99),
        "max_ms": round(ordered[-1] * 1000, 3),
    }


async def measure_in_process(
    home: Path, chats: int, turns: int, *, url: str | None = None
) -> dict[str, Any]:
    """Turns/s and overhead in process; then what a sample of turns asks of the database:
    SQLite's statements (traced), or PostgreSQL's round trips when `url` names one."""
    from sessiongate import GatewayConfig, SessionSource, SessionStore
    from sessiongate.agents import build_agent_factory
    from sessiongate.core.platform import Platform
    from sessiongate.gateway import GatewayRunner, MessageEvent

    config = GatewayConfig() if url is None else _postgres_config(url)
    store = SessionStore(home / "sessions", config)
    runner = GatewayRunner(store, config, home=home, agent_factory=build_agent_factory(config))
    await runner.start()
    try:

        def event(i: int, prefix: str = "c") -> MessageEvent:
            source = SessionSource(platform=Platform.API, chat_id=f"{prefix}{i % chats}")
            return MessageEvent(source=source, text=f"hello {i}")

        for i in range(50):  # warm-up on chats of their own: imports, caches, statements
            await runner.handle_message(event(i, "warm"))
        events = [event(i) for i in range(turns)]
        latencies: list[float] = []
        # CPU as well as wall time: on a shared machine the CPU a turn costs varies far less.
        server_cpu = _server_cpu_reader(store, url)
        cpu, server_before = time.process_time(), server_cpu()
        started = time.perf_counter()
        for message in events:
            t0 = time.perf_counter()
            receipt = await runner.handle_message(message)
            latencies.append(time.perf_counter() - t0)
            if receipt.status != "replied":
                raise RuntimeError(f"turn not replied: {receipt}")
        elapsed = time.perf_counter() - started
        cpu, server = time.process_time() - cpu, server_cpu() - server_before
        counts: dict[str, Any]
        if url is None:
            sample = [event(i) for i in range(turns, turns + 200)]
            traced = await _traced_turns(store, runner, sample)
            counts = {
                "transactions_per_turn": round(traced.count("BEGIN IMMEDIATE") / len(sample), 2),
                "statements_per_turn": round(len(traced) / len(sample), 1),
            }
        else:
            # A known chat's turn (what most turns are), and a chat's first one apart: it
            # creates the session and takes the lane's lease.
            known = [event(i) for i in range(min(200, turns))]
            steady = await traced_turns(store, runner, known)
            fresh = [event(i, f"first{i}-") for i in range(100)]  # a chat of its own each
            first = await traced_turns(store, runner, fresh)
            per_turn = {k: v for k, v in first.items() if k.endswith("_per_turn")}
            counts = {**steady, "first_turn": per_turn}
    finally:
        await runner.stop()
        store.close()
    return {
        "turns": turns,
        "seconds": round(elapsed, 3),
        "turns_per_s": round(turns / elapsed, 1),
        "overhead_ms": latency_summary(latencies),
        "cpu_ms_per_turn": round(1000 * cpu / turns, 3),
        **({} if url is None else {"server_cpu_ms_per_turn": round(1000 * server / turns, 3)}),
        **counts,
    }


def _postgres_config(url: str) -> GatewayConfig:
    """The store on `url`, with the instance's heartbeat and its sweep (each a transaction
    of its own on the writer's connection, every 2 s and 1 s by default) out of the measured
    minutes, so the counted round trips and commits are the turns' own (on a slow machine a
    traced sample outlasted a sweep and counted its commit)."""
    from sessiongate import GatewayConfig

    store = {
        "url": url,
        "heartbeat_seconds": 3600,
        "lease_ttl_seconds": 7200,
        "sweep_seconds": 3600,
    }
    return GatewayConfig.model_validate({"store": store})


def _server_cpu_reader(store: SessionStore, url: str | None) -> Callable[[], float]:
    if url is None:
        return lambda: 0.0
    return server_cpu_reader(store)


# Set while the traced sample runs. A statement counts only when it runs in that context: the
# sample's own task and the tasks it starts (a lane's worker) inherit it; housekeeping, the
# mirror and the checkpointer, started before it on tasks or threads of their own, do not, so a
# prune landing in the sample is not charged to the turns. (A turn step sent to a thread must go
# through `asyncio.to_thread`, which carries the context; a long transcript's threaded read is a
# snapshot on a reader connection, not traced here.)
_SAMPLING: contextvars.ContextVar[bool] = contextvars.ContextVar("sampling", default=False)


async def _traced_turns(
    store: SessionStore, runner: GatewayRunner, events: Sequence[MessageEvent]
) -> list[str]:
    """The SQL statements the turn path of `events` runs on the store's connection."""
    traced: list[str] = []

    def trace(statement: str) -> None:
        if _SAMPLING.get():
            traced.append(statement)

    conn = store.database.conn  # type: ignore[attr-defined]
    conn.set_trace_callback(trace)
    token = _SAMPLING.set(True)
    try:
        for message in events:
            await runner.handle_message(message)
    finally:
        _SAMPLING.reset(token)
        conn.set_trace_callback(None)
    return traced
