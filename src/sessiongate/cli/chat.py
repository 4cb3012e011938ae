"""`sessiongate chat`: a conversation with the agent in this terminal (the `local` platform).

A thin shell over `sessiongate.adapters.local.LocalAdapter` and the same runner the gateway
uses, so slash commands (`/new`, `/undo`, `/queue`, `/stop`, ...) and busy-lane behaviour work
here too, and the conversation is stored under the same home. `/quit`, `/exit` or end of
input (Ctrl+D) leave once the replies in flight have arrived; SIGTERM leaves through the same
`runner.stop()`, with the turn in flight drained under `agent.restart_drain_timeout` (a second
SIGTERM kills at once). Like `run`, it holds the home's lock: beside a live gateway on the
same home it exits 1 with one line.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import signal
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
    fail,
    load_paths_and_config,
    open_store,
)
from sessiongate.errors import SessiongateError
from sessiongate.gateway import GatewayRunner

if TYPE_CHECKING:
    from collections.abc import Iterator

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
        conversation = asyncio.ensure_future(adapter.run())
        with _stopped_by_sigterm(conversation):
            # Cancelled by SIGTERM: the conversation ends here and the stop below drains.
            await asyncio.wait({conversation})
        if not conversation.cancelled():
            conversation.result()
    finally:
        await runner.stop()


@contextlib.contextmanager
def _stopped_by_sigterm(conversation: asyncio.Future[int]) -> Iterator[None]:
    """While the block runs, a first SIGTERM cancels `conversation` (the handler only does
    that); the default action comes back at once, so a second SIGTERM kills the process."""
    loop = asyncio.get_running_loop()

    def on_sigterm() -> None:
        loop.remove_signal_handler(signal.SIGTERM)
        conversation.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


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
        # Piped input is a script: each line waits for its reply, as a person would.
        wait_for_replies=not sys.stdin.isatty(),
    )
    store = open_store(paths, config)
    if incognito:
        adapter.session_key = store.create_incognito_session(adapter.source).session_key
        err_console.print("[dim]incognito: nothing of this conversation is written to disk[/dim]")
    try:
        asyncio.run(_converse(store, config, paths, adapter))
    except KeyboardInterrupt:
        console.print()
    except SessiongateError as exc:  # another runner holds the home, the store refused
        fail(exc.message)
    finally:
        store.close()
