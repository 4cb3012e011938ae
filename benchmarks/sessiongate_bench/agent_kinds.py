"""The agent kinds section: a turn of each kind of agent against a fake model server started
in the same run, split into the model's, the framework's and the gateway's time; and how soon
an approved tool call runs after the decision.

For each kind (`echo`, the built-in `openai`, a `python` entry, `openai-agents`,
`pydantic-ai`, `langgraph`; a framework not installed is skipped with the reason), in a child
process of its own:

- `turns` turns through a real gateway (`GatewayRunner.handle_message`, SQLite store), each
  in a new chat, asking the model to call the one tool (`order_status`) and answer; the
  `python` entry makes one model call and offers no tool, the echo agent none;
- the same turns run by the framework directly, with no gateway, against the same server.

Per turn: `total` (through the gateway), `model` (the server's own time, from reading each
request to writing its last byte: `bench/model_server.py`), `framework` (a direct run's time
minus its model time: the framework's own work outside the model, HTTP client included),
and `gateway` (total minus model minus the framework's time in the direct run made right
after it: the two runs alternate, so a machine whose load changes moves both alike). The
echo agent has neither model nor framework: all of its time is the gateway's.

Approvals: turns of the built-in agent whose tool (`refund_order`) needs a person's
approval; the decision is the operator's (`Approvals.decide`, what `POST
/v1/approvals/{id}` calls); `latency` is from that call to the tool running (the tool stamps
when it starts).

`{"status": "ok", "kinds": {...}, "approvals": {...}}` or `{"status": "error", "reason"}`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import mean
from typing import Any

from sessiongate_bench.gateway import latency_summary

__all__ = ["KINDS", "AgentKindsSizes", "agent_kinds_lines", "main", "run_agent_kinds_section"]

KINDS = ("echo", "openai", "python", "openai-agents", "pydantic-ai", "langgraph")
# The modules each kind needs, and the extra that brings them.
_NEEDS = {
    "openai": (("openai",), "openai"),
    "python": ((), ""),
    "echo": ((), ""),
    "openai-agents": (("agents",), "openai-agents"),
    "pydantic-ai": (("pydantic_ai",), "pydantic-ai"),
    "langgraph": (("langgraph", "langchain_openai"), "langgraph"),
}
_BOTS = "sessiongate_bench.bench_bots"
_ENTRIES = {
    "python": f"{_BOTS}:python_agent",
    "openai-agents": f"{_BOTS}:openai_agents_agent",
    "pydantic-ai": f"{_BOTS}:pydantic_ai_agent",
    "langgraph": f"{_BOTS}:langgraph_graph",
}
TEXT = "call order_status"
WARMUP = 3


@dataclass(frozen=True, slots=True)
class AgentKindsSizes:
    turns: int = 200  # per kind, through the gateway and again directly
    approvals: int = 200

    @classmethod
    def quick(cls) -> AgentKindsSizes:
        return cls(turns=5, approvals=5)


def run_agent_kinds_section(
    *, quick: bool, sizes: AgentKindsSizes | None = None, timeout_s: float = 900.0
) -> dict[str, Any]:
    sizes = sizes or (AgentKindsSizes.quick() if quick else AgentKindsSizes())
    try:
        with _model_server(timeout_s) as url:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "sessiongate_bench.agent_kinds",
                    url,
                    json.dumps(asdict(sizes)),
                ],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        if done.returncode != 0:
            raise RuntimeError(f"the agent kinds child failed: {done.stderr.strip()[-800:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
        return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    return {"status": "ok", "sizes": asdict(sizes), **result}


@contextlib.contextmanager
def _model_server(timeout_s: float) -> Any:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiongate_bench.model_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the model server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=min(timeout_s, 30))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def agent_kinds_lines(section: dict[str, Any]) -> list[str]:
    """The report's lines: one row per kind, and the approvals' latency."""
    if not section:
        return []
    lines = ["## Agent kinds", ""]
    if section.get("status") != "ok":
        return [*lines, f"Not measured: {section.get('reason', 'no agent kinds section')}.", ""]
    lines += [
        f"{section['sizes']['turns']} turns of each kind against the fake model server of the "
        "same run, each in a new chat, the model calling the one tool then answering (python: "
        "one model call, echo: none). Per turn, p50 / p99: total through the gateway, the "
        "model server's own time, the framework's own (a direct run with no gateway, minus "
        "its model time, run right after each gateway turn), and the gateway's (total - model - "
        "framework, turn by turn).",
        "",
        "| kind | model calls | total | model | framework | gateway |",
        "|---|---|---|---|---|---|",
    ]
    for kind in KINDS:
        part = section["kinds"].get(kind, {})
        if part.get("status") != "ok":
            lines.append(f"| {kind} | {part.get('status', 'missing')}: {part.get('reason', '')} |")
            continue
        lines.append(
            f"| {kind} | {part['model_calls_per_turn']:g} | {_pair(part['total_ms'])} | "
            f"{_pair(part['model_ms'])} | {_pair(part['framework_ms'])} | "
            f"{_pair(part['gateway_ms'])} |"
        )
    approvals = section.get("approvals", {})
    if approvals.get("status") == "ok":
        latency = approvals["latency_ms"]
        lines += [
            "",
            f"- approvals: {approvals['approvals']} calls waiting for a person; from the "
            f"operator's decision to the tool running {_pair(latency)} (p50 / p99)",
        ]
    else:
        lines += ["", f"- approvals: not measured ({approvals.get('reason', 'no result')})"]
    return [*lines, ""]


def _pair(summary: dict[str, float]) -> str:
    return f"{summary['p50_ms']:.2f} ms / {summary['p99_ms']:.2f} ms"


# ---------------------------------------------------------------------------- the child


def _missing(kind: str) -> str | None:
    modules, extra = _NEEDS[kind]
    for module in modules:
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install 'sessiongate[{extra}]')"
    return None


def _settings(kind: str, url: str) -> dict[str, Any]:
    if kind == "echo":
        return {}
    if kind == "openai":
        return {
            "agent": {
                "openai": {
                    "base_url": url,
                    "api_key": "bench",
                    "model": "bench",
                    "max_retries": 0,
                    "tools": [f"{_BOTS}:order_status"],
                }
            }
        }
    return {"agents": {"main": {"kind": kind, "entry": _ENTRIES[kind]}}}


class _Stats:
    """The model server's own count and seconds, read between turns."""

    def __init__(self, url: str) -> None:
        import httpx

        self._http = httpx.AsyncClient(base_url=url.removesuffix("/v1"), timeout=60)

    async def read(self) -> tuple[int, float]:
        data = (await self._http.get("/stats")).json()
        return int(data["requests"]), float(data["seconds"])

    async def aclose(self) -> None:
        await self._http.aclose()


