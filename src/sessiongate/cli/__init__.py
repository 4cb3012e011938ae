"""The `sessiongate` command: a thin shell over the Python API, one module per command group.

    run        the gateway (HTTP API + runner)      cli/run.py
    chat       a conversation in this terminal       cli/chat.py
    sessions   list|show|search|export|import|prune  cli/sessions.py
    doctor     check (and --repair) a home           cli/doctor.py
    config     the effective configuration           cli/config_cmd.py
    db         status|upgrade of the store's database cli/db.py
    bench      the benchmark suite                   cli/bench.py
    pairing    list|approve DM pairing requests      cli/pairing.py
    jobs       scheduled jobs: add|list|show|...     cli/jobs.py
    approvals  list|approve|deny tool approvals      cli/approvals.py
    deliveries list|retry outbound messages          cli/deliveries.py
    try        an adapter against its local stub     cli/try_cmd.py
    forget     erase one person (right to erasure)   cli/forget.py
    import     hermes|openclaw: another gateway's home cli/import_cmd.py
    backup     an online copy of the SQLite store    cli/backup.py
    restore    a backup into a new home              cli/backup.py

Help is plain text at a fixed width, so `docs/CLI.md` (generated from it) is stable.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import click
import typer

import sessiongate
from sessiongate.cli import (
    approvals,
    backup,
    bench,
    chat,
    config_cmd,
    db,
    deliveries,
    doctor,
    forget,
    import_cmd,
    jobs,
    pairing,
    run,
    sessions,
    try_cmd,
)
from sessiongate.cli._common import json_errors, print_error

__all__ = ["app", "main"]

# Fixed help width: the same text in every terminal and in docs/CLI.md.
HELP_WIDTH = 88
CONTEXT_SETTINGS = {
    "help_option_names": ["-h", "--help"],
    "max_content_width": HELP_WIDTH,
    "terminal_width": HELP_WIDTH,
}

app = typer.Typer(
    name="sessiongate",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    context_settings=CONTEXT_SETTINGS,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"sessiongate {sessiongate.__version__}")
        raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """sessiongate: the session lifecycle engine and gateway for chat agents.

    State lives under $SESSIONGATE_HOME (default: the user data dir); --home overrides it.
    """


app.command("run")(run.run)
app.command("chat")(chat.chat)
app.add_typer(sessions.app, name="sessions")
app.command("doctor")(doctor.doctor)
app.command("config")(config_cmd.show_config)
app.add_typer(db.app, name="db", help="The store's database: status and upgrade.")
app.add_typer(pairing.app, name="pairing")
app.add_typer(jobs.app, name="jobs")
app.add_typer(approvals.app, name="approvals")
app.add_typer(deliveries.app, name="deliveries")
app.command("try")(try_cmd.try_platform)
app.command("forget")(forget.forget)
app.add_typer(import_cmd.app, name="import")
app.command("backup")(backup.backup)
app.command("restore")(backup.restore)
app.command(
    "bench",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)(bench.bench)


def main() -> None:
    """The console script (also `python -m sessiongate`).

    Click's own usage errors (a missing argument, a bad value) are printed here rather than by
    click, so that under `--json` they are JSON like every other error.
    """
    try:
        code = app(prog_name="sessiongate", standalone_mode=False)
    except _ABORTS:
        sys.stderr.write("Aborted!\n")
        sys.exit(1)
    except _USAGE_ERRORS as exc:
        error: Any = exc  # a click exception of either copy: `show`, `exit_code`
        if "--json" in sys.argv[1:] or json_errors():
            print_error(error.format_message(), "invalid_usage", as_json=True)
        else:
            error.show()
        sys.exit(int(error.exit_code))
    sys.exit(code if isinstance(code, int) else 0)


# Typer 0.2x carries its own copy of click, whose exceptions are not click's.
_USAGE_ERRORS: tuple[type[Exception], ...] = (
    click.ClickException,
    *((typer.TyperException,) if hasattr(typer, "TyperException") else ()),
)
_ABORTS: tuple[type[BaseException], ...] = (click.Abort, typer.Abort)
