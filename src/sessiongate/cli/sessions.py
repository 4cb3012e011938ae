"""`sessiongate sessions list|show|search|export|import|prune`: the store from a shell.

Each command opens the store under `<home>/sessions`, does one thing through the public
`SessionStore` API and closes it; it is safe to run while the gateway serves the same home
(SQLite's write lock orders the two). The tree and row commands live in `session_tree.py` and
`session_rows.py`; this module is just past the ~400-line budget because export and import,
with their file handling, are the two long commands.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path  # noqa: TC003  # typer reads the annotations at run time
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from sessiongate.api.rows import session_row
from sessiongate.cli import session_rows, session_takeover, session_tree
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
from sessiongate.cli._tables import KeyCell, table_of
from sessiongate.core.bindings import AGENT_ID
from sessiongate.core.entry import SessionEntry
from sessiongate.errors import SessiongateError
from sessiongate.store.retention import policy_of

if TYPE_CHECKING:
    from rich.console import RenderableType

    from sessiongate.store.session_store import SessionStore

__all__ = ["EXPORT_FORMAT", "app"]

EXPORT_FORMAT = "sessiongate.export"
EXPORT_VERSION = 1

app = typer.Typer(
    help="List, show, search, export, import and prune sessions; change one session's "
    "conversation tree (rewind, fork, switch, compact, reset) or row (pin, archive, label, "
    "read state, delete); take one over from the agent and hand it back.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _row(entry: SessionEntry, store: SessionStore) -> dict[str, Any]:
    return session_row(entry, store).model_dump(mode="json")


def _agent_id(value: str | None) -> str | None:
    if value is not None and not AGENT_ID.fullmatch(value):
        raise typer.BadParameter(f"{value!r} is not an agent id (a-z, 0-9, '_', '-')")
    return value


AgentOption = Annotated[
    str | None,
    typer.Option(
        "--agent", callback=_agent_id, help="Only the sessions of this agent (e.g. main)."
    ),
]


def _cost(row: dict[str, Any]) -> str:
    if row["cost_status"] != "estimated":
        return "unknown"
    return f"${row['estimated_cost_usd']:.4f}"


def _flags(row: dict[str, Any]) -> str:
    names = [name for name in ("pinned", "archived", "unread", "suspended") if row[name]]
    return ",".join(names)


@app.command("list")
def list_sessions(
    home: HomeOption = None,
    config_file: ConfigOption = None,
    limit: Annotated[int, typer.Option(min=1, max=100_000, help="Rows per page.")] = 100,
    offset: Annotated[int, typer.Option(min=0, help="Rows to skip.")] = 0,
    archived: Annotated[
        bool, typer.Option("--archived", help="List archived sessions instead.")
    ] = False,
    active_minutes: Annotated[
        int | None,
        typer.Option(min=1, help="Only sessions updated in the last N minutes."),
    ] = None,
    agent: AgentOption = None,
    as_json: JsonOption = False,
) -> None:
    """List sessions, pinned first, then most recently updated."""
    with opened_store(home, config_file) as store:
        entries, total = store.list_page(
            limit=limit,
            offset=offset,
            archived=archived,
            active_minutes=active_minutes,
            agent=agent,
        )
        rows = [_row(e, store) for e in entries]
    if as_json:
        emit_json({"sessions": rows, "total": total})
        return
    cells: list[list[RenderableType]] = [
        [
            KeyCell(row["session_key"]),
            *_plain(
                row["label"] or row["display_name"] or "",
                when(row["updated_at"]),
                str(row["total_tokens"]),
                _cost(row),
                _flags(row),
            ),
        ]
        for row in rows
    ]
    # A time or a figure reads whole; the key folds between its parts, the name anywhere.
    console.print(
        table_of(
            f"{len(rows)} of {plural(total, 'session')}",
            ("session key", "name", "updated", "tokens", "cost", "flags"),
            cells,
            no_wrap=("updated", "cost"),
        )
    )


@app.command("show")
def show(
    key: Annotated[str, typer.Argument(help="The session key, as `sessions list` prints it.")],
    home: HomeOption = None,
    config_file: ConfigOption = None,
    transcript: Annotated[
        bool, typer.Option("--transcript", "-t", help="Also print the transcript.")
    ] = False,
    all_branches: Annotated[
        bool, typer.Option("--all-branches", help="With --transcript: every branch.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Show one session: its row and, optionally, its transcript."""
    with opened_store(home, config_file) as store:
        entry = store.get_session(key)
        if entry is None:
            fail(f"no session with key {key!r}", error_code="session_not_found")
        row = _row(entry, store)
        events: list[dict[str, Any]] | None = None
        if transcript:
            branch = "all" if all_branches else "active"
            events = store.load_events(entry.session_id, branch=branch)
    if as_json:
        out: dict[str, Any] = {"session": row}
        if events is not None:
            out["events"] = events
        emit_json(out)
        return
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for name, value in row.items():
        if value not in (None, False, 0, 0.0, ""):
            # The unread marker is shown whole: `sessions read --expected-marked-unread-at`
            # compares it to the millisecond.
            shown = when(value) if name.endswith("_at") and name != "marked_unread_at" else value
            table.add_row(name, Text(str(shown)))
    console.print(table)
    for event in events or []:
        if event.get("type") == "message":
            content = event.get("content")
            text = content if isinstance(content, str) else json.dumps(content)
            console.print(
                Text.assemble(
                    (f"#{event['id']} ", "dim"), (str(event.get("role")), "bold"), ": ", text
                )
            )
        else:
            console.print(f"[dim]#{event['id']} ({event.get('type')})[/]")


