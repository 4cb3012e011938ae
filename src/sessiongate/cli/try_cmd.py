"""`sessiongate try PLATFORM`: a platform adapter against its local stub, with no token.

Runs the conversation of `cli/_trial.py` and shows it as it happens, then a summary; `--json`
prints the whole of it as one JSON document instead. Exit 0 when every message was answered,
1 when one was not (or the gateway would not start), 2 for an unknown platform.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from sessiongate.adapters.registry import MissingExtraError
from sessiongate.cli._common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    JsonOption,
    console,
    emit_json,
    fail,
    plural,
)
from sessiongate.cli._trial import DEFAULT_MESSAGES, Line, TrialResult, run_trial
from sessiongate.errors import SessiongateError
from sessiongate.logs import configure_logging
from sessiongate.testing.trial import UnknownTryPlatformError, load_try_target

__all__ = ["try_platform"]

# How each speaker's lines start, and their colour: the operator's line is a shell command.
_SPEAKERS = {
    "user": ("user", "cyan"),
    "bot": ("bot", "green"),
    "operator": ("operator$", "yellow"),
    "note": ("!", "red"),
}


def try_platform(
    platform: Annotated[
        str, typer.Argument(help="telegram, slack or discord (every adapter with a stub).")
    ],
    message: Annotated[
        list[str] | None,
        typer.Option(
            "--message",
            "-m",
            help="What the simulated user says once paired (repeatable). "
            "Default: hello, then /status.",
            show_default=False,
        ),
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option(
            "--home",
            help="Keep the state in this directory. Default: a temporary one, removed after.",
            file_okay=False,
            show_default=False,
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option(min=1, help="Seconds to wait for each answer of the bot.")
    ] = 30.0,
    as_json: JsonOption = False,
) -> None:
    """Try a platform adapter with no token: the gateway against the platform's local stub.

    A simulated user writes to the bot in a direct chat; the bot answers their first message
    with a pairing code, which is approved as `sessiongate pairing approve CODE` would, and
    then answers each message. The adapter drives the platform's real SDK; only the platform
    is a stub on 127.0.0.1. No config file is read, and the state goes to a temporary home
    (removed afterwards) unless --home is given. Exit 0 when every message was answered.
    """
    try:
        target = load_try_target(platform)
    except UnknownTryPlatformError as exc:
        fail(exc.message, EXIT_USAGE, error_code=exc.code)
    except MissingExtraError as exc:
        fail(exc.message, error_code=exc.code)
    # The conversation is the output; the gateway's own log lines would drown it.
    configure_logging("ERROR")
    logging.getLogger("sessiongate").setLevel(logging.CRITICAL)
    if message and any(not m.strip() for m in message):
        fail("--message needs some text (a blank message is never sent)", EXIT_USAGE)
    messages = tuple(message) if message else DEFAULT_MESSAGES

    def show(line: Line) -> None:
        if as_json:
            return
        who, colour = _SPEAKERS[line.speaker]
        console.print(f"[{colour}]{escape(who)}>[/] {escape(line.text)}", soft_wrap=True)

    if not as_json:
        console.print(
            f"[bold]Trying {target.title}[/]: the gateway and its {target.platform} adapter "
            f"({target.sdk}) against {target.stub} on 127.0.0.1; no token, nothing leaves "
            "this machine.",
            soft_wrap=True,
        )
    with contextlib.ExitStack() as stack:
        where = home or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sg-try-")))
        where = where.expanduser()
        try:
            where.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            fail(f"cannot use {where} as the home: {exc.strerror or exc}")
        try:
            result = asyncio.run(
                run_trial(
                    target,
                    home=where,
                    messages=messages,
                    reply_timeout=timeout,
                    on_line=show,
                )
            )
        except SessiongateError as exc:
            fail(f"the gateway did not start: {exc.message}", error_code=exc.code)
        except TimeoutError:
            fail(f"the {target.title} adapter did not connect to the stub within {timeout:g} s")
    if as_json:
        emit_json(result.as_dict())
    else:
        _summary(result, kept=home is not None)
    raise typer.Exit(0 if result.ok else EXIT_FAILURE)


def _summary(result: TrialResult, *, kept: bool) -> None:
    table = Table(show_header=False, box=None, padding=(0, 2, 0, 0))
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    table.add_row(
        "Platform", f"{result.platform} ({result.sdk}) against the stub {result.stub_url}"
    )
    table.add_row("Agent", result.agent)
    table.add_row("Pairing", "approved" if result.paired else "not approved")
    table.add_row("Answered", f"{result.answered} of {plural(result.sent, 'message')}")
    for row in result.sessions:
        table.add_row("Session", f"{row['session_key']} ({plural(row['messages'], 'message')})")
    table.add_row("Home", result.home + ("" if kept else " (temporary, removed)"))
    console.print()
    console.print(table)
    if result.ok:
        console.print(
            "[green]ok[/]: the adapter works. For a real bot: docs/QUICKSTART.md "
            f"(platforms.{result.platform} in config.yaml, then `sessiongate run`).",
            soft_wrap=True,
        )
    else:
        console.print("[red]failed[/]: not every message was answered (see above).")
