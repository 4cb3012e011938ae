"""`sessiongate pairing list|approve CODE`: the DM senders waiting for access, and admitting one.

Under `dm_policy: pairing` a platform adapter answers an unknown DM sender with one code; the
operator approves it here (also while the gateway runs: the store is shared, and the adapter
reads the approval at the sender's next message).
"""

from __future__ import annotations

from typing import Annotated

import typer

from sessiongate.cli._common import ConfigOption, HomeOption, emit_json, fail, opened_store
from sessiongate.store.platform_state import PlatformState

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="DM pairing requests: list them, approve one.")


@app.command("list")
def list_requests(
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Pairing requests: pending (with their code and expiry), expired, approved."""
    with opened_store(home, config_file) as store:
        requests = PlatformState(store).list_pairing()
        now = store.clock.now()
    rows = [
        {
            "platform": r.platform,
            "user_id": r.user_id,
            "user_name": r.user_name,
            "chat_id": r.chat_id,
            "code": r.code,
            "status": "approved"
            if r.approved
            else ("pending" if r.expires_at > now else "expired"),
            "created_at": r.created_at.isoformat(),
            "expires_at": r.expires_at.isoformat(),
        }
        for r in requests
    ]
    if as_json:
        emit_json({"requests": rows})
        return
    if not rows:
        typer.echo("No pairing requests.")
        return
    for row in rows:
        who = row["user_name"] or row["user_id"]
        typer.echo(
            f"{row['platform']:<10} {row['code']}  {row['status']:<8} {who} "
            f"(user {row['user_id']}, expires {row['expires_at']})"
        )


@app.command("approve")
def approve(
    code: Annotated[str, typer.Argument(help="The code the bot sent to the sender.")],
    home: HomeOption = None,
    config_file: ConfigOption = None,
) -> None:
    """Admit the sender holding CODE (pending, not expired) from their next message on."""
    with opened_store(home, config_file) as store:
        approved = PlatformState(store).approve_pairing(code)
    if approved is None:
        fail(f"no pending pairing request with code {code.strip().upper()!r} (expired?)")
    who = approved.user_name or approved.user_id
    typer.echo(f"approved {who} (user {approved.user_id}) on {approved.platform}")
