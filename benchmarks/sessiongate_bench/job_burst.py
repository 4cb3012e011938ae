"""The job burst section: `jobs` scheduled jobs due in the same minute, on one instance.

In a child process: a real runner (SQLite store, the echo agent, a loopback Telegram adapter
to deliver to) whose clock is a `FakeClock`. `jobs` jobs are added, each `cron: "0 * * * *"`
for a chat of its own, with the clock at 12:59; the clock then moves to 13:00 and the
scheduler's `tick()` claims every slot and hands each run to the runner as a system turn.

- `tick_seconds`, `runs_per_s`: the tick, from its start to its last hand-off;
- `seconds`, `turns_per_s`: from the tick's start until every run's reply is delivered;
- `within_minute`: every reply delivered less than 60 s (wall clock) after the tick began;
- `scheduler_cpu_s`: the CPU the tick itself used, counted on its own steps only (the thread
  CPU time of each step of the tick's coroutine, so turns that run while it waits are not
  in it); `process_cpu_s`: the whole process over the same span, turns included, and
  `scheduler_cpu_share` the first over the second.

`{"status": "ok", ...}` or `{"status": "error", "reason": ...}`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Coroutine, Generator

__all__ = ["JobBurstSizes", "Metered", "job_burst_lines", "main", "run_job_burst_section"]

T = TypeVar("T")
MINUTE = 60.0


@dataclass(frozen=True, slots=True)
class JobBurstSizes:
    jobs: int = 10_000

    @classmethod
    def quick(cls) -> JobBurstSizes:
        return cls(jobs=500)


def run_job_burst_section(
    *, quick: bool, sizes: JobBurstSizes | None = None, timeout_s: float = 900.0
) -> dict[str, Any]:
    sizes = sizes or (JobBurstSizes.quick() if quick else JobBurstSizes())
    try:
        with tempfile.TemporaryDirectory(prefix="sessiongate-jobs-bench-") as tmp:
            done = subprocess.run(
                [sys.executable, "-m", "sessiongate_bench.job_burst", tmp, str(sizes.jobs)],
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        if done.returncode != 0:
            raise RuntimeError(f"the job burst child failed: {done.stderr.strip()[-800:]}")
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
        return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:1000]}
    return {"status": "ok", "sizes": asdict(sizes), **result}


def job_burst_lines(section: dict[str, Any]) -> list[str]:
    if not section:
        return []
    lines = ["## Jobs due in the same minute", ""]
    if section.get("status") != "ok":
        return [*lines, f"Not measured: {section.get('reason', 'no job burst section')}.", ""]
    within = "all within the minute" if section["within_minute"] else "**not** within the minute"
    return [
        *lines,
        f"- {section['jobs']:,} jobs due at the same minute on one instance (echo agent, each "
        f"job its own chat): claimed and handed off in {section['tick_seconds']:.1f} s "
        f"({section['runs_per_s']:,.0f} runs/s); every reply delivered after "
        f"{section['seconds']:.1f} s ({section['turns_per_s']:,.0f} turns/s), {within}",
        f"- the scheduler's own CPU: {section['scheduler_cpu_s']:.2f} s "
        f"({section['scheduler_cpu_ms_per_run']:.3f} ms a run; "
        f"{section['scheduler_cpu_share']:.0%} of the process's {section['process_cpu_s']:.1f} s "
        "over the burst, turns included)",
        "",
    ]


class Metered:
    """Awaits `coroutine`, counting the thread CPU time of its own steps (`cpu`): what other
    tasks do while it is suspended is not counted."""

    def __init__(self, coroutine: Coroutine[Any, Any, T]) -> None:
        self._coroutine = coroutine
        self.cpu = 0.0

    def __await__(self) -> Generator[Any, Any, Any]:
        inner = self._coroutine.__await__()
        value: Any = None
        error: BaseException | None = None
        while True:
            started = time.thread_time()
            try:
                yielded = inner.send(value) if error is None else inner.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                self.cpu += time.thread_time() - started
            try:
                value, error = (yield yielded), None
            except BaseException as exc:  # a cancellation goes to the coroutine
                value, error = None, exc


async def _burst(home: Path, jobs: int) -> dict[str, Any]:
    from sessiongate import GatewayConfig, SessionStore
    from sessiongate.adapters.loopback import LoopbackAdapter
    from sessiongate.agents import build_agent_factory
    from sessiongate.core.clock import FakeClock
    from sessiongate.core.jobs import JobSpec
    from sessiongate.gateway import GatewayRunner

    clock = FakeClock(datetime(2026, 1, 1, 12, 59, tzinfo=UTC))
    config = GatewayConfig()
    store = SessionStore(home / "sessions", config, clock=clock)
    adapter = LoopbackAdapter()
    runner = GatewayRunner(
        store,
        config,
        home=home,
        agent_factory=build_agent_factory(config),
        clock=clock,
        adapters=[adapter],
    )
    await runner.start()
    try:
        async with asyncio.timeout(60):  # the loop's first tick, before any job exists
            while runner.jobs.statistics().ticks == 0:  # noqa: ASYNC110  # a counter
                await asyncio.sleep(0.005)
        for i in range(jobs):
            runner.jobs.jobs.add(
                JobSpec(id=f"job-{i}", cron="0 * * * *", deliver_to=f"telegram:c{i}", prompt="tick")
            )
        clock.set(datetime(2026, 1, 1, 13, 0, tzinfo=UTC))
        cpu0 = time.process_time()
        started = time.perf_counter()
        tick = Metered(runner.jobs.tick())
        runs = await tick
        tick_seconds = time.perf_counter() - started
        async with asyncio.timeout(900):
            while len(adapter.sent) < jobs:  # noqa: ASYNC110  # the loopback's list
                await asyncio.sleep(0.01)
        seconds = time.perf_counter() - started
        process_cpu = time.process_time() - cpu0
    finally:
        await runner.stop()
        store.close()
    accepted = sum(1 for run in runs if run.state == "accepted")
    return {
        "jobs": jobs,
        "accepted": accepted,
        "delivered": len(adapter.sent),
        "tick_seconds": round(tick_seconds, 3),
        "runs_per_s": round(accepted / tick_seconds, 1),
        "seconds": round(seconds, 3),
        "turns_per_s": round(len(adapter.sent) / seconds, 1),
        "within_minute": accepted == jobs and seconds < MINUTE,
        "scheduler_cpu_s": round(tick.cpu, 3),
        "scheduler_cpu_ms_per_run": round(tick.cpu * 1000 / max(accepted, 1), 4),
        "process_cpu_s": round(process_cpu, 3),
        "scheduler_cpu_share": round(tick.cpu / process_cpu, 3) if process_cpu > 0 else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    """The child: `HOME JOBS`; prints one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m sessiongate_bench.job_burst")
    parser.add_argument("home", type=Path)
    parser.add_argument("jobs", type=int)
    args = parser.parse_args(argv)
    sys.stdout.write(json.dumps(asyncio.run(_burst(args.home, args.jobs))) + "\n")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
