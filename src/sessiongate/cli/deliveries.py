"""`sessiongate deliveries list|retry`: outbound messages and the dead-letter list.

Every reply and notice is a delivery row (`store/deliveries.py`); `list --failed` shows those
whose last send failed (`failed`: still retried; `dead`: given up after their tries or too old
to send). `retry ID|--all` puts them back to `pending`, due now and their age counted afresh:
the running gateway sends them at its next housekeeping tick, or at its next start
(`POST /v1/deliveries/{id}/retry` sends one at once).
"""

from __future__ import annotations

from typing import Annotated

import typer

from sessiongate.cli._common import (
    EXIT_USAGE,
    ConfigOption,
    HomeOption,
    emit_json,
    fail,
    opened_store,
)
from sessiongate.store.deliveries import UNDELIVERED, DeliveryStore
from sessiongate.store.records import DeliveryStatus

__all__ = ["app"]

app = typer.Typer(no_args_is_help=True, help="Outbound messages: list them, retry the failed ones.")

_MAX_RETRIED = 10_000


@app.command("list")
def list_deliveries(
    failed: Annotated[
        bool, typer.Option("--failed", help="Only the dead-letter list: failed and dead.")
    ] = False,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="At most this many.")] = 100,
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Deliveries, newest first: status, tries, the platform's message id or reason."""
    with opened_store(home, config_file) as store:
        rows = DeliveryStore(store).find(UNDELIVERED if failed else (), limit=limit)
    if as_json:
        emit_json({"deliveries": [r.to_dict() for r in rows]})
        return
    if not rows:
        typer.echo("No failed deliveries." if failed else "No deliveries.")
        return
    for r in rows:
        outcome = r.message_id or r.reason or ""
        where = f"{r.source.platform}:{r.source.chat_id}"
        turn = f"turn {r.turn_id}" if r.turn_id is not None else r.kind
        typer.echo(
            f"{r.id:>6}  {r.status:<7} {r.attempts:>2} tries  {where}  {turn}  "
            f"{r.created_at.isoformat()}  {outcome}"
        )


@app.command("retry")
def retry(
    delivery_id: Annotated[
        int | None, typer.Argument(min=1, help="The delivery's id (from `deliveries list`).")
    ] = None,
    retry_all: Annotated[
        bool, typer.Option("--all", help="Every failed and dead delivery.")
    ] = False,
    home: HomeOption = None,
    config_file: ConfigOption = None,
) -> None:
    """Send a failed or dead delivery again (or all of them with --all): the running gateway
    sends it at its next housekeeping tick, a stopped one at its next start."""
    if (delivery_id is None) == (not retry_all):
        fail("give a delivery id or --all (not both)", EXIT_USAGE)
    with opened_store(home, config_file) as store:
        rows = DeliveryStore(store)
        if retry_all:
            ids = [r.id for r in rows.find(UNDELIVERED, limit=_MAX_RETRIED)]
        else:
            assert delivery_id is not None
            found = rows.get(delivery_id)
            if found is None:
                fail(f"no delivery {delivery_id}")
            if found.status is DeliveryStatus.SENT:
                fail(f"delivery {delivery_id} was sent already")
            ids = [delivery_id]
        reopened = [i for i in ids if rows.reopen(i) is not None]
    typer.echo(f"{len(reopened)} deliveries queued to be sent again")
