"""`sessiongate sessions pin|unpin|archive|unarchive|read|unread|label|delete`: a session's
row from a shell, over the store calls of `PATCH` and `DELETE /v1/sessions/{key}` with their
rules (archiving is compare-and-set on the session id, labels are unique, a delete archives
the transcript first and is refused while a turn runs). `--json` prints the session row.
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sessiongate.api.rows import session_row
from sessiongate.api.schemas import DeleteOut
from sessiongate.cli._common import (
    EXIT_USAGE,
    ConfigOption,
    HomeOption,
    JsonOption,
    fail,
    opened_store,
)
from sessiongate.cli.session_ops import (
    KeyArgument,
    checked_text,
    idle_lane,
    require_entry,
    show_model,
)
from sessiongate.errors import SessionBusyError
from sessiongate.store.lanes import LaneStore

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.api.schemas import SessionRow
    from sessiongate.core.entry import SessionEntry

__all__ = ["register"]

# The store's bound on labels (store/rows.py), checked here so a bad one is a usage error.
MAX_LABEL_CHARS = 512


def _patch(
    home: Path | None, config_file: Path | None, key: str, **changes: Any
) -> tuple[SessionEntry, SessionRow]:
    """`patch_session` on an existing key: the entry after it, and its session row."""
    with opened_store(home, config_file) as store:
        require_entry(store, key)
        entry = store.patch_session(key, **changes)
        return entry, session_row(entry, store)


def pin(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pin a session: `sessions list` shows pinned sessions first."""
    _, row = _patch(home, config_file, key, pinned=True)
    show_model(row, f"pinned {key}", as_json=as_json)


