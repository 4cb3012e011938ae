"""`sessiongate chat`: a conversation with the agent in this terminal (the `local` platform).

A thin shell over `sessiongate.adapters.local.LocalAdapter` and the same runner the gateway
uses, so slash commands (`/new`, `/undo`, `/queue`, `/stop`, ...) and busy-lane behaviour work
here too, and the conversation is stored under the same home. `/quit`, `/exit` or end of
input (Ctrl+D) leave once the replies in flight have arrived.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from sessiongate.adapters.local import LocalAdapter
from sessiongate.cli._common import (
    ConfigOption,
    HomeOption,
    Paths,
    agent_factory_for,
    console,
    err_console,
    load_paths_and_config,
    open_store,
)
from sessiongate.gateway import GatewayRunner

if TYPE_CHECKING:
    from sessiongate.core.config import GatewayConfig
    from sessiongate.store.session_store import SessionStore

__all__ = ["chat"]


async def _converse(
    store: SessionStore, config: GatewayConfig, paths: Paths, adapter: LocalAdapter
) -> None:
    runner = GatewayRunner(
        store,
        config,
        home=paths.home,
        adapters=[adapter],
        agent_factory=agent_factory_for(config),
    )
    await runner.start()
    try:
        await adapter.run()
    finally:
        await runner.stop()


def chat(
    home: HomeOption = None,
    config_file: ConfigOption = None,
    chat_id: Annotated[
        str | None,
        typer.Option(help="Conversation name; the same name continues it. Default: your user."),
    ] = None,
    incognito: Annotated[
        bool,
        typer.Option(help="Keep this conversation in memory only; it ends when you leave."),
    ] = False,
) -> None:
    """Talk to the agent in this terminal; /quit or Ctrl+D to leave."""
    paths, config = load_paths_and_config(home, config_file)
    user = getpass.getuser()
    adapter = LocalAdapter(
        user_id=user,
        chat_id=chat_id or user,
        prompt="you> " if sys.stdin.isatty() else None,
    )
    store = open_store(paths, config)
    if incognito:
        adapter.session_key = store.create_incognito_session(adapter.source).session_key
        err_console.print("[dim]incognito: nothing of this conversation is written to disk[/dim]")
    try:
        asyncio.run(_converse(store, config, paths, adapter))
    except KeyboardInterrupt:
        console.print()
    finally:
        store.close()
