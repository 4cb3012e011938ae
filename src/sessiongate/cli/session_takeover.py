"""`sessiongate sessions takeover|handback KEY`: an operator takes a session over from the
agent, or hands it back, from a shell (as `POST` and `DELETE /v1/sessions/{key}/takeover`).

The state is the store's row, so it holds whether or not the gateway runs; a running gateway
follows it within a few seconds (`gateway/takeover.py`: it stops a running turn of a lane
taken over, and after a hand-back answers what people said meanwhile). Replies while a
session is taken over go through the HTTP API or the dashboard, which deliver them. `--json`
prints the HTTP API's body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.api.schemas import TakeoverOut
from sessiongate.cli._common import (
    ConfigOption,
    HomeOption,
    JsonOption,
    fail,
    load_paths_and_config,
    opened_store,
)
from sessiongate.cli.session_ops import KeyArgument, require_entry, show_model
from sessiongate.gateway.takeover import OPERATOR
from sessiongate.store.takeover import TakeoverStore

if TYPE_CHECKING:
    import typer

__all__ = ["register"]


def takeover(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Take a session over: the agent stops answering it, people's messages are stored.

    It goes back to the agent with `sessions handback`, `/bot on`, or by itself after
    `takeover.auto_resume_minutes`.
    """
    _, config = load_paths_and_config(home, config_file)
    minutes = config.takeover.auto_resume_minutes
    with opened_store(home, config_file) as store:
        require_entry(store, key)
        taken, new = TakeoverStore(store).start(key, by=OPERATOR, resume_after_minutes=minutes)
    out = TakeoverOut(
        session_key=key,
        taken_over=True,
        taken_by=taken.taken_by,
        since=taken.since,
        resume_at=taken.resume_at,
    )
    until = f" until {taken.resume_at.isoformat()}" if taken.resume_at else ""
    text = f"took over {key}{until}" if new else f"{key} was taken over already{until}"
    show_model(out, text, as_json=as_json)


def handback(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Hand a session back to the agent (exit 1 when it is not taken over)."""
    with opened_store(home, config_file) as store:
        require_entry(store, key)
        ended = TakeoverStore(store).end(key, by=OPERATOR, reason="handback")
    if ended is None:
        fail(f"{key} is not taken over", error_code="not_taken_over")
    show_model(
        TakeoverOut(session_key=key, taken_over=False), f"handed {key} back", as_json=as_json
    )


def register(app: typer.Typer) -> None:
    """Add the takeover commands to the `sessions` group."""
    app.command("takeover")(takeover)
    app.command("handback")(handback)
