"""`run_bench`: every selected store, one after another, then the report, JSON and chart."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from sessiongate_bench.agent_kinds import KINDS, run_agent_kinds_section
from sessiongate_bench.contenders import (
    StoreSpec,
    VenvStatus,
    ensure_contenders_venv,
    find_benchmarks_dir,
    select_stores,
)
from sessiongate_bench.gateway import run_gateway_section
from sessiongate_bench.instances import run_instances_section
from sessiongate_bench.job_burst import run_job_burst_section
from sessiongate_bench.machine import describe_machine
from sessiongate_bench.pg_store import run_pg_store_section
from sessiongate_bench.platforms import run_platforms_section
from sessiongate_bench.postgres import postgres_url_from
from sessiongate_bench.remote_db import run_remote_db_section
from sessiongate_bench.report import evaluate_goals, write_markdown
from sessiongate_bench.runner import run_store
from sessiongate_bench.signal_section import run_signal_section
from sessiongate_bench.streaming import run_streaming_section
from sessiongate_bench.telegram import run_telegram_section
from sessiongate_bench.tree import run_tree_section
from sessiongate_bench.whatsapp import run_whatsapp_section
from sessiongate_bench.workload import Sizes

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator

__all__ = ["RESULTS_SCHEMA", "SECTIONS", "check_sections", "exit_code", "run_bench"]

QUICK_NOTE = (
    "quick run: its sizes check only that every part of the benchmark runs; the figures are "
    "not results and no goal is judged (run without --quick for those)"
)

# Bumped when a key of the results JSON changes meaning or disappears.
RESULTS_SCHEMA = 1

# The sections after the stores, in the order they run: each is called with `quick` and the
# PostgreSQL URL (None without one), and returns its part of the results.
SECTIONS: dict[str, Callable[[bool, str | None], dict[str, Any]]] = {
    "gateway": lambda quick, url: run_gateway_section(quick=quick, postgres_url=url),
    "instances": lambda quick, url: run_instances_section(url, quick=quick),
    "remote_db": lambda quick, url: run_remote_db_section(url, quick=quick),
    "pg_store": lambda quick, url: run_pg_store_section(url, quick=quick),
    "tree": lambda quick, _url: run_tree_section(quick=quick),
    "streaming": lambda quick, _url: run_streaming_section(quick=quick),
    "telegram": lambda quick, _url: run_telegram_section(quick=quick),
    "signal": lambda quick, _url: run_signal_section(quick=quick),
    "platforms": lambda quick, _url: run_platforms_section(quick=quick),
    "whatsapp": lambda quick, _url: run_whatsapp_section(quick=quick),
    "agent_kinds": lambda quick, _url: run_agent_kinds_section(quick=quick),
    "job_burst": lambda quick, _url: run_job_burst_section(quick=quick),
}
NOT_SELECTED = "not selected in this run (--section)"


def run_bench(
    *,
    quick: bool,
    out_dir: Path,
    contenders: list[str] | None,
    json_path: Path | None,
    progress: bool = True,
    sizes: Sizes | None = None,
    work_dir: Path | None = None,
    benchmarks_dir: Path | None = None,
    timeout_s: float | None = None,
    postgres_url: str | None = None,
    sections: Collection[str] | None = None,
) -> dict[str, Any]:
    """Run the benchmark and write `out_dir/PERFORMANCE.md` (+ `performance.png`).

    `contenders` names stores by id or family (`sessiongate`, `sqlite`, `openai-agents`,
    `google-adk`, `langgraph`, `sessiongate-full`, ...); None runs them all. `sizes`
    overrides the quick or default sizes; `work_dir` holds the databases while they are
    measured (a temporary folder by default, removed afterwards). `postgres_url` adds the
    gateway on PostgreSQL (`bench/postgres.py`; else `SESSIONGATE_BENCH_POSTGRES_URL`).
    `sections` names the parts after the stores to run (`SECTIONS`); None runs them all, and
    one not run is reported as skipped.
    """
    check_sections(sections)
    specs = select_stores(contenders)
    sizes = sizes or (Sizes.quick() if quick else Sizes())
    timeout = timeout_s or (900.0 if quick else 4 * 3600.0)
    bench_dir = benchmarks_dir or find_benchmarks_dir()
    console = Console(stderr=True, quiet=not progress)
    started = datetime.now(UTC)

    if quick:
        console.print(QUICK_NOTE)
    needs_venv = any(s.contender for s in specs)
    with console.status("setting up the contenders' environment (first run: pip install)"):
        venv = ensure_contenders_venv(bench_dir, create=needs_venv)
    if needs_venv and venv.python is None:
        console.print(f"[yellow]contenders skipped:[/] {venv.reason}")

    owned_work = work_dir is None
    work_root = work_dir or Path(tempfile.mkdtemp(prefix="sessiongate-bench-"))
    stores: dict[str, dict[str, Any]] = {}
    skipped: list[dict[str, str]] = []
    try:
        with _progress(console) as tracker:
            for spec in specs:
                python = _python_for(spec, venv)
                if python is None:
                    skipped.append({"id": spec.id, "label": spec.label, "reason": str(venv.reason)})
                    continue
                t0 = time.perf_counter()
                result = run_store(
                    spec,
                    python=python,
                    adapter=spec.adapter_spec(bench_dir),
                    sizes=sizes,
                    work=work_root / spec.id,
                    progress=tracker.update,
                    timeout_s=timeout,
                )
                result["seconds"] = time.perf_counter() - t0
                tracker.finish(spec, result)
                stores[spec.id] = result
    finally:
        if owned_work:
            shutil.rmtree(work_root, ignore_errors=True)

    results: dict[str, Any] = {
        "schema": RESULTS_SCHEMA,
        "quick": quick,
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": describe_machine(),
        "sizes": sizes.to_dict(),
        "stores": stores,
        "skipped": skipped,
    }
    url = postgres_url_from(postgres_url)
    for name, run in SECTIONS.items():
        selected = sections is None or name in sections
        skipped_here = {"status": "skipped", "reason": NOT_SELECTED}
        results[name] = run(quick, url) if selected else skipped_here
    results["goals"] = evaluate_goals(results)
    out_dir.mkdir(parents=True, exist_ok=True)
    results["chart"] = _render_chart(results, venv, bench_dir, out_dir / "performance.png")
    write_markdown(results, out_dir / "PERFORMANCE.md")
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(results, indent=2) + "\n")
    if progress:
        _print_summary(Console(), results, out_dir)
    return results


def check_sections(names: Collection[str] | None) -> None:
    """Refuse (ValueError) a section name `SECTIONS` does not hold."""
    unknown = sorted(set(names or ()) - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown section {', '.join(unknown)} (known: {', '.join(SECTIONS)})")


def _python_for(spec: StoreSpec, venv: VenvStatus) -> Path | None:
    return venv.python if spec.contender else Path(sys.executable)


def _render_chart(
    results: dict[str, Any], venv: VenvStatus, bench_dir: Path | None, png: Path
) -> dict[str, Any]:
    """Draw the chart with matplotlib from the contenders' venv, in a subprocess."""
    if venv.python is None or bench_dir is None:
        return {"path": None, "reason": venv.reason or "no contenders' environment"}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "results.json"
        data.write_text(json.dumps(results))
        done = subprocess.run(
            [str(venv.python), str(bench_dir / "plot.py"), str(data), str(png)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if done.returncode != 0:
        return {"path": None, "reason": f"plot.py failed: {done.stderr.strip()[-500:]}"}
    return {"path": str(png), "reason": None}


class _Tracker:
    """One progress line per store, fed by the children's progress events."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.tasks: dict[str, TaskID] = {}

    def update(self, store: str, phase: str, done: int, total: int) -> None:
        if self.progress is None:
            return
        task = self.tasks.get(store)
        if task is None:
            task = self.tasks[store] = self.progress.add_task(store, total=total)
        self.progress.update(
            task, description=f"{store:<20} {phase}", completed=done, total=max(total, 1)
        )

    def finish(self, spec: StoreSpec, result: dict[str, Any]) -> None:
        if self.progress is None or spec.id not in self.tasks:
            return
        status = "done" if result["status"] == "ok" else "[red]failed[/]"
        self.progress.update(
            self.tasks[spec.id],
            description=f"{spec.id:<20} {status} in {result['seconds']:.0f} s",
            completed=1,
            total=1,
        )


@contextmanager
def _progress(console: Console) -> Iterator[_Tracker]:
    if console.quiet:
        yield _Tracker(None)
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console) as progress:
        yield _Tracker(progress)


def _print_summary(console: Console, results: dict[str, Any], out_dir: Path) -> None:
    table = Table(title="sessiongate bench" + (" (quick)" if results["quick"] else ""))
    # The store's id is never cut (two differ only at the end: sessiongate-normal and
    # sessiongate-full); at 80 columns the figures' headers fold instead.
    width = max(
        (len(s) for s in [*results["stores"], *(k["id"] for k in results["skipped"])]), default=5
    )
    for column in ("store", "append msg/s", "tail 50 p50", "full load p50", "bytes/msg", "writers"):
        if column == "store":
            table.add_column(column, no_wrap=True, min_width=width)
        else:
            table.add_column(column, justify="right", overflow="fold")
    for store in results["stores"].values():
        if store["status"] != "ok":
            table.add_row(store["id"], "[red]failed[/]", "", "", "", "")
            continue
        w = store["workload"]
        clean = all(m["clean"] for m in store["writers"].values())
        table.add_row(
            store["id"],
            f"{w['append']['msg_per_s']:,.0f}",
            f"{w['tail_50']['p50_ms']:.3f} ms",
            f"{w['full_load']['p50_ms']:.1f} ms",
            f"{w['disk']['bytes_per_message']:,.0f}",
            "clean" if clean else "[yellow]errors/lost[/]",
        )
    for skipped in results["skipped"]:
        table.add_row(skipped["id"], "[yellow]skipped[/]", "", "", "", "")
    console.print(table)
    _print_agent_kinds(console, results.get("agent_kinds", {}))
    _print_job_burst(console, results.get("job_burst", {}))
    marks = {True: "[green]PASS[/]", False: "[red]FAIL[/]", None: "[dim]n/a[/]"}
    for goal in results["goals"]:
        console.print(f"{marks[goal['passed']]}  {goal['goal']}: {goal['measured']}")
    if results["quick"]:
        console.print(QUICK_NOTE)
    console.print(f"report: {out_dir / 'PERFORMANCE.md'}")


def _print_agent_kinds(console: Console, section: dict[str, Any]) -> None:
    if section.get("status") != "ok":
        reason = section.get("reason", "not run")
        console.print(f"[yellow]agent kinds not measured:[/] {reason}")
        return
    table = Table(title="a turn of each agent kind, p50 (gateway p99)")
    for column in ("kind", "total", "model", "framework", "gateway"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind in KINDS:
        part = section["kinds"].get(kind, {})
        if part.get("status") != "ok":
            table.add_row(kind, f"[yellow]{part.get('status', 'missing')}[/]", "", "", "")
            continue
        table.add_row(
            kind,
            f"{part['total_ms']['p50_ms']:.2f} ms",
            f"{part['model_ms']['p50_ms']:.2f} ms",
            f"{part['framework_ms']['p50_ms']:.2f} ms",
            f"{part['gateway_ms']['p50_ms']:.2f} ms ({part['gateway_ms']['p99_ms']:.2f})",
        )
    console.print(table)
    approvals = section.get("approvals", {})
    if approvals.get("status") == "ok":
        latency = approvals["latency_ms"]
        console.print(
            f"approval → tool running: {latency['p50_ms']:.2f} ms p50, "
            f"{latency['p99_ms']:.2f} ms p99 ({approvals['approvals']} approvals)"
        )


def _print_job_burst(console: Console, section: dict[str, Any]) -> None:
    if section.get("status") != "ok":
        console.print(f"[yellow]job burst not measured:[/] {section.get('reason', 'not run')}")
        return
    verdict = "all within the minute" if section["within_minute"] else "[red]not within a minute[/]"
    console.print(
        f"{section['jobs']:,} jobs due in one minute: {section['runs_per_s']:,.0f} runs/s, "
        f"{section['turns_per_s']:,.0f} turns/s, {verdict}; scheduler CPU "
        f"{section['scheduler_cpu_s']:.2f} s ({section['scheduler_cpu_share']:.0%} of the process)"
    )


def exit_code(results: dict[str, Any]) -> int:
    """1 when a sessiongate store failed to run or a goal printed FAIL (a full run's: a quick
    run judges none), else 0."""
    failed = [s for s in results["stores"].values() if s["status"] != "ok"]
    if any(s["family"] == "sessiongate" for s in failed):
        return 1
    return 1 if any(goal["passed"] is False for goal in results["goals"]) else 0