@app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Words to look for (plain text, not a query).")],
    home: HomeOption = None,
    config_file: ConfigOption = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many hits.")] = 20,
    agent: AgentOption = None,
    as_json: JsonOption = False,
) -> None:
    """Full-text search over the active branch of every transcript."""
    if not query.strip():
        # As `GET /v1/search?q=` is refused: an empty query would match nothing, or all.
        fail("give words to search for (the query is empty)", EXIT_USAGE)
    with opened_store(home, config_file) as store:
        hits, degraded = store.search_detailed(query, limit, agent=agent)
    if as_json:
        emit_json({"results": hits, "degraded": degraded})
        return
    if degraded:
        console.print("[yellow]the search index is stale; results come from a slower scan[/]")
    cells: list[list[RenderableType]] = [
        [
            KeyCell(str(hit.get("session_key"))),
            *_plain(str(hit.get("role")), when(hit.get("timestamp")), str(hit.get("snippet"))),
        ]
        for hit in hits
    ]
    console.print(
        table_of(plural(len(hits), "hit"), ("session key", "role", "when", "snippet"), cells)
    )


@app.command("export")
def export(
    home: HomeOption = None,
    config_file: ConfigOption = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write here instead of stdout.", dir_okay=False),
    ] = None,
    keys: Annotated[
        list[str] | None,
        typer.Option("--key", help="Export only this key (repeatable). Default: all."),
    ] = None,
) -> None:
    """Export sessions and their active transcripts as one JSON document."""
    with opened_store(home, config_file) as store:
        if keys:
            entries = []
            for key in keys:
                entry = store.get_session(key)
                if entry is None:
                    fail(f"no session with key {key!r}", error_code="session_not_found")
                entries.append(entry)
        else:
            entries = store.list_sessions()
        sessions = [
            {"entry": e.to_dict(), "events": store.load_events(e.session_id)} for e in entries
        ]
    document = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": datetime.now(UTC).isoformat(),
        "sessions": sessions,
    }
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    if output is None:
        sys.stdout.write(text)
        return
    try:
        _write_private(output, text)
    except OSError as exc:
        fail(f"cannot write {output}: {exc.strerror or exc}")
    console.print(f"exported {plural(len(sessions), 'session')} to {output}")


def _write_private(path: Path, text: str) -> None:
    """Write `text` to `path` readable by its owner only from the first byte (transcripts are
    private): a new file is created 0600, an existing one made 0600 before it is truncated.
    A write that fails half-way leaves no half document behind."""
    # Not O_TRUNC: a file we may write but not chmod (another owner's) is left untouched.
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.truncate(0)
            out.write(text)
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()
        raise


@app.command("import")
def import_(
    file: Annotated[
        Path,
        typer.Argument(
            help="A `sessions export` document, or a sessions.json routing file.",
            exists=True,
            dir_okay=False,
        ),
    ],
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import sessions; keys the store already has are skipped, never overwritten."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        fail(f"cannot read {file}: {exc}", EXIT_USAGE)
    items, problems = _parse_import(data)
    imported = messages = skipped = 0
    with opened_store(home, config_file) as store:
        for entry, events in items:
            # A transcript already in the store (a pruned key coming back) is not appended
            # again: messages without ids would be duplicated.
            has_transcript = store.session_info(entry.session_id) is not None
            batch = [_message_of(e) for e in events if e.get("type", "message") == "message"]
            reported = len(problems)
            try:
                # The entry and its transcript commit together: a transcript that cannot be
                # stored leaves no route behind, so a corrected file imports the key whole.
                with store.atomic():
                    if store.import_entries([entry], problems=problems) == 0:
                        if len(problems) == reported:
                            skipped += 1
                        continue
                    if batch and not has_transcript:
                        store.append_messages(entry.session_id, batch)
            except (ValueError, OverflowError, SessiongateError) as exc:
                problems.append(f"{entry.session_key[:80]}: not imported: {exc!s:.200}")
                continue
            imported += 1
            if not has_transcript:
                messages += len(batch)
    if as_json:
        emit_json(
            {"imported": imported, "skipped": skipped, "messages": messages, "problems": problems}
        )
    else:
        console.print(
            f"imported {plural(imported, 'session')} ({plural(messages, 'message')}); "
            f"{skipped:,} already present"
        )
        for problem in problems:
            console.print(f"[yellow]skipped:[/] {problem}")
    if problems:
        raise typer.Exit(1)


_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "message_id")


