"""`sessiongate approvals list|approve ID|deny ID`: tool calls waiting for a person.

The operator decides here as on `POST /v1/approvals/{id}` (also while the gateway runs: the
store is shared, and the waiting turn reads the decision within a second). A decision is one
conditional update, so one made meanwhile in the chat or over HTTP wins and this one is
refused with what happened.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from sessiongate.cli._common import ConfigOption, HomeOption, emit_json, fail, opened_store
from sessiongate.store.approvals import PENDING, ApprovalBook
from sessiongate.store.records import ApprovalRow, from_us

__all__ = ["app"]

app = typer.Typer(
    no_args_is_help=True, help="Tool calls waiting for approval: list them, decide one."
)

_STATUSES = ("pending", "approved", "denied", "expired", "cancelled")


def _row(row: ApprovalRow) -> dict[str, object]:
    return {
        "id": row.id,
        "status": row.status,
        "tool": row.tool,
        "arguments": row.arguments,
        "arguments_sha256": row.arguments_sha256,
        "session_key": row.session_key,
        "turn_id": row.turn_id,
        "approvers": json.loads(row.approvers),
        "requested_at": from_us(row.requested_at).isoformat(),
        "expires_at": from_us(row.expires_at).isoformat(),
        "decided_by": row.decided_by,
    }


@app.command("list")
def list_approvals(
    status: Annotated[
        str | None, typer.Option("--status", help="Only this state: " + ", ".join(_STATUSES))
    ] = None,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Tool approvals, newest first: the call as shown, its state and who may decide."""
    if status is not None and status not in _STATUSES:
        fail(f"unknown status {status!r}; one of: {', '.join(_STATUSES)}", 2)
    with opened_store(home, config_file) as store:
        book = ApprovalBook(store)
        book.expire_due()
        rows = [_row(row) for row in book.listed(status=status, limit=1000)]
    if as_json:
        emit_json({"approvals": rows})
        return
    if not rows:
        typer.echo("No approvals.")
        return
    for row in rows:
        typer.echo(
            f"{row['id']}  {row['status']:<9} {row['tool']}({row['arguments']}) "
            f"in {row['session_key']} (expires {row['expires_at']})"
        )


def _decide(approval_id: str, *, approve: bool, home: HomeOption, config: ConfigOption) -> None:
    with opened_store(home, config) as store:
        book = ApprovalBook(store)
        book.expire_due()
        row = book.get(approval_id)
        if row is None:
            fail(f"no approval {approval_id!r}")
        decided = None
        if row.status == PENDING:
            decided = book.decide(
                approval_id, approve=approve, by="operator", sha256=row.arguments_sha256
            )
        if decided is None:
            current = book.get(approval_id) or row
            fail(f"approval {approval_id} is already {current.status}")
    typer.echo(f"{decided.status} {decided.tool}({decided.arguments}) [{decided.id}]")


@app.command("approve")
def approve(
    approval_id: Annotated[str, typer.Argument(help="The id the chat's prompt showed.")],
    home: HomeOption = None,
    config_file: ConfigOption = None,
) -> None:
    """Let the waiting tool call ID run."""
    _decide(approval_id, approve=True, home=home, config=config_file)


@app.command("deny")
def deny(
    approval_id: Annotated[str, typer.Argument(help="The id the chat's prompt showed.")],
    home: HomeOption = None,
    config_file: ConfigOption = None,
) -> None:
    """Refuse the waiting tool call ID (the model reads a denied result)."""
    _decide(approval_id, approve=False, home=home, config=config_file)
