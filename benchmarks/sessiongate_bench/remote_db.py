"""A database at a distance: one gateway under load over HTTP, on SQLite, on PostgreSQL direct,
and on PostgreSQL behind a loopback proxy that adds a fixed round trip (`delay_proxy.py`).

Each configuration is a fresh `sessiongate run` (the echo agent at zero delay, a home of its own;
on PostgreSQL a fresh schema, dropped afterwards) driven by `chats` chat clients (each on an
HTTP connection of its own), each sending its next message only after the previous one was
replied to, `turns` turns in all, while
`GET /healthz` is probed every 20 ms on a connection of its own. The probe's latency is the
event loop's: a gateway whose loop waits on the database answers it late, and so answers every
other request late too, streamed deltas included.

Reported per configuration: turns/s, the turns' latency and the probe's p50/p99; per proxy, the
round trip it really added (the median of `SELECT 1` through it minus direct). The goals
compare, in the same run, 16 chats behind a 3 ms round trip with 16 chats direct (turns/s ≥
0.7x, probe p99 ≤ 1.3x), and 64 chats with 16 behind the same 3 ms.

Skipped with the reason without a PostgreSQL server (`--postgres-url` or
`SESSIONGATE_BENCH_POSTGRES_URL`). The clients, the proxy, the gateway and the server share the
machine's cores, so on a small machine the figures are what this machine does.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from sessiongate_bench.delay_proxy import DelayProxy, measure_round_trip
from sessiongate_bench.gateway import GatewayServer, latency_summary
from sessiongate_bench.postgres import HOW_TO, bench_schema, server_problem

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["RemoteDbSizes", "remote_db_goals", "remote_db_lines", "run_remote_db_section"]

_PROBE_EVERY_S = 0.02
_WARM_TURNS = 5


@dataclass(frozen=True, slots=True)
class RemoteDbSizes:
    turns: int = 2000  # per configuration
    chats: tuple[int, ...] = (16, 64)
    round_trips_ms: tuple[float, ...] = (1.0, 3.0)

    @classmethod
    def quick(cls) -> RemoteDbSizes:
        # Every configuration runs, a couple of turns per chat: it checks the section works.
        return cls(turns=128)


@dataclass
class _Config:
    store: str  # "sqlite" | "postgres"
    chats: int
    added_rtt_ms: float = 0.0
    result: dict[str, Any] = field(default_factory=dict)


def run_remote_db_section(
    url: str | None, *, quick: bool, sizes: RemoteDbSizes | None = None, timeout_s: float = 900.0
) -> dict[str, Any]:
    """`{"status": "ok", "runs": [...], "proxies": [...]}`, or skipped / error with the reason."""
    sizes = sizes or (RemoteDbSizes.quick() if quick else RemoteDbSizes())
    if url is None:
        return {"status": "skipped", "reason": HOW_TO}
    problem = server_problem(url)
    if problem is not None:
        return {"status": "skipped", "reason": problem}
    runs: list[dict[str, Any]] = []
    proxies: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sessiongate-remote-db-bench-") as tmp:
        work = Path(tmp)
        try:
            runs += [_run(work, _Config("sqlite", n), {}, sizes, timeout_s) for n in sizes.chats]
            for rtt in (0.0, *sizes.round_trips_ms):
                with bench_schema(url) as schema_url, _reached(schema_url, rtt) as (where, p):
                    if p is not None:
                        proxies.append(p)
                    for chats in sizes.chats:
                        config = _Config("postgres", chats, rtt)
                        env = {"SESSIONGATE_STORE__URL": where}
                        runs.append(_run(work, config, env, sizes, timeout_s))
        except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
            return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    return {"status": "ok", "sizes": asdict(sizes), "runs": runs, "proxies": proxies}


@contextlib.contextmanager
def _reached(url: str, rtt_ms: float) -> Iterator[tuple[str, dict[str, Any] | None]]:
    """The URL the gateway uses for `url` with `rtt_ms` added (through a proxy when > 0)."""
    if rtt_ms <= 0:
        yield url, None
        return
    parts = urlsplit(url)
    host, port = parts.hostname or "localhost", parts.port or 5432
    with DelayProxy.running(host, port, rtt_ms) as proxy:
        secret = f":{parts.password}" if parts.password else ""
        user = f"{parts.username}{secret}@" if parts.username else ""
        proxied = urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))
        direct, through = _round_trip_ms(url), _round_trip_ms(proxied)
        yield (
            proxied,
            {
                "asked_ms": rtt_ms,
                "added_ms": round(through - direct, 3),
                "direct_ms": direct,
            },
        )


def _round_trip_ms(url: str) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return measure_round_trip(lambda: conn.execute("SELECT 1").fetchone())


def _run(
    work: Path, config: _Config, env: dict[str, str], sizes: RemoteDbSizes, timeout_s: float
) -> dict[str, Any]:
    name = f"{config.store}-{config.added_rtt_ms:g}ms-{config.chats}"
    server = GatewayServer(work / name, env=env, timeout_s=timeout_s)
    try:
        measured = asyncio.run(_load(server.url, config.chats, sizes.turns, timeout_s))
    finally:
        server.stop()
    return {
        "store": config.store,
        "added_rtt_ms": config.added_rtt_ms,
        "chats": config.chats,
        **measured,
    }


async def _load(url: str, chats: int, turns: int, timeout_s: float) -> dict[str, Any]:
    """Drive `turns` turns over `chats` sequential chat clients while probing `/healthz`."""
    import httpx

    # A client (one connection) per chat: one pool shared by 64 chats cost the client more
    # CPU than the gateway (httpx's pool does work per waiting request), on the same cores.
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=timeout_s))
            for _ in range(chats)
        ]
        prober = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=timeout_s))
        for i in range(_WARM_TURNS):
            await _turn(clients[0], f"warm{i}", "warm")
        turn_times: list[float] = []
        probe_times: list[float] = []
        loaded = asyncio.Event()

        async def chat(k: int) -> None:
            for i in range(len(range(k, turns, chats))):
                t0 = time.perf_counter()
                await _turn(clients[k], f"c{k}", f"hello {i}")
                turn_times.append(time.perf_counter() - t0)

        async def probe() -> None:
            while not loaded.is_set():
                t0 = time.perf_counter()
                response = await prober.get("/healthz")
                probe_times.append(time.perf_counter() - t0)
                if response.status_code != 200:
                    raise RuntimeError(f"/healthz answered {response.status_code}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(loaded.wait(), _PROBE_EVERY_S)

        probing = asyncio.create_task(probe())
        started = time.perf_counter()
        try:
            await asyncio.gather(*(chat(k) for k in range(chats)))
        finally:
            seconds = time.perf_counter() - started
            loaded.set()
            await probing
    return {
        "turns": len(turn_times),
        "seconds": round(seconds, 3),
        "turns_per_s": round(len(turn_times) / seconds, 1),
        "turn_ms": latency_summary(turn_times),
        "healthz_ms": latency_summary(probe_times),
        "probes": len(probe_times),
    }


async def _turn(client: Any, chat_id: str, text: str) -> None:
    response = await client.post("/v1/messages", json={"chat_id": chat_id, "text": text})
    if response.status_code != 200 or response.json().get("status") != "replied":
        raise RuntimeError(f"HTTP turn failed: {response.status_code} {response.text[:300]}")


# ---------------------------------------------------------------------------- the report

_GOALS = (
    "Behind a 3 ms round trip, 16 chats ≥ 0.7x direct PostgreSQL's turns/s",
    "Behind a 3 ms round trip, /healthz p99 ≤ 1.3x direct PostgreSQL's",
    "Behind a 3 ms round trip, 64 chats do more turns/s than 16",
)


def _find(section: dict[str, Any], store: str, rtt: float, chats: int) -> dict[str, Any] | None:
    runs: list[dict[str, Any]] = section.get("runs", [])
    wanted = (store, rtt, chats)
    return next((r for r in runs if (r["store"], r["added_rtt_ms"], r["chats"]) == wanted), None)


def remote_db_goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    section = results.get("remote_db", {})
    if section.get("status") != "ok":
        why = f"not measured: {section.get('reason', 'no remote database section')}"
        return [{"goal": name, "measured": why, "passed": None} for name in _GOALS]
    direct16 = _find(section, "postgres", 0.0, 16)
    far16 = _find(section, "postgres", 3.0, 16)
    far64 = _find(section, "postgres", 3.0, 64)
    if direct16 is None or far16 is None or far64 is None:
        why = "not measured: the run lacks 16 and 64 chats at 0 and 3 ms"
        return [{"goal": name, "measured": why, "passed": None} for name in _GOALS]
    rate = far16["turns_per_s"] / max(direct16["turns_per_s"], 1e-9)
    probe = far16["healthz_ms"]["p99_ms"] / max(direct16["healthz_ms"]["p99_ms"], 1e-9)
    more = far64["turns_per_s"] / max(far16["turns_per_s"], 1e-9)
    return [
        {"goal": _GOALS[0], "measured": f"{rate:.2f}x", "passed": rate >= 0.7},
        {"goal": _GOALS[1], "measured": f"{probe:.2f}x", "passed": probe <= 1.3},
        {"goal": _GOALS[2], "measured": f"{more:.2f}x", "passed": more > 1.0},
    ]


def remote_db_lines(section: dict[str, Any]) -> list[str]:
    """The report's markdown: one table row per configuration, or why not."""
    lines = ["## A database at a distance", ""]
    if section.get("status") != "ok":
        why = section.get("reason", "no remote database section")
        return [*lines, f"Not measured: {why}.", ""]
    lines += [
        f"One gateway, {section['sizes']['turns']:,} turns per configuration over HTTP from "
        "sequential chat clients, `/healthz` probed every 20 ms on a connection of its own.",
        "",
        "| store | added round trip | chats | turns/s | turn p50 / p99 | /healthz p50 / p99 |",
        "|---|---|---|---|---|---|",
    ]
    for run in section["runs"]:
        turn, probe = run["turn_ms"], run["healthz_ms"]
        lines.append(
            f"| {run['store']} | {run['added_rtt_ms']:g} ms | {run['chats']} | "
            f"{run['turns_per_s']:,.0f} | {turn['p50_ms']:.1f} / {turn['p99_ms']:.1f} ms | "
            f"{probe['p50_ms']:.1f} / {probe['p99_ms']:.1f} ms |"
        )
    for proxy in section["proxies"]:
        lines.append("")
        lines.append(
            f"The {proxy['asked_ms']:g} ms proxy added {proxy['added_ms']:.2f} ms to a "
            f"`SELECT 1` (direct: {proxy['direct_ms']:.2f} ms)."
        )
    return [*lines, ""]
