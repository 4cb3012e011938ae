"""`sessiongate doctor [--repair]`: check a home directory and say exactly what is wrong.

Checks, in order: the configuration loads and `run` would start on it (`preflight.py`, the
code `run` uses); the database file passes SQLite's own check
(`quick_check`, or `integrity_check` with `--full`), read directly from the file so a store
that refuses to open can still be examined; the store opens, and what it skipped while
importing `sessions.json` (bad entries, reported once); the full-text side index is
current and consistent; `sessions.json` is readable. `--repair` rebuilds the full-text index
and rewrites `sessions.json` from the database (the only two things that are derived, and so
safe to rebuild). Exit code 0 when everything is (now) healthy, 1 when a problem remains.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path  # noqa: TC003  # typer reads the annotations at run time
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from sessiongate.cli._agent_choice import describe_agent, openai_key_unused, unused_key_hint
from sessiongate.cli._common import (
    EXIT_FAILURE,
    ConfigOption,
    HomeOption,
    JsonOption,
    console,
    emit_json,
    plural,
    sessions_dir,
)
from sessiongate.cli.preflight import PreflightError, preflight
from sessiongate.config import ConfigError, default_home, load_config
from sessiongate.core.config import GatewayConfig
from sessiongate.core.freshness import resolve_timezone
from sessiongate.errors import SessiongateError
from sessiongate.store.session_store import SessionStore
from sessiongate.store.sqlite.health import check_database_file

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Check", "doctor", "run_checks"]


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    repaired: bool = False
    # Each finding of a check that can have several (the entries a store open skipped).
    problems: tuple[str, ...] = ()
    # Worth a look but no problem: shown as a warning, and the exit code stays 0.
    warning: bool = False


def _check_config(home: Path, config_file: Path | None) -> tuple[Check, GatewayConfig]:
    try:
        config = load_config(config_file, home=home)
    except ConfigError as exc:
        return Check("config", False, exc.message), GatewayConfig()
    try:
        resolve_timezone(config.reset_policy.timezone)
    except ValueError as exc:
        return Check("config", False, str(exc)), config
    try:
        # What `run` refuses, `doctor` reports: the same checks, by the same code.
        preflight(config, host=config.api.host)
    except PreflightError as exc:
        return Check("config", False, exc.message), config
    return Check("config", True, "loads, and `run` would start on it"), config


def _check_agents(config: GatewayConfig, environ: Mapping[str, str]) -> Check:
    """Which agents answer; a warning when `OPENAI_API_KEY` is set and no agent uses it (the
    echo agent stays until one is configured, so the key alone changes nothing)."""
    described = "; ".join(
        f"{agent_id} = {describe_agent(config.agent_spec(agent_id))}"
        for agent_id in config.agent_ids()
    )
    if openai_key_unused(config, environ):
        return Check(
            "agents",
            True,
            f"OPENAI_API_KEY is set, but no agent uses it ({described}): {unused_key_hint(config)}",
            warning=True,
        )
    return Check("agents", True, described)


def _check_sqlite(db_path: Path, *, full: bool) -> Check:
    healthy, detail = check_database_file(db_path, full=full)
    return Check("database", healthy, detail)


def _check_mirror(json_path: Path) -> Check:
    if not json_path.exists():
        return Check("sessions.json", True, "absent (written by the gateway)")
    if json_path.is_dir():
        return Check("sessions.json", False, "is a directory, not a file")
    try:
        data = json.loads(json_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return Check("sessions.json", False, f"unreadable: {exc!s:.200}")
    if not isinstance(data, dict):
        return Check("sessions.json", False, "top level is not an object")
    count = sum(1 for k in data if not k.startswith("_"))
    return Check("sessions.json", True, f"readable, {plural(count, 'entry', 'entries')}")


def _check_import(store: SessionStore) -> Check:
    """What opening the store found in `sessions.json`: entries skipped (the file was
    backed up beside itself). The next open does not find them again, so they are shown now."""
    problems = tuple(store.problems)
    if not problems:
        return Check("sessions.json import", True, "nothing skipped")
    detail = f"{len(problems)} skipped (file backed up as sessions.json.bad-*): " + "; ".join(
        problems[:5]
    )
    if len(problems) > 5:
        detail += f"; and {len(problems) - 5} more"
    return Check("sessions.json import", False, detail, problems=problems)


def _check_search(store: SessionStore, *, repair: bool) -> Check:
    status = store.search_index_status()
    problems = []
    if status.get("stale"):
        problems.append("marked stale (search falls back to a scan)")
    if status.get("integrity_error"):
        problems.append(f"integrity check failed: {status['integrity_error']}")
    if not problems:
        pending = int(status.get("pending", 0))
        if not pending:
            return Check("search index", True, "up to date")
        # Not a fault: appends leave indexing to the next search, which catches up first.
        return Check(
            "search index",
            True,
            f"healthy; {plural(pending, 'new entry', 'new entries')} "
            "will be indexed by the next search",
        )
    if not repair:
        return Check("search index", False, "; ".join(problems) + "; run with --repair")
    indexed = store.rebuild_search_index()
    after = store.search_index_status()
    if after.get("stale") or after.get("integrity_error"):
        return Check("search index", False, "still damaged after a rebuild", repaired=False)
    return Check("search index", True, f"rebuilt ({indexed} rows)", repaired=True)


def _repair_mirror(store: SessionStore, json_path: Path) -> Check:
    """Rewrite `sessions.json` from the database; a write that fails says why, and is no
    repair."""
    error = store.flush_mirror()
    after = _check_mirror(json_path)
    if error is not None or not after.ok:
        return Check(after.name, False, f"could not be rewritten: {error or after.detail}")
    return Check(after.name, True, f"rewritten: {after.detail}", repaired=True)


def run_checks(home: Path, config_file: Path | None, *, repair: bool, full: bool) -> list[Check]:
    """Every check, in order; later checks are skipped when the database cannot be read."""
    checks: list[Check] = []
    config_check, config = _check_config(home, config_file)
    checks.append(config_check)
    if config_check.ok:
        checks.append(_check_agents(config, os.environ))
    directory = sessions_dir(home)
    db_path = directory / "state.db"
    if not db_path.exists():
        checks.append(Check("database", True, f"no database yet at {db_path}"))
        return checks
    database = _check_sqlite(db_path, full=full)
    checks.append(database)
    mirror = _check_mirror(directory / "sessions.json")
    try:
        store = SessionStore(directory, config)
    except SessiongateError as exc:
        checks.append(Check("store", False, exc.message))
        checks.append(mirror)
        return checks
    try:
        checks.append(Check("store", True, "opens"))
        checks.append(_check_import(store))
        checks.append(_check_search(store, repair=repair))
        if not mirror.ok and repair and store.keeps_mirror:
            mirror = _repair_mirror(store, directory / "sessions.json")
        checks.append(mirror)
    finally:
        store.close()
    return checks


def doctor(
    home: HomeOption = None,
    config_file: ConfigOption = None,
    repair: Annotated[
        bool,
        typer.Option("--repair", help="Rebuild the search index and sessions.json if damaged."),
    ] = False,
    full: Annotated[
        bool, typer.Option("--full", help="Run SQLite's full integrity_check (slower).")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Check the database, the search index and sessions.json; exit 1 if a problem remains.

    The agents row names what answers; it warns (exit code still 0) when OPENAI_API_KEY is
    set and no agent uses it: the key alone keeps the echo agent.
    """
    resolved = (home or default_home()).expanduser()
    checks = run_checks(resolved, config_file, repair=repair, full=full)
    healthy = all(c.ok for c in checks)
    if repair and healthy and not any(c.repaired for c in checks):
        checks.append(Check("repair", True, "nothing to repair"))
    if as_json:
        emit_json(
            {"home": str(resolved), "healthy": healthy, "checks": [asdict(c) for c in checks]}
        )
    else:
        table = Table(title=f"sessiongate doctor: {resolved}", title_justify="left")
        for column in ("check", "result", "detail"):
            table.add_column(column, overflow="fold")
        for check in checks:
            if check.repaired:
                result = "[green]repaired[/]"
            elif check.warning:
                result = "[yellow]warning[/]"
            else:
                result = "[green]ok[/]" if check.ok else "[red]problem[/]"
            # Details quote paths, errors and install hints (`sessiongate[postgres]`): text,
            # never markup.
            table.add_row(escape(check.name), result, escape(check.detail))
        console.print(table)
    if not healthy:
        raise typer.Exit(EXIT_FAILURE)
