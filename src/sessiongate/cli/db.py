"""`sessiongate db status|upgrade`: the store's database and its schema migrations.

Migrations are numbered and forward-only; the store applies the ones it lacks when it opens
(on PostgreSQL under an advisory lock, so instances starting together apply each once).
`upgrade` does it ahead of a rollout; `status` shows where a database stands; `copy` moves a
home's database onto PostgreSQL.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from sessiongate.cli._common import (
    ConfigOption,
    HomeOption,
    JsonOption,
    emit_json,
    fail,
    load_paths_and_config,
    sessions_dir,
)
from sessiongate.errors import SessiongateError
from sessiongate.store.backends import (
    describe_database,
    is_postgres_url,
    open_backend,
    open_copy_target,
    upgrade_database,
)
from sessiongate.store.copy import TABLES, copy_database

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, add_completion=False, rich_markup_mode=None)


@app.command("status")
def status(
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show which database the store uses (store.url) and which migrations it has."""
    paths, config = load_paths_and_config(home, config_file)
    try:
        info = describe_database(config, sessions_dir(paths.home) / "state.db")
    except SessiongateError as exc:
        fail(exc.message)
    if as_json:
        emit_json(info)
        return
    print(f"{info['backend']}: {info['url']}")
    for m in info["migrations"]:
        state = f"applied {m['applied_at']}" if m["applied_at"] else "pending"
        print(f"  {m['version']:>3}  {m['name']}: {state}")


@app.command("upgrade")
def upgrade(
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Apply the migrations the database lacks (safe to run on a live database)."""
    paths, config = load_paths_and_config(home, config_file)
    paths.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        applied = upgrade_database(config, sessions_dir(paths.home) / "state.db")
    except SessiongateError as exc:
        fail(exc.message)
    if as_json:
        emit_json({"applied": applied})
        return
    print(f"applied {', '.join(map(str, applied))}" if applied else "up to date")


@app.command("copy")
def copy(
    to: Annotated[str, typer.Option("--to", help="postgresql:// URL of the target database.")],
    home: HomeOption = None,
    config_file: ConfigOption = None,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Rows per commit.")] = 1000,
    as_json: JsonOption = False,
) -> None:
    """Copy the store's database (every session, transcript tree, row, alias and queued item)
    into PostgreSQL, then verify counts and checksums of every table.

    Stop the gateway first. A copy that is killed resumes where it stopped when run again;
    rows the target already has are kept. Then set store.url to the target.
    """
    if not is_postgres_url(to):
        fail("--to must be a postgresql:// URL", 2)
    paths, config = load_paths_and_config(home, config_file)
    try:
        source = open_backend(config, sessions_dir(paths.home) / "state.db")
    except SessiongateError as exc:
        fail(exc.message)
    try:
        target = open_copy_target(to)
        try:
            with Progress(
                TextColumn("{task.description:<18}"),
                BarColumn(),
                MofNCompleteColumn(),
                disable=as_json,
                transient=False,
            ) as progress:
                tasks = {t.name: progress.add_task(t.name, total=None) for t in TABLES}

                def show(table: str, done: int, total: int) -> None:
                    progress.update(tasks[table], completed=done, total=total)

                report = copy_database(source, target, batch=batch, on_progress=show)
        finally:
            target.close()
    except SessiongateError as exc:
        fail(exc.message)
    finally:
        source.close()
    if as_json:
        emit_json(report)
    else:
        rows = sum(t["rows"] for t in report["tables"].values())
        bad = [name for name, t in report["tables"].items() if not t["verified"]]
        print(f"copied {rows} rows in {len(report['tables'])} tables to {target.url}")
        print("verified: counts and checksums match" if not bad else f"MISMATCH in {bad}")
    if not report["verified"]:
        raise typer.Exit(1)
