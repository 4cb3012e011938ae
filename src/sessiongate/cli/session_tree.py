"""`sessiongate sessions context|branches|rewind|fork|switch|compact|reset`: the conversation
tree from a shell, over the same `SessionStore` calls as the HTTP routes (api/routes_tree.py,
api/routes_sessions.py), with their argument names, refusals and `--json` bodies.

Rewind, switch, reset, compaction and forks other than `--from last-completed` are refused
while a turn of the key runs (see `session_ops.idle_lane`).
"""

from __future__ import annotations

import enum
import json
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from sessiongate.api.rows import branch_view, context_view
from sessiongate.api.schemas import (
    MAX_ENTRY_ID,
    BranchesOut,
    CompactOut,
    ContextOut,
    ForkOut,
    ResetOut,
    RewindOut,
    SwitchOut,
)
from sessiongate.cli._common import (
    EXIT_USAGE,
    ConfigOption,
    HomeOption,
    JsonOption,
    console,
    emit_json,
    fail,
    opened_store,
    plural,
    when,
)
from sessiongate.cli.session_ops import (
    KeyArgument,
    idle_lane,
    require_entry,
    say,
    show_model,
)
from sessiongate.core.transcript import estimate_tokens
from sessiongate.gateway import operations
from sessiongate.gateway.prompts import SystemPrompts
from sessiongate.store.lanes import LaneStore

__all__ = ["ForkFrom", "register"]

EntryOption = Annotated[
    int | None,
    typer.Option(
        "--entry",
        min=0,
        max=MAX_ENTRY_ID,
        show_default=False,
        help="A user message on the active path (an id from `sessions show --transcript`).",
    ),
]


class ForkFrom(enum.StrEnum):
    ACTIVE = "active"
    LAST_COMPLETED = "last-completed"


