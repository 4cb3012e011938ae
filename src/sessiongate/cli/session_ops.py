"""What the tree and row commands of `sessiongate sessions` share: the store opened under one
error handler, a key looked up as the HTTP API looks it up, and the running-turn refusal.

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
    load_paths_and_config,
    open_store,
)
from sessiongate.core.keys import parse_session_key
from sessiongate.errors import InvalidSessionKeyError, SessionBusyError, SessiongateError
from sessiongate.store.lanes import LaneStore, TurnState

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from pydantic import BaseModel

    from sessiongate.core.entry import SessionEntry
    from sessiongate.store.session_store import SessionStore

__all__ = [
    "KeyArgument",
    "checked_text",
    "idle_lane",
    "opened_store",
    "require_entry",
    "say",
    "show_model",
]

# The bound the HTTP API puts on a key (api/deps.py): longer than any key the builder makes.
MAX_KEY_CHARS = 4096

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


@contextlib.contextmanager
def opened_store(home: Path | None, config_file: Path | None) -> Iterator[SessionStore]:
    """The store under `<home>/sessions`, closed afterwards; a store error in the body becomes
    a one-line message and a non-zero exit, never a traceback."""
    paths, config = load_paths_and_config(home, config_file)
    store = open_store(paths, config)
    try:
        yield store
    except SessiongateError as exc:
        fail(exc.message, EXIT_USAGE if isinstance(exc, InvalidSessionKeyError) else 1)
    except OSError as exc:
        # The disk refused a file the store writes beside the database (a delete's archive).
        fail(f"{exc.strerror or exc}: {exc.filename or paths.home}")
    finally:
        store.close()


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
    checked_text(key, "the session key")
    if not key or len(key) > MAX_KEY_CHARS or any(ord(ch) < 32 or ord(ch) == 127 for ch in key):
        raise InvalidSessionKeyError(f"invalid session key: {key[:200]!r}", session_key=key)
    entry = store.get_session(key)
    if entry is None:
        parse_session_key(key)
        fail(store.missing_message(key))
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
