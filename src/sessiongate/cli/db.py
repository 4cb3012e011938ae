"""`sessiongate db status|upgrade`: the store's database and its schema migrations.

Migrations are numbered and forward-only; the store applies the ones it lacks when it opens
(on PostgreSQL under an advisory lock, so instances starting together apply each once).
`upgrade` does it ahead of a rollout; `status` shows where a database stands; `copy` moves a
home's database onto PostgreSQL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

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
from sessiongate.gateway.recovery import HomeLock
from sessiongate.store.backends import (
    check_copy_target,
    database_origin,
    describe_database,
    is_postgres_url,
    open_backend,
    open_copy_target,
    upgrade_database,
)

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.core.config import GatewayConfig

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
        fail(exc.message, error_code=exc.code)
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
        fail(exc.message, error_code=exc.code)
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
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Finish a copy of this same home that was cut short."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Copy the store's database (every session, transcript tree, row, alias and queued item)
    into an empty PostgreSQL database, then verify counts and checksums of every table.

    Refused while a gateway or chat holds the home, and when the target already holds
    sessiongate data; nothing is written before both checks pass. A copy that is killed is
    finished with --resume (its marker in the target proves it is this same copy); rows the
    target already has are kept. Then set store.url to the target.
    """
    # Here, not at the top: only the copy needs the table list (`status` loads less).
    from sessiongate.store.copy import TABLES

    if not is_postgres_url(to):
        fail("--to must be a postgresql:// URL", 2)
    paths, config = load_paths_and_config(home, config_file)
    default_path = sessions_dir(paths.home) / "state.db"
    # Held for the whole copy: a gateway started meanwhile would change the source under it.
    lock = HomeLock(paths.home)
    try:
        lock.acquire()
        try:
            origin = database_origin(config, default_path)
            check_copy_target(to, [t.name for t in TABLES], origin=origin, resume=resume)
            report = _copy(config, default_path, to, origin=origin, batch=batch, quiet=as_json)
        finally:
            lock.release()
    except SessiongateError as exc:
        fail(exc.message, error_code=exc.code)
    if as_json:
        emit_json(report)
    else:
        rows = sum(t["rows"] for t in report["tables"].values())
        bad = [name for name, t in report["tables"].items() if not t["verified"]]
        print(f"copied {rows} rows in {len(report['tables'])} tables to {report['target']}")
        print("verified: counts and checksums match" if not bad else f"MISMATCH in {bad}")
    if not report["verified"]:
        raise typer.Exit(1)


def _copy(
    config: GatewayConfig, default_path: Path, to: str, *, origin: str, batch: int, quiet: bool
) -> dict[str, Any]:
    # Here, not at the top: the progress bars and the copy are for this command alone.
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from sessiongate.store.copy import TABLES, copy_database

    source = open_backend(config, default_path)
    try:
        target = open_copy_target(to)
        try:
            with Progress(
                TextColumn("{task.description:<18}"),
                BarColumn(),
                MofNCompleteColumn(),
                disable=quiet,
                transient=False,
            ) as progress:
                tasks = {t.name: progress.add_task(t.name, total=None) for t in TABLES}

                def show(table: str, done: int, total: int) -> None:
                    progress.update(tasks[table], completed=done, total=total)

                report = copy_database(source, target, origin=origin, batch=batch, on_progress=show)
            report["target"] = target.url
            return report
        finally:
            target.close()
    finally:
        source.close()