def unpin(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Unpin a session."""
    _, row = _patch(home, config_file, key, pinned=False)
    show_model(row, f"unpinned {key}", as_json=as_json)


def archive(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    expected_session_id: Annotated[
        str | None,
        typer.Option(
            show_default=False,
            help="Archive only if the key still points at this session id (as the HTTP "
            "API requires). Default: the id it has now.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Archive a session: hidden from `sessions list` (see --archived), its pin cleared.

    An archived session refuses new messages until it is unarchived. Protected keys cannot
    be archived.
    """
    if expected_session_id is not None:
        checked_text(expected_session_id, "--expected-session-id")
    with (
        opened_store(home, config_file) as store,
        idle_lane(store, key, "archive the session") as (current, _),
    ):
        # An archived lane drops what waits on it unrun, though each message was already
        # acknowledged; read in the write transaction, so no message can slip in between.
        if LaneStore(store).has_pending(key):
            raise SessionBusyError(
                f"cannot archive the session while messages wait on {key!r}; retry when "
                "they have run (the gateway runs them when it is up)",
                session_key=key,
            )
        entry = store.patch_session(
            key,
            archived=True,
            expected_session_id=(
                current.session_id if expected_session_id is None else expected_session_id
            ),
        )
        row = session_row(entry, store)
    show_model(row, f"archived {key}", as_json=as_json)


def unarchive(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Bring an archived session back into `sessions list`."""
    _, row = _patch(home, config_file, key, archived=False)
    show_model(row, f"unarchived {key}", as_json=as_json)


def read(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    expected_marked_unread_at: Annotated[
        str | None,
        typer.Option(
            show_default=False,
            help="Acknowledge only if the unread marker is still this ISO-8601 time (`none`: "
            "only if there is no marker); a newer marker keeps the session unread.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Mark a session read (acknowledge it)."""
    changes: dict[str, Any] = {"unread": False}
    if expected_marked_unread_at is not None:
        changes["expected_marked_unread_at"] = _marker_time(expected_marked_unread_at)
    entry, row = _patch(home, config_file, key, **changes)
    if entry.marked_unread_at is not None:
        show_model(row, f"{key} stays unread: its unread marker has changed", as_json=as_json)
    else:
        show_model(row, f"marked {key} read", as_json=as_json)


def _marker_time(text: str) -> datetime | None:
    if text.strip().lower() == "none":
        return None
    try:
        value = datetime.fromisoformat(checked_text(text, "--expected-marked-unread-at"))
    except ValueError:
        fail(f"--expected-marked-unread-at: not an ISO-8601 time: {text!r}", EXIT_USAGE)
    if value.tzinfo is None:
        # A time without an offset names no instant, so it cannot match a stored marker.
        fail("--expected-marked-unread-at needs a UTC offset (e.g. +00:00 or Z)", EXIT_USAGE)
    return value


def unread(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Mark a session unread."""
    _, row = _patch(home, config_file, key, unread=True)
    show_model(row, f"marked {key} unread", as_json=as_json)


def label(
    key: KeyArgument,
    text: Annotated[
        str | None,
        typer.Argument(
            show_default=False, help="The label: 1 to 512 characters, unique among sessions."
        ),
    ] = None,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    clear: Annotated[bool, typer.Option("--clear", help="Remove the label instead.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Set a session's label (`sessions list` shows it as the name), or --clear it."""
    if (text is None) == (not clear):
        fail("give a label or --clear, not both or neither", EXIT_USAGE)
    if text is not None and not (0 < len(checked_text(text, "the label")) <= MAX_LABEL_CHARS):
        fail(f"labels are 1 to {MAX_LABEL_CHARS} characters", EXIT_USAGE)
    _, row = _patch(home, config_file, key, label=text)
    done = f"cleared the label of {key}" if text is None else f"labelled {key} {text!r}"
    show_model(row, done, as_json=as_json)


def model(
    key: KeyArgument,
    name: Annotated[
        str | None, typer.Option("--model", help="The model; 'default' goes back to the default.")
    ] = None,
    provider: Annotated[
        str | None, typer.Option(help="The provider; 'default' goes back to the default.")
    ] = None,
    thinking_level: Annotated[
        str | None, typer.Option(help="The thinking level; 'default' goes back to the default.")
    ] = None,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Choose a session's model, provider or thinking level for its next turns.

    Each change is also recorded in the transcript (a model or thinking-level change entry),
    so rewinding past it takes it back; the choice carries over a reset.
    """
    given = {"model": name, "provider": provider, "thinking_level": thinking_level}
    choice = {k: (None if v == "default" else v) for k, v in given.items() if v is not None}
    if not choice:
        fail("give --model, --provider or --thinking-level", EXIT_USAGE)
    for field, value in choice.items():
        if value is not None:
            checked_text(value, f"the {field.replace('_', ' ')}")
    with opened_store(home, config_file) as store:
        require_entry(store, key)
        entry = store.set_model_choice(key, **choice)
        row = session_row(entry, store)
    show_model(
        row,
        f"{key}: " + ", ".join(f"{k} {v or 'default'}" for k, v in choice.items()),
        as_json=as_json,
    )


def delete(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Delete a session and every conversation of its key; the transcripts are archived first
    (under <home>/sessions/archive) and the key is remembered as deleted.

    Asks first unless --yes. Refused while a turn is running, and for protected keys.
    """
    with opened_store(home, config_file) as store:
        require_entry(store, key)
        # Asked before the write transaction: a prompt must not hold the gateway's lock.
        if not yes:
            _confirm(f"Delete {key!r} and every conversation of it?")
        with idle_lane(store, key, "delete the session"):
            deleted = store.delete_session(key)
        archive_dir = store.sessions_dir / "archive"
    if not deleted:  # cannot happen: the lane was read in the same transaction
        fail(f"no session with key {key!r}", error_code="session_not_found")
    show_model(
        DeleteOut(deleted=True, session_key=key),
        f"deleted {key}; its transcript is archived in {archive_dir}",
        as_json=as_json,
    )


def _confirm(question: str) -> None:
    # Not `typer.confirm`: it writes a space to stdout, which a script reading `--json` gets.
    sys.stderr.write(f"{question} [y/N]: ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    if not answer:  # end of input: nobody said yes
        sys.stderr.write("\n")
    if answer.strip().lower() not in ("y", "yes"):
        fail("not deleted (pass --yes to delete without asking)")


def register(app: typer.Typer) -> None:
    """Add the row commands to the `sessions` group."""
    for name, command in (
        ("pin", pin),
        ("unpin", unpin),
        ("archive", archive),
        ("unarchive", unarchive),
        ("read", read),
        ("unread", unread),
        ("label", label),
        ("model", model),
        ("delete", delete),
    ):
        app.command(name)(command)
