"""`sessiongate forget --user <platform>:<user_id> [--dry-run] [--json]`: the right to erasure.

It runs `SessionStore.forget_user` on the home's store and prints the receipt (or, with
`--dry-run`, the plan: the same transaction rolled back). A gateway serving the same home keeps
model contexts of recent turns in memory: with one running, `POST /v1/erasure` erases through
it and drops them; this command tells the operator so.
"""

from __future__ import annotations

from pathlib import Path  # noqa: TC003  # typer reads the annotations at run time
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from sessiongate.cli._common import (
    EXIT_USAGE,
    ConfigOption,
    HomeOption,
    JsonOption,
    console,
    emit_json,
    err_console,
    fail,
    load_paths_and_config,
    opened_store,
)
from sessiongate.core.erasure import parse_subject
from sessiongate.errors import HomeInUseError, StoreUnavailableError
from sessiongate.gateway.recovery import HomeLock

__all__ = ["forget"]


def _gateway_serves(home: Path) -> bool:
    """Whether a gateway (or chat) holds the home's lock right now."""
    if not (home / "gateway.lock").exists():
        return False
    lock = HomeLock(home)
    try:
        lock.acquire()
    except HomeInUseError:
        return True
    except StoreUnavailableError:
        return False
    lock.release()
    return False


def forget(
    user: Annotated[
        str,
        typer.Option("--user", help="The person to erase, as <platform>:<user_id> (telegram:42)."),
    ],
    home: HomeOption = None,
    config_file: ConfigOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only show what would be erased; change nothing.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Erase one person everywhere the store keeps them (right to erasure).

    Their lanes (DMs, per-user group and thread lanes, forks) are deleted with every session
    id, search row and archive blob; in shared lanes their messages become tombstones; their
    queue, dedup and journal rows, identity aliases and pairing rows go; the database is
    scrubbed so the files keep none of it. A receipt (counts, a salted hash of the person,
    the time) is kept and printed. See docs/PRIVACY.md.
    """
    try:
        subject = parse_subject(user)
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE, error_code="invalid_user")
    paths, _ = load_paths_and_config(home, config_file)
    if not dry_run and _gateway_serves(paths.home):
        err_console.print(
            "note: a gateway is serving this home; it may keep recent model contexts of shared "
            "lanes in memory until it restarts (POST /v1/erasure erases through it)",
            markup=False,
        )
    with opened_store(home, config_file) as store:
        receipt = store.forget_user(subject, dry_run=dry_run)
    if as_json:
        emit_json(receipt.to_dict() | {"counts": receipt.counts()})
        return
    title = (
        "erasure plan (nothing changed)" if dry_run else f"erasure receipt #{receipt.receipt_id}"
    )
    table = Table(title=title, show_header=False)
    for name, count in receipt.counts().items():
        table.add_row(name.replace("_", " "), str(count))
    table.add_row("subject hash", receipt.subject_hash)
    table.add_row("at", receipt.erased_at)
    console.print(table)
    if not receipt.scrubbed:
        err_console.print(
            "note: the database file could not be rewritten now (busy); run the same command "
            "again to finish the scrub",
            markup=False,
        )
    for key in receipt.keys:
        console.print(Text(f"  {'would delete' if dry_run else 'deleted'} {key}"))