async def _interleaved(
    kind: str, url: str, turns: int, stats: _Stats, home: Path
) -> dict[str, list[float]]:
    """Each turn through the gateway (its total and model seconds), each followed by the same
    turn run directly (its seconds outside the model), so both see the same machine; and the
    model calls of each gateway turn."""
    from sessiongate import GatewayConfig, SessionSource, SessionStore
    from sessiongate.agents import build_agent_factory
    from sessiongate.core.platform import Platform
    from sessiongate.gateway import GatewayRunner, MessageEvent

    config = GatewayConfig(**_settings(kind, url))
    store = SessionStore(home / "sessions", config)
    runner = GatewayRunner(store, config, home=home, agent_factory=build_agent_factory(config))
    direct = None if kind == "echo" else await _direct_runner(kind, url)
    await runner.start()
    measured: dict[str, list[float]] = {"total": [], "model": [], "framework": [], "calls": []}
    try:
        for i in range(WARMUP + turns):
            source = SessionSource(platform=Platform.API, chat_id=f"{kind}-{i}")
            before = await stats.read()
            started = time.perf_counter()
            receipt = await runner.handle_message(MessageEvent(source=source, text=TEXT))
            total = time.perf_counter() - started
            after = await stats.read()
            if receipt.status != "replied":
                raise RuntimeError(f"{kind}: turn not replied: {receipt}")
            own = 0.0
            if direct is not None:
                started = time.perf_counter()
                await direct(i)
                own = time.perf_counter() - started - ((await stats.read())[1] - after[1])
            if i >= WARMUP:
                measured["total"].append(total)
                measured["model"].append(after[1] - before[1])
                measured["framework"].append(max(0.0, own))
                measured["calls"].append(after[0] - before[0])
    finally:
        await runner.stop()
        store.close()
    return measured


async def _direct_runner(kind: str, url: str) -> Any:
    """A coroutine function running one turn of `kind` with no gateway."""
    from sessiongate.gateway.agent import TurnRequest
    from sessiongate_bench import bench_bots

    def request(i: int) -> TurnRequest:
        return TurnRequest(
            session_key=f"agent:main:api:dm:direct-{i}",
            session_id=f"direct-{i}",
            system_prompt="",
            messages=[{"role": "user", "content": TEXT}],
        )

    if kind == "openai":
        from sessiongate import GatewayConfig
        from sessiongate.agents import build_agent_factory

        factory = build_agent_factory(GatewayConfig(**_settings(kind, url)))

        async def builtin(i: int) -> None:
            # A new agent each turn, as each new chat gets one through the gateway: its
            # making (its HTTP client's) is the agent's time, not the gateway's.
            agent = factory(f"agent:main:api:dm:direct-{i}")
            try:
                await agent.run_turn(request(i))
            finally:
                await agent.aclose()

        return builtin
    if kind == "python":
        own = bench_bots.python_agent()

        async def python(i: int) -> None:
            await own.run_turn(request(i))

        return python
    if kind == "openai-agents":
        import agents

        sdk_agent = bench_bots.openai_agents_agent()

        async def openai_agents(i: int) -> None:
            result = agents.Runner.run_streamed(sdk_agent, TEXT)
            async for _event in result.stream_events():
                pass

        return openai_agents
    if kind == "pydantic-ai":
        pydantic_agent = bench_bots.pydantic_ai_agent()

        async def pydantic_ai(i: int) -> None:
            await pydantic_agent.run(TEXT)

        return pydantic_ai
    graph = bench_bots.langgraph_graph()

    async def langgraph(i: int) -> None:
        state = {"messages": [{"role": "user", "content": TEXT}]}
        async for _chunk in graph.astream(state, stream_mode=["messages", "updates"]):
            pass

    return langgraph


