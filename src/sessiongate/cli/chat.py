"""`sessiongate chat`: a conversation with the agent in this terminal.

By default a thin shell over `sessiongate.adapters.local.LocalAdapter` and the same runner the
gateway uses (the `local` platform), so slash commands (`/new`, `/undo`, `/queue`, `/stop`,
...) and busy-lane behaviour work here too, and the conversation is stored under the same home.
`/quit`, `/exit` or end of input (Ctrl+D) leave once the replies in flight have arrived;
Ctrl+C during a turn stops it as `/stop` does and says so, and at the prompt (or a second
time for the same turn) leaves as SIGTERM does (`CtrlC`);
SIGTERM leaves through the same `runner.stop()`, with the turn in flight drained under
`agent.restart_drain_timeout` (a second SIGTERM kills at once). Like `run`, it holds the
home's lock: beside a live gateway on the same home it exits 1 with one line, which names
`--url`: with it, chat is a client of a running gateway's HTTP API (`POST /v1/messages`, the
`api` platform, the reply streamed as it is generated: `_chat_remote.py`) and opens no store
of its own.

In a terminal the line editor is `cli/terminal.Terminal` (history in `<home>/chat_history`);
piped input is a script, each line waiting for its reply. Every reply is printed by
`show_reply`.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import signal
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sessiongate.adapters.local import LocalAdapter, StdinLines
from sessiongate.cli._chat_remote import RemoteChat
from sessiongate.cli._common import (
    ConfigOption,
    HomeOption,
    Paths,
    agent_description,
    agent_factory_for,
    console,
    err_console,
    fail,
    load_paths_and_config,
    open_store,
)
from sessiongate.cli.terminal import Terminal
from sessiongate.errors import HomeInUseError, SessiongateError
from sessiongate.gateway.runner import GatewayRunner
from sessiongate.logs import configure_logging

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator

    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.source import SessionSource
    from sessiongate.store.session_store import SessionStore

__all__ = ["REPLY_PREFIX", "CtrlC", "chat", "show_reply"]

PROMPT = "you> "
REPLY_PREFIX = "agent> "
# What only this terminal understands, shown before the gateway's own `/help` list.
CHAT_HELP = "In this chat: /quit (or /exit, Ctrl+D) leaves."
HISTORY_FILE = "chat_history"


def _stdout_write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def show_reply(write: Callable[[str], object], text: str) -> None:
    """Print one reply of the agent (the one place a reply reaches the screen)."""
    write(f"{REPLY_PREFIX}{text}\n")


class _ChatAdapter(LocalAdapter):
    """The local adapter whose replies go through `show_reply`."""

    def __init__(self, *, show: Callable[[str], object], **kwargs: Any) -> None:
        super().__init__(write=show, **kwargs)
        self._show = show

    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> None:
        show_reply(self._show, text)


def _with_chat_help(
    read_line: Callable[[], Awaitable[str | None]], write: Callable[[str], object]
) -> Callable[[], Awaitable[str | None]]:
    """`read_line` that prints `CHAT_HELP` when `/help` is typed (the gateway lists the rest)."""

    async def read() -> str | None:
        line = await read_line()
        if line is not None and line.strip().lower() == "/help":
            write(CHAT_HELP + "\n")
        return line

    return read


async def _converse(
    store: SessionStore,
    config: GatewayConfig,
    paths: Paths,
    adapter: LocalAdapter,
    write: Callable[[str], object],
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
        ctrl_c = CtrlC(
            busy=adapter.busy,
            stop=adapter.stop_turn,
            leave=conversation.cancel,
            line=lambda: adapter.typed,
            write=write,
        )
        with _stopped_by_sigterm(conversation), ctrl_c.installed():
            # Cancelled by SIGTERM or Ctrl+C: the conversation ends here, the stop below drains.
            await asyncio.wait({conversation})
        if not conversation.cancelled():
            conversation.result()
    finally:
        await runner.stop()


async def _converse_remote(remote: RemoteChat, write: Callable[[str], object]) -> None:
    conversation = asyncio.ensure_future(remote.run())
    ctrl_c = CtrlC(
        busy=remote.busy,
        stop=remote.stop_turn,
        leave=conversation.cancel,
        line=lambda: remote.typed,
        write=write,
    )
    with ctrl_c.installed():
        await asyncio.wait({conversation})
    if not conversation.cancelled():
        conversation.result()


class CtrlC:
    """Ctrl+C in the chat. During a turn it stops the turn, as `/stop` does, and says so; at
    the prompt, or a second time before another line was sent, it leaves (as `/quit`, the
    turn in flight drained as on SIGTERM).

    `busy()`: a turn of the conversation is running; `stop()`: send `/stop`; `leave()`: end
    the conversation; `line()`: how many lines the user has sent so far.
    """

    STOPPING = "^C stopping the reply, as /stop does (Ctrl+C again leaves)"
    LEAVING = "^C leaving"

    def __init__(
        self,
        *,
        busy: Callable[[], bool],
        stop: Callable[[], Awaitable[None]],
        leave: Callable[[], object],
        line: Callable[[], int],
        write: Callable[[str], object],
    ) -> None:
        self._busy = busy
        self._stop = stop
        self._leave = leave
        self._line = line
        self._write = write
        self._stopped_at: int | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def pressed(self) -> None:
        if self._busy() and self._stopped_at != self._line():
            self._write(self.STOPPING + "\n")
            task = asyncio.ensure_future(self._stop())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            self._stopped_at = self._line()
            return
        self._write(self.LEAVING + "\n")
        self._leave()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """While the block runs, Ctrl+C (SIGINT) is `pressed`."""
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self.pressed)
        try:
            yield
        finally:
            loop.remove_signal_handler(signal.SIGINT)


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


def _welcome(where: str, agent: str, conversation: str) -> str:
    return (
        f"sessiongate chat · {where} · agent: {agent} · conversation: {conversation}\n"
        "Type a message; /help lists the commands, /quit leaves.\n"
    )


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
    url: Annotated[
        str | None,
        typer.Option(
            help="Talk to the gateway running at this URL (its HTTP API; replies stream as "
            "they are generated) instead of starting one here.",
            show_default=False,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="With --url: the gateway's api.token. Default: api.token of the config.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Talk to the agent in this terminal; /quit or Ctrl+D to leave.

    Ctrl+C during a reply stops it, as /stop does; at the prompt, or a second time, it
    leaves. A reply cut off by a newer message is followed by a notice saying so.
    """
    paths, config = load_paths_and_config(home, config_file)
    # Only what needs attention (an agent failing) reaches the terminal, ids hashed as in `run`.
    configure_logging("WARNING", log_format=config.log.format, redact_ids=config.redact_pii)
    user = getpass.getuser()
    conversation = chat_id or user
    interactive = sys.stdin.isatty()
    terminal = Terminal(PROMPT, history=paths.home / HISTORY_FILE) if interactive else None
    write: Callable[[str], object] = terminal.write if terminal is not None else _stdout_write
    read_line = _with_chat_help(terminal.read_line if terminal else StdinLines(), write)
    try:
        if url is not None:
            if incognito:
                fail("--incognito needs a chat of its own; it cannot be used with --url")
            if terminal is not None:
                write(_welcome(f"gateway {url}", "the gateway's own", conversation))
            secret = token or (config.api.token.get_secret_value() if config.api.token else None)
            source = {"chat_id": conversation, "user_id": user, "user_name": user}
            remote = RemoteChat(url, secret, source, read_line, write, prefix=REPLY_PREFIX)
            asyncio.run(_converse_remote(remote, write))
            return
        _chat_here(paths, config, user, conversation, incognito, read_line, write, terminal)
    except KeyboardInterrupt:
        console.print()
    finally:
        if terminal is not None:
            terminal.close()


def _chat_here(
    paths: Paths,
    config: GatewayConfig,
    user: str,
    conversation: str,
    incognito: bool,
    read_line: Callable[[], Awaitable[str | None]],
    write: Callable[[str], object],
    terminal: Terminal | None,
) -> None:
    """The conversation with a runner of this process, on the home's store."""
    adapter = _ChatAdapter(
        user_id=user,
        chat_id=conversation,
        read_line=read_line,
        show=write,
        # Piped input is a script: each line waits for its reply, as a person would.
        wait_for_replies=terminal is None,
    )
    store = open_store(paths, config)
    if incognito:
        adapter.session_key = store.create_incognito_session(adapter.source).session_key
        err_console.print("[dim]incognito: nothing of this conversation is written to disk[/dim]")
    try:
        if terminal is not None:
            write(_welcome(f"home {paths.home}", agent_description(config), conversation))
        asyncio.run(_converse(store, config, paths, adapter, write))
    except HomeInUseError as exc:
        fail(
            f"{exc.message}; or chat through it with --url (the URL its banner shows)",
            error_code=exc.code,
        )
    except SessiongateError as exc:  # the store refused
        fail(exc.message, error_code=exc.code)
    finally:
        store.close()
