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

The root knows every command's name but imports a command's module only when that command is
resolved (`_LazyGroup`), so `sessiongate sessions list` does not load the HTTP API, the
gateway's runner or the agents; `tests/cli/test_cli_startup.py` keeps it so.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import click
import typer
from typer.core import TyperGroup

import sessiongate

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    # Typer 0.2x's own copy of click: the classes its groups and commands are made of.
    from typer import _click

__all__ = ["app", "main"]

# Fixed help width: the same text in every terminal and in docs/CLI.md.
HELP_WIDTH = 88
CONTEXT_SETTINGS = {
    "help_option_names": ["-h", "--help"],
    "max_content_width": HELP_WIDTH,
    "terminal_width": HELP_WIDTH,
}


class _Entry(NamedTuple):
    """One command of the root: the module that defines it, and how the root registers it."""

    module: str
    attribute: str
    group: bool = False
    options: Mapping[str, Any] = {}


# Registration order is help order: the commands, then the groups (typer's own order).
_ENTRIES: dict[str, _Entry] = {
    "run": _Entry("run", "run"),
    "chat": _Entry("chat", "chat"),
    "doctor": _Entry("doctor", "doctor"),
    "config": _Entry("config_cmd", "show_config"),
    "try": _Entry("try_cmd", "try_platform"),
    "forget": _Entry("forget", "forget"),
    "backup": _Entry("backup", "backup"),
    "restore": _Entry("backup", "restore"),
    "bench": _Entry(
        "bench",
        "bench",
        options={"context_settings": {"allow_extra_args": True, "ignore_unknown_options": True}},
    ),
    "sessions": _Entry("sessions", "app", group=True),
    "db": _Entry(
        "db", "app", group=True, options={"help": "The store's database: status and upgrade."}
    ),
    "pairing": _Entry("pairing", "app", group=True),
    "jobs": _Entry("jobs", "app", group=True),
    "approvals": _Entry("approvals", "app", group=True),
    "deliveries": _Entry("deliveries", "app", group=True),
    "import": _Entry("import_cmd", "app", group=True),
}


def _typer(**extra: Any) -> typer.Typer:
    """The root's Typer (and the one each command is built on, so both build alike)."""
    return typer.Typer(
        **extra,
        name="sessiongate",
        no_args_is_help=True,
        add_completion=False,
        rich_markup_mode=None,
        context_settings=CONTEXT_SETTINGS,
        pretty_exceptions_enable=False,
    )


def _load(name: str) -> _click.Command:
    """The command `name`, built as typer builds a command registered on the root: its module
    is imported only now, so `sessiongate sessions list` never loads the gateway or the API."""
    entry = _ENTRIES[name]
    module = importlib.import_module(f"sessiongate.cli.{entry.module}")
    target = getattr(module, entry.attribute)
    holder = _typer()
    if entry.group:
        holder.add_typer(target, name=name, **entry.options)
    else:
        holder.command(name, **entry.options)(target)
    return typer.main.get_group(holder).commands[name]


class _LazyCommands(MutableMapping[str, "_click.Command"]):
    """The root's commands by name, every name known, each command built on first use."""

    def __init__(self) -> None:
        self._built: dict[str, _click.Command] = {}

    def __getitem__(self, name: str) -> _click.Command:
        if name not in self._built:
            if name not in _ENTRIES:
                raise KeyError(name)
            self._built[name] = _load(name)
        return self._built[name]

    def __setitem__(self, name: str, command: _click.Command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __contains__(self, name: object) -> bool:
        return name in _ENTRIES or name in self._built

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def _names(self) -> list[str]:
        return [*_ENTRIES, *(name for name in self._built if name not in _ENTRIES)]


class _LazyGroup(TyperGroup):
    """The root group: it knows every command's name, and imports a command's module only
    when that command is invoked (or its help is shown)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        # Typer reads the names from here too (its suggestion for a mistyped command).
        self.commands = _LazyCommands()

    def list_commands(self, ctx: _click.Context) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: _click.Context, cmd_name: str) -> _click.Command | None:
        return self.commands.get(cmd_name)


app = _typer(cls=_LazyGroup)


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
        # Only on an error: the options' state lives there (and it loads the store's config).
        from sessiongate.cli._common import json_errors, print_error

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