async def _one_kind(kind: str, url: str, turns: int, stats: _Stats) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sessiongate-kinds-bench-") as tmp:
        measured = await _interleaved(kind, url, turns, stats, Path(tmp))
    # Each gateway turn less its model time and the framework's time in the direct run beside
    # it (pairs: a load that changes during the run moves both alike).
    gateway = [
        t - m - f
        for t, m, f in zip(measured["total"], measured["model"], measured["framework"], strict=True)
    ]
    return {
        "status": "ok",
        "turns": turns,
        "model_calls_per_turn": round(sum(measured["calls"]) / max(turns, 1), 2),
        "total_ms": latency_summary(measured["total"]),
        "model_ms": latency_summary(measured["model"]),
        "framework_ms": latency_summary(measured["framework"]),
        "gateway_ms": latency_summary(gateway),
        "gateway_mean_ms": round(mean(gateway) * 1000, 3),
    }


async def _approvals(url: str, count: int, home: Path) -> dict[str, Any]:
    from sessiongate import GatewayConfig, SessionSource, SessionStore
    from sessiongate.agents import build_agent_factory
    from sessiongate.core.platform import Platform
    from sessiongate.gateway import GatewayRunner, MessageEvent
    from sessiongate.gateway.approvals import OPERATOR
    from sessiongate_bench import bench_bots

    config = GatewayConfig(
        agent={
            "approvals": {"tools": ["refund_order"], "timeout_minutes": 30},
            "openai": {
                "base_url": url,
                "api_key": "bench",
                "model": "bench",
                "max_retries": 0,
                "tools": [f"{_BOTS}:order_status", f"{_BOTS}:refund_order"],
            },
        }
    )
    store = SessionStore(home / "sessions", config)
    runner = GatewayRunner(store, config, home=home, agent_factory=build_agent_factory(config))
    await runner.start()
    latencies: list[float] = []
    try:
        for i in range(WARMUP + count):
            source = SessionSource(platform=Platform.API, chat_id=f"refund-{i}", user_id="u")
            ran = len(bench_bots.RAN)
            turn = asyncio.create_task(
                runner.handle_message(MessageEvent(source=source, text="call refund_order"))
            )
            async with asyncio.timeout(60):
                while not (pending := runner.approvals.book.listed(status="pending", limit=5)):  # noqa: ASYNC110  # rows
                    await asyncio.sleep(0.001)
            decided = time.perf_counter()
            runner.approvals.decide(pending[0].id, approve=True, by=OPERATOR)
            async with asyncio.timeout(60):
                receipt = await turn
            if len(bench_bots.RAN) != ran + 1 or receipt.reply != "done":
                raise RuntimeError(f"the approved call did not run once: {receipt}")
            if i >= WARMUP:
                latencies.append(bench_bots.RAN[-1] - decided)
    finally:
        await runner.stop()
        store.close()
    return {"status": "ok", "approvals": count, "latency_ms": latency_summary(latencies)}


async def _measure(url: str, sizes: AgentKindsSizes) -> dict[str, Any]:
    from sessiongate_bench import bench_bots

    os.environ["SESSIONGATE_BENCH_MODEL_URL"] = url
    stats = _Stats(url)
    kinds: dict[str, Any] = {}
    try:
        for kind in KINDS:
            missing = _missing(kind)
            if missing is not None:
                kinds[kind] = {"status": "skipped", "reason": missing}
                continue
            try:
                kinds[kind] = await _one_kind(kind, url, sizes.turns, stats)
            except Exception as exc:  # one kind failing leaves the others measured
                kinds[kind] = {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:500]}
        if _missing("openai") is not None:
            approvals: dict[str, Any] = {"status": "skipped", "reason": _missing("openai")}
        else:
            with tempfile.TemporaryDirectory(prefix="sessiongate-approvals-bench-") as tmp:
                approvals = await _approvals(url, sizes.approvals, Path(tmp))
    finally:
        await stats.aclose()
        await bench_bots.close_clients()
    return {"kinds": kinds, "approvals": approvals}


def main(argv: list[str] | None = None) -> int:
    """The child: `URL SIZES_JSON`; prints one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m sessiongate_bench.agent_kinds")
    parser.add_argument("url")
    parser.add_argument("sizes")
    args = parser.parse_args(argv)
    sizes = AgentKindsSizes(**json.loads(args.sizes))
    result = asyncio.run(_measure(args.url, sizes))
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
