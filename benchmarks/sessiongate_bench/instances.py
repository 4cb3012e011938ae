"""Instances on one database: turns per second with 1, 2 and 3 `sessiongate run` processes on
one PostgreSQL schema, beside one instance on SQLite measured in the same run.

Each configuration gets fresh processes (the echo agent at zero delay, a home of its own each)
and, on PostgreSQL, a fresh schema that all its instances share, dropped afterwards. The
instances start one at a time (the first applies the migrations) and each must answer
`GET /healthz` before the load begins. The load is `chats` concurrent chat clients over HTTP,
each sending its next message only after the previous one was replied to, chat k always to
instance k mod n (round robin; a waiting request on an instance that does not own the chat's
lane is not told of the owner's reply, docs/SCALING.md), `turns` turns in all. A few warm-up
turns per instance go first and are not counted.

The section is skipped with the reason without a PostgreSQL server (`--postgres-url` or
`SESSIONGATE_BENCH_POSTGRES_URL`). The clients run in the benchmark's own process on the same
cores as the instances and the server, so on a small machine more instances share the same
CPUs rather than add to them: the figures say what this machine does, with its load average.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sessiongate_bench.gateway import GatewayServer
from sessiongate_bench.postgres import HOW_TO, bench_schema, server_problem

__all__ = ["InstanceSizes", "instances_lines", "run_instances_section"]

_WARM_TURNS = 5  # per instance, before the clock starts


@dataclass(frozen=True, slots=True)
class InstanceSizes:
    chats: int = 20
    turns: int = 4000  # per configuration
    counts: tuple[int, ...] = (1, 2, 3)

    @classmethod
    def quick(cls) -> InstanceSizes:
        # A few seconds per configuration: it checks that every configuration works.
        return cls(turns=150)


def run_instances_section(
    url: str | None, *, quick: bool, sizes: InstanceSizes | None = None, timeout_s: float = 600.0
) -> dict[str, Any]:
    """`{"status": "ok", "sqlite": {...}, "postgres": [{...}, ...]}`, or skipped / error."""
    sizes = sizes or (InstanceSizes.quick() if quick else InstanceSizes())
    if url is None:
        return {"status": "skipped", "reason": HOW_TO}
    problem = server_problem(url)
    if problem is not None:
        return {"status": "skipped", "reason": problem}
    result: dict[str, Any] = {"status": "ok", "sizes": asdict(sizes)}
    result["load_average_before"] = _load_average()
    with tempfile.TemporaryDirectory(prefix="sessiongate-instances-bench-") as tmp:
        work = Path(tmp)
        try:
            sqlite = _measure(work / "sqlite", [{}], sizes, timeout_s=timeout_s)
            sqlite["store"] = "sqlite"
            result["sqlite"] = sqlite
            result["postgres"] = []
            for n in sizes.counts:
                with bench_schema(url) as schema_url:
                    envs = [{"SESSIONGATE_STORE__URL": schema_url}] * n
                    part = _measure(work / f"pg{n}", envs, sizes, timeout_s=timeout_s)
                part["store"] = "postgres"
                part["ratio_to_sqlite"] = round(part["turns_per_s"] / sqlite["turns_per_s"], 2)
                result["postgres"].append(part)
        except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
            return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    result["load_average_after"] = _load_average()
    return result


def _load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _measure(
    work: Path, envs: list[dict[str, str]], sizes: InstanceSizes, *, timeout_s: float
) -> dict[str, Any]:
    """Start one instance per environment, one at a time, drive the load, stop them all."""
    servers: list[GatewayServer] = []
    try:
        for k, env in enumerate(envs):
            servers.append(GatewayServer(work / f"i{k}", env=env, timeout_s=timeout_s))
        urls = [server.url for server in servers]
        seconds, completed = asyncio.run(_drive(urls, sizes, timeout_s=timeout_s))
    finally:
        for server in servers:
            server.stop()
    return {
        "instances": len(envs),
        "turns": sizes.turns,
        "completed": completed,
        "seconds": round(seconds, 3),
        "turns_per_s": round(completed / seconds, 1),
    }


async def _drive(urls: list[str], sizes: InstanceSizes, *, timeout_s: float) -> tuple[float, int]:
    """(seconds, turns replied) for `sizes.turns` turns over `sizes.chats` chat clients."""
    import httpx

    limits = httpx.Limits(max_connections=sizes.chats, max_keepalive_connections=sizes.chats)
    clients = [httpx.AsyncClient(base_url=u, limits=limits, timeout=timeout_s) for u in urls]
    try:
        for n, client in enumerate(clients):
            health = await client.get("/healthz")
            if health.status_code != 200:
                raise RuntimeError(f"{client.base_url} is not healthy: {health.status_code}")
            for i in range(_WARM_TURNS):
                # Warm-up chats of the instance's own: a lane another instance holds would
                # wait for that lease.
                await _turn(client, f"warm{n}-{i}", "warm")
        # Chat k sends turns k, k + chats, k + 2 * chats, ... so the counts add up to `turns`.
        shares = [len(range(k, sizes.turns, sizes.chats)) for k in range(sizes.chats)]
        done = [0]

        async def chat(k: int) -> None:
            client = clients[k % len(clients)]
            for i in range(shares[k]):
                await _turn(client, f"c{k}", f"hello {i}")
                done[0] += 1

        started = time.perf_counter()
        await asyncio.gather(*(chat(k) for k in range(sizes.chats)))
        return time.perf_counter() - started, done[0]
    finally:
        for client in clients:
            await client.aclose()


async def _turn(client: Any, chat_id: str, text: str) -> None:
    response = await client.post("/v1/messages", json={"chat_id": chat_id, "text": text})
    if response.status_code != 200 or response.json().get("status") != "replied":
        raise RuntimeError(f"HTTP turn failed: {response.status_code} {response.text[:300]}")


def instances_lines(section: dict[str, Any]) -> list[str]:
    """The report's markdown for the section: one line per configuration, or why not."""
    lines = ["## Instances on one PostgreSQL database", ""]
    if section.get("status") != "ok":
        why = section.get("reason", "no instances section")
        return [*lines, f"Not measured: {why}.", ""]
    sizes, lite = section["sizes"], section["sqlite"]
    lines += [
        f"{sizes['turns']:,} turns per configuration over HTTP from {sizes['chats']} chat "
        "clients (each sends its next message after the previous reply, chat k to instance "
        f"k mod n); load average {section['load_average_before']} before, "
        f"{section['load_average_after']} after.",
        "",
        f"- SQLite, 1 instance: {lite['turns_per_s']:,.0f} turns/s "
        f"({lite['completed']:,} of {lite['turns']:,} turns)",
    ]
    for part in section["postgres"]:
        n = part["instances"]
        lines.append(
            f"- PostgreSQL, {n} instance{'s' if n > 1 else ''}: {part['turns_per_s']:,.0f} "
            f"turns/s, {part['ratio_to_sqlite']:.2f}x SQLite's single instance "
            f"({part['completed']:,} of {part['turns']:,} turns)"
        )
    return [*lines, ""]
