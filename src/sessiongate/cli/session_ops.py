"""What the tree and row commands of `sessiongate sessions` share: a key looked up as the HTTP
API looks it up, output as text or the API's JSON body, and the running-turn refusal (the store
itself is opened with `_common.opened_store`, as every `sessions` command does).

The CLI may run beside a live gateway on the same `state.db`. The gateway's runner knows in
memory which lanes are busy; this process only sees the turn journal. So an operation the HTTP
API refuses while a turn runs checks the journal for a `running` turn of the key *inside* the
write transaction that makes the change: the gateway journals a turn in a write transaction
too, so no turn can start between the check and the change.

Errors become one line on stderr: exit 2 for input that cannot be right (a malformed key, two
options that exclude each other), exit 1 for an operation the store refused.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Annotated

import typer

from sessiongate.cli._common import (
    EXIT_USAGE,
    console,
    emit_json,
    fail,
)
from sessiongate.core.keys import check_key_text, parse_session_key
from sessiongate.errors import SessionBusyError
from sessiongate.store.lanes import LaneStore, TurnState

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pydantic import BaseModel

    from sessiongate.core.entry import SessionEntry
    from sessiongate.store.session_store import SessionStore

__all__ = [
    "KeyArgument",
    "checked_text",
    "idle_lane",
    "require_entry",
    "say",
    "show_model",
]

KeyArgument = Annotated[
    str, typer.Argument(help="The session key, as `sessions list` prints it.", show_default=False)
]


def say(text: str) -> None:
    """One line of human output; user text is never read as markup or emoji codes."""
    console.print(text, markup=False, emoji=False, soft_wrap=True)


def show_model(model: BaseModel, text: str, *, as_json: bool) -> None:
    """The HTTP API's body for the same operation with `--json`, else one line of text."""
    if as_json:
        emit_json(model.model_dump(mode="json"))
    else:
        say(text)


def checked_text(value: str, what: str) -> str:
    """Text from the command line as the store can hold it: a non-UTF-8 byte in an argument
    arrives as a lone surrogate, which SQLite refuses with a traceback."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        fail(f"{what} is not valid UTF-8", EXIT_USAGE)
    return value


def require_entry(store: SessionStore, key: str) -> SessionEntry:
    """The entry for `key`, with the HTTP API's answers: exit 1 when the key is well formed
    but unknown (or deleted), exit 2 when it cannot be a key. Keys imported from a legacy
    store need not parse, so the lookup comes first."""
    check_key_text(checked_text(key, "the session key"))
    entry = store.get_session(key)
    if entry is None:
        parse_session_key(key)
        fail(store.missing_message(key), error_code="session_not_found")
    return entry


def has_running_turn(lanes: LaneStore, key: str) -> bool:
    """A turn of `key` is journalled as running (by this or another process)."""
    # One row per busy lane at most, so reading them all is cheap.
    return any(turn.session_key == key for turn in lanes.turns_in_state(TurnState.RUNNING))


@contextlib.contextmanager
def idle_lane(
    store: SessionStore, key: str, action: str | None, *, hint: str = ""
) -> Iterator[tuple[SessionEntry, bool]]:
    """One write transaction holding `key`'s entry, in which no turn of `key` runs:
    `SessionBusyError` (nothing written) if one does. With `action=None` nothing is refused
    and the body learns whether a turn runs (a `last-completed` fork may copy beside it)."""
    lanes = LaneStore(store)
    with lanes.atomic():
        entry = require_entry(store, key)
        busy = has_running_turn(lanes, key)
        if busy and action is not None:
            raise SessionBusyError(
                f"cannot {action} while a turn is running on {key!r}; retry when it has "
                f"finished{hint} (a turn cut off by a crash counts as running until the "
                "gateway restarts and resumes it)",
                session_key=key,
            )
        yield entry, busy