def _message_of(event: dict[str, Any]) -> dict[str, Any]:
    message = {k: event[k] for k in _MESSAGE_KEYS if event.get(k) is not None}
    if isinstance(event.get("metadata"), dict):
        message["metadata"] = event["metadata"]
    if isinstance(event.get("timestamp"), str):
        message["timestamp"] = event["timestamp"]
    return message


def _parse_import(data: Any) -> tuple[list[tuple[SessionEntry, list[dict[str, Any]]]], list[str]]:
    items: list[tuple[SessionEntry, list[dict[str, Any]]]] = []
    problems: list[str] = []
    if isinstance(data, dict) and data.get("format") == EXPORT_FORMAT:
        raw_sessions = data.get("sessions")
        if not isinstance(raw_sessions, list):
            fail("the export document has no sessions list", EXIT_USAGE)
        for index, item in enumerate(raw_sessions):
            try:
                if not isinstance(item, dict):
                    raise ValueError("not an object")
                raw_entry = item.get("entry")
                if not isinstance(raw_entry, dict):
                    raise ValueError("entry is not an object")
                entry = SessionEntry.from_dict(raw_entry)
                events = item.get("events") or []
                if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
                    raise ValueError("events must be a list of objects")
            except ValueError as exc:
                problems.append(f"session #{index}: {exc}")
                continue
            items.append((entry, events))
    elif isinstance(data, dict):
        # A sessions.json routing file: key → entry, no transcripts.
        for key, value in data.items():
            if key.startswith("_"):
                continue
            try:
                if not isinstance(value, dict):
                    raise ValueError("not an object")
                entry = SessionEntry.from_dict(
                    {**value, "session_key": value.get("session_key", key)}
                )
            except ValueError as exc:
                problems.append(f"{key[:80]!r}: {exc}")
                continue
            items.append((entry, []))
    else:
        fail("expected a JSON object (an export document or sessions.json)", EXIT_USAGE)
    return items, problems


@app.command("prune")
def prune(
    home: HomeOption = None,
    config_file: ConfigOption = None,
    max_age_days: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Drop routing entries not updated for this many days. "
            "Default: session_store_max_age_days.",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Only list the entries that would be dropped."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Drop old routing entries (transcripts stay and remain searchable), and delete the
    sessions the `retention.*` budgets remove (transcripts, search rows and archive blobs:
    archived sessions first, then the oldest idle ones; never pinned, protected, busy or
    resume-pending ones). --dry-run shows the plan housekeeping would carry out."""
    with opened_store(home, config_file) as store:
        config = store.config
        days = max_age_days if max_age_days is not None else config.session_store_max_age_days
        policy = policy_of(config)
        if days <= 0 and not policy.active:
            fail(
                "pruning is off (session_store_max_age_days is 0 and no retention.* budget "
                "is set); pass --max-age-days or configure retention",
                EXIT_USAGE,
            )
        keys = _prune(store, days, dry_run=dry_run) if days > 0 else []
        plan = store.plan_retention(policy) if policy.active else None
        removed = []
        if plan is not None:
            removed = list(plan.removals) if dry_run else store.apply_retention(plan)
    retention = [
        {"session_key": r.session_key, "reason": r.reason, "archived": r.archived} for r in removed
    ]
    if as_json:
        emit_json(
            {
                "pruned": len(keys),
                "max_age_days": days,
                "dry_run": dry_run,
                "keys": keys,
                "retention": retention,
            }
        )
        return
    entries = plural(len(keys), "entry", "entries")
    if days > 0:
        if dry_run:
            console.print(f"would prune {entries} older than {plural(days, 'day')}:")
            for key in keys:
                console.print(Text(f"  {key}"))
        else:
            console.print(f"pruned {entries} older than {plural(days, 'day')}")
    if plan is not None:
        verb = "would delete" if dry_run else "deleted"
        console.print(f"retention: {verb} {plural(len(removed), 'session')}")
        for item in retention:
            console.print(Text(f"  {item['session_key']} ({item['reason']})"))


class _DryRun(Exception):
    """Raised to roll back a prune that was only counted."""


def _prune(store: SessionStore, days: int, *, dry_run: bool) -> list[str]:
    """The keys `prune_old_entries` drops. A dry run prunes inside a transaction that is
    then rolled back, so it lists exactly what the real one would drop, by the same rule."""
    dropped: list[str] = []
    try:
        with store.atomic():
            before = {entry.session_key for entry in store.list_sessions()}
            store.prune_old_entries(days)
            dropped = sorted(before - {entry.session_key for entry in store.list_sessions()})
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    return dropped


# The tree and row operations of one session (their modules say how they mirror the HTTP API).
session_tree.register(app)
session_rows.register(app)
session_takeover.register(app)


def _plain(*cells: str) -> list[Text]:
    # Keys, names and message text are user text: `[...]` in them is never markup.
    return [Text(cell) for cell in cells]
