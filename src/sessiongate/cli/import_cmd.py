"""`sessiongate import hermes|openclaw <DIR>`: bring another system's conversations in.

The source is read whole first (`store/foreign/`); a corrupt or foreign source is refused
with a message naming the file and the problem, before anything is written. Then each session
is written in its own transaction through the store (safe while a gateway serves the same
home: SQLite's WAL lets it go on, and each commit is one session), routing entries last. A
second run imports nothing twice; a killed run is finished by running it again. `--dry-run`
prints what would be imported and what cannot be, and why. See docs/MIGRATING.md.
"""

from __future__ import annotations

from pathlib import Path  # noqa: TC003  # typer reads the annotations at run time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.text import Text

from sessiongate.cli._common import (
    ConfigOption,
    HomeOption,
    JsonOption,
    console,
    emit_json,
    fail,
    opened_store,
    plural,
)
from sessiongate.errors import ForeignStoreError
from sessiongate.store.foreign.apply import ImportSummary, apply_plan
from sessiongate.store.foreign.hermes import read_hermes_home
from sessiongate.store.foreign.openclaw import read_openclaw_state

if TYPE_CHECKING:
    from collections.abc import Callable

    from sessiongate.store.foreign.model import ImportPlan

__all__ = ["app"]

app = typer.Typer(
    help="Import the conversations of another gateway (Hermes, OpenClaw) into this home.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

DryRunOption = Annotated[
    bool,
    typer.Option("--dry-run", help="Only show what would be imported and what cannot be."),
]


@app.command("hermes")
def hermes(
    source: Annotated[Path, typer.Argument(help="The Hermes home (HERMES_HOME, e.g. ~/.hermes).")],
    home: HomeOption = None,
    config_file: ConfigOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Import a Hermes home: state.db (sessions and messages), its routing index
    (gateway_routing, sessions/sessions.json) and legacy JSONL transcripts. Keys and session
    ids are kept; ended sessions stay reachable by /resume."""
    _run(read_hermes_home, source, home, config_file, dry_run=dry_run, as_json=as_json)


@app.command("openclaw")
def openclaw(
    source: Annotated[
        Path, typer.Argument(help="The OpenClaw state directory (e.g. ~/.openclaw).")
    ],
    home: HomeOption = None,
    config_file: ConfigOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Import an OpenClaw state directory: each agent's SQLite session store
    (agents/<id>/agent/openclaw-agent.sqlite) and legacy sessions.json + JSONL transcripts
    (whole trees, active leaf, archive/pin/unread stamps, model overrides); agent ids become
    key namespaces."""
    _run(read_openclaw_state, source, home, config_file, dry_run=dry_run, as_json=as_json)


def _run(
    read: Callable[[Path], ImportPlan],
    source: Path,
    home: Path | None,
    config_file: Path | None,
    *,
    dry_run: bool,
    as_json: bool,
) -> None:
    try:
        plan = read(source)
    except ForeignStoreError as exc:
        fail(f"refused: {exc.message}; nothing was imported", error_code=exc.code)
    with (
        opened_store(home, config_file) as store,
        Progress(
            TextColumn("{task.description:<10}"),
            BarColumn(),
            MofNCompleteColumn(),
            disable=as_json,
            transient=False,
        ) as progress,
    ):
        task = progress.add_task("sessions", total=len(plan.sessions))
        summary = apply_plan(
            store, plan, dry_run=dry_run, progress=lambda _sid: progress.advance(task)
        )
    if as_json:
        emit_json(summary.to_dict())
        return
    _print(summary)


def _print(summary: ImportSummary) -> None:
    verb = "would import" if summary.dry_run else "imported"
    console.print(
        f"{verb} {plural(summary.sessions_imported, 'session')} "
        f"({plural(summary.entries_imported, 'entry', 'entries')}) and "
        f"{plural(summary.routes_imported, 'routing entry', 'routing entries')} "
        f"from {summary.source} at {summary.home}"
    )
    if summary.sessions_present or summary.routes_present:
        console.print(
            f"already here: {plural(summary.sessions_present, 'session')}, "
            f"{plural(summary.routes_present, 'routing entry', 'routing entries')}"
        )
    if summary.skipped:
        console.print(f"cannot import {len(summary.skipped)}:")
        for item in summary.skipped:
            console.print(Text(f"  {item['what']}: {item['why']}"))