def context(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the model context the next turn would get (after resets and compactions)."""
    with opened_store(home, config_file) as store:
        entry = require_entry(store, key)
        ctx = store.model_context(entry.session_id)
        out = context_view(entry, ctx, store, prompts=SystemPrompts.load(store.config))
    if as_json:
        emit_json(out.model_dump(mode="json"))
        return
    facts = [
        plural(len(out.messages), "message"),
        f"about {plural(estimate_tokens(out.messages), 'token')}",
    ]
    if out.boundary_entry_id is not None:
        facts.append(f"starts after entry #{out.boundary_entry_id}")
    facts += [f"{name} {value}" for name, value in _settings(out) if value]
    say("; ".join(facts))
    for message in out.messages:
        say(f"{message.get('role')}: {_text(message)}")


def _settings(out: ContextOut) -> list[tuple[str, str | None]]:
    return [("model", out.model), ("provider", out.provider), ("thinking", out.thinking_level)]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if message.get("tool_calls"):
        names = [str((c.get("function") or {}).get("name")) for c in message["tool_calls"]]
        text += f" [calls {', '.join(names)}]"
    return text


def branches(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """List every branch tip of the current session; the active one is marked `*`."""
    with opened_store(home, config_file) as store:
        entry = require_entry(store, key)
        tips = store.list_branches(entry.session_id)
    out = BranchesOut(branches=[branch_view(tip) for tip in tips])
    if as_json:
        emit_json(out.model_dump(mode="json"))
        return
    table = Table(title=plural(len(out.branches), "branch", "branches"), title_justify="left")
    for column in ("", "leaf", "messages", "updated", "headline"):
        table.add_column(column, overflow="fold")
    for branch in out.branches:
        table.add_row(
            "*" if branch.active else "",
            "-" if branch.leaf_entry_id is None else str(branch.leaf_entry_id),
            str(branch.message_count),
            when(branch.updated_at) if branch.updated_at else "",
            # User text, not markup; the empty start has none.
            Text(branch.headline)
            if branch.leaf_entry_id is not None
            else "(empty: the next message starts here)",
        )
    console.print(table)


def rewind(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    turns: Annotated[
        int | None,
        typer.Option(
            min=1, max=10_000, show_default=False, help="Undo this many user turns. Default: 1."
        ),
    ] = None,
    entry_id: EntryOption = None,
    as_json: JsonOption = False,
) -> None:
    """Move the active leaf back before a user message; the old branch stays (see `branches`).

    Give --turns or --entry, not both. Refused while a turn is running on the session.
    """
    if turns is not None and entry_id is not None:
        fail("give --turns or --entry, not both", EXIT_USAGE)
    with opened_store(home, config_file) as store, idle_lane(store, key, "rewind") as (entry, _):
        if entry_id is not None:
            result = store.rewind_to(entry.session_id, entry_id)
            out = RewindOut(
                status=result["status"],
                editor_text=result.get("editor_text") or "",
                rewound_count=int(result.get("rewound_count") or 0),
            )
        else:
            undone = store.rewind_session(entry.session_id, turns or 1)
            count = int(undone["rewound_count"])
            out = RewindOut(
                status="rewound" if count else "nothing_to_rewind",
                editor_text=undone["target_text"],
                rewound_count=count,
            )
    if out.status in _REWIND_REFUSALS:
        fail(
            f"entry {entry_id} {_REWIND_REFUSALS[out.status]}",
            error_code="invalid_entry" if out.status == "not_user_message" else "entry_not_found",
        )
    if out.status == "nothing_to_rewind":
        show_model(out, "nothing to rewind: the active path has no user message", as_json=as_json)
        return
    text = f"rewound {plural(out.rewound_count, 'message')}; the message to edit: {out.editor_text}"
    show_model(out, text, as_json=as_json)


_REWIND_REFUSALS = {
    "missing": "is not in this session",
    "not_user_message": "is not a user message",
    "off_active_path": "is not on the active path (switch to its branch first)",
}


def fork(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    entry_id: EntryOption = None,
    fork_from: Annotated[
        ForkFrom | None,
        typer.Option(
            "--from",
            show_default=False,
            help="Copy the whole active branch, or only up to the last assistant reply "
            "(allowed while a turn runs). Default: active.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Copy the conversation into a new session key; the source is untouched.

    With --entry the copy stops just before that user message, whose text is printed for
    editing. Refused while a turn is running, except with --from last-completed.
    """
    if entry_id is not None and fork_from is not None:
        fail("give --entry or --from, not both", EXIT_USAGE)
    mode = fork_from or ForkFrom.ACTIVE
    beside_a_turn = entry_id is None and mode is ForkFrom.LAST_COMPLETED
    action = None if beside_a_turn else "fork"
    hint = "" if entry_id is not None else ", or fork with --from last-completed"
    with (
        opened_store(home, config_file) as store,
        idle_lane(store, key, action, hint=hint) as (_, busy),
    ):
        child, editor_text = operations.fork(
            store, key, entry_id=entry_id, fork_from=str(mode), busy=busy
        )
    out = ForkOut(
        session_key=child.session_key, session_id=child.session_id, editor_text=editor_text
    )
    text = f"forked into {out.session_key}"
    if editor_text:
        text += f"; the message to edit: {editor_text}"
    show_model(out, text, as_json=as_json)


def switch(
    key: KeyArgument,
    leaf_entry_id: Annotated[
        int,
        typer.Argument(
            min=0, max=MAX_ENTRY_ID, help="A branch tip, as `sessions branches` lists it."
        ),
    ],
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make another branch tip the active leaf. Refused while a turn is running."""
    with (
        opened_store(home, config_file) as store,
        idle_lane(store, key, "switch branches") as (entry, _),
    ):
        status = operations.switch_branch(store, entry, leaf_entry_id)
    out = SwitchOut.model_validate({"status": status})
    if out.status == "missing":
        fail(f"entry {leaf_entry_id} is not in this session", error_code="entry_not_found")
    if out.status == "not_a_tip":
        fail(
            f"entry {leaf_entry_id} is not a branch tip (see `sessions branches`)",
            error_code="invalid_entry",
        )
    if out.status == "already_active":
        show_model(out, f"branch {leaf_entry_id} is already active", as_json=as_json)
        return
    show_model(out, f"switched to branch {leaf_entry_id}", as_json=as_json)


def compact(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Summarise the older part of the conversation into a compaction entry.

    Without a model: the summary is the deterministic one the echo agent writes (a bullet per
    earlier user message); a running gateway's `POST /v1/sessions/{key}/compact` uses the
    session's agent instead. The newest turn is kept as it is (less of it, if it alone is
    over a quarter of the context window) and everything before it is summarised, however
    short. Refused while a turn is running, and for an archived session.
    """
    with opened_store(home, config_file) as store, idle_lane(store, key, "compact") as (entry, _):
        result = operations.compact_deterministically(store, entry)
    out = CompactOut(
        compacted=result["compacted"],
        tokens_before=result["tokens_before"],
        tokens_after=result["tokens_after"],
    )
    if as_json:
        emit_json({**out.model_dump(mode="json"), "reason": result["reason"]})
        return
    if out.compacted:
        say(f"compacted: about {out.tokens_before} tokens before, {out.tokens_after} after")
    else:
        say(
            f"not compacted ({str(result['reason']).replace('_', ' ')}): {out.tokens_before} tokens"
        )


class _ResetMode(enum.StrEnum):
    NEW_SESSION = "new_session"
    BOUNDARY = "boundary"


def reset(
    key: KeyArgument,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    mode: Annotated[
        _ResetMode | None,
        typer.Option(help="new_session: a new id; boundary: same id. Default: reset_mode."),
    ] = None,
    keep_tail: Annotated[
        bool, typer.Option(help="Keep the last 6 user/assistant messages, from a user one.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """End the current conversation and start a new session id (as `/new` does).

    The old transcript stays searchable, and the session's stuck-loop counter starts at zero.
    Refused while a turn is running on the session.
    """
    with opened_store(home, config_file) as store:
        lanes = LaneStore(store)
        with idle_lane(store, key, "reset"):
            entry, counted = operations.reset(
                store, lanes, key, mode=str(mode) if mode else None, keep_tail=keep_tail
            )
        if counted:
            # The store lives in `<home>/sessions` (cli/_common.py `sessions_dir`).
            operations.rewrite_restart_counts(store.sessions_dir.parent, lanes)
    if entry is None:  # cannot happen: the lane was read in the same transaction
        fail(f"no session with key {key!r}", error_code="session_not_found")
    show_model(
        ResetOut(session_id=entry.session_id),
        f"reset {key}: session id {entry.session_id}",
        as_json=as_json,
    )


def register(app: typer.Typer) -> None:
    """Add the tree commands to the `sessions` group."""
    for name, command in (
        ("context", context),
        ("branches", branches),
        ("rewind", rewind),
        ("fork", fork),
        ("switch", switch),
        ("compact", compact),
        ("reset", reset),
    ):
        app.command(name)(command)
