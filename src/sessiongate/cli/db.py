"""`sessiongate db status|upgrade`: the store's database and its schema migrations.

Migrations are numbered and forward-only; the store applies the ones it lacks when it opens
(on PostgreSQL under an advisory lock, so instances starting together apply each once).
`upgrade` does it ahead of a rollout; `status` shows where a database stands.
"""

from __future__ import annotations

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
from sessiongate.store.backends import describe_database, upgrade_database

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
