"""`sessiongate bench`: the command over `run_bench` (hook it with `app.command("bench")`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import click
import typer

from sessiongate_bench.harness import SECTIONS, check_sections, exit_code, run_bench

__all__ = ["app", "bench_command", "main"]


def bench_command(
    quick: Annotated[
        bool,
        typer.Option(
            "--quick",
            help="Small sizes that check only that every part runs (about a minute); no goal "
            "is judged.",
        ),
    ] = False,
    json_path: Annotated[
        Path | None, typer.Option("--json", help="Also write the results as JSON to this file.")
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help="Run only this store (id or family: sessiongate, sqlite, openai-agents, "
            "google-adk, langgraph, sessiongate-full, ...); repeatable.",
        ),
    ] = None,
    no_contenders: Annotated[
        bool,
        typer.Option("--no-contenders", help="Only sessiongate and the sqlite3 baseline."),
    ] = False,
    postgres_url: Annotated[
        str | None,
        typer.Option(
            "--postgres-url",
            help="Also measure the gateway on this PostgreSQL database (in a schema of its own, "
            "dropped afterwards) [default: $SESSIONGATE_BENCH_POSTGRES_URL; skipped without].",
            show_default=False,
        ),
    ] = None,
    section: Annotated[
        list[str] | None,
        typer.Option(
            "--section",
            help=f"Run only this part after the stores ({', '.join(SECTIONS)}); repeatable. "
            "The others are reported as not selected.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Folder for PERFORMANCE.md and performance.png "
            "[default: docs/, or benchmarks/results/ with --quick].",
        ),
    ] = None,
) -> None:
    """Benchmark sessiongate's store against the sqlite3 baseline and the popular libraries.

    Each store runs in its own processes, one after another; the contenders install into
    benchmarks/.contenders/venv on first use. Writes a markdown report and a chart. Exits 1
    when a sessiongate store fails to run or a goal prints FAIL.
    """
    names = list(only or [])
    if no_contenders:
        names = [n for n in names if n.split("-")[0] in ("sessiongate", "sqlite")] or [
            "sessiongate",
            "sqlite",
        ]
    try:
        check_sections(section)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--section") from exc
    out_dir = out or Path("benchmarks/results" if quick else "docs")
    try:
        results = run_bench(
            quick=quick,
            out_dir=out_dir,
            contenders=names or None,
            json_path=json_path,
            progress=True,
            postgres_url=postgres_url,
            sections=section,
        )
    except ValueError as exc:  # an unknown --only name
        raise typer.BadParameter(str(exc), param_hint="--only") from exc
    raise typer.Exit(exit_code(results))


app = typer.Typer(add_completion=False)
app.command("bench")(bench_command)


def main(argv: list[str]) -> int:
    """Entry point for `sessiongate bench ARGS...`: the exit code of the run."""
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name="sessiongate bench", standalone_mode=False)
    except typer.Exit as done:
        return int(done.exit_code)
    except click.exceptions.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as done:
        return int(done.exit_code)
    return 0
