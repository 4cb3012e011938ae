"""`sessiongate run`: the gateway (runner + HTTP API) until SIGTERM or Ctrl+C.

Start order: configuration → bind check → platform adapters built (a missing SDK extra exits 1
naming it) → store → runner (which takes the home's lock: a second `run` or a `chat` on a live
home exits 1 with one line) → the platforms connect (a refused token exits 1 with its message)
→ server. Stop order (one signal): the server stops accepting, `runner.stop()` drains or
journals the running turns and so answers the requests waiting for them, the server sends
those responses, then the store closes; one drain, under `agent.restart_drain_timeout`. A
second signal cuts the drain short.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from sessiongate.api.app import create_app
from sessiongate.api.server import build_server
from sessiongate.cli import systemd
from sessiongate.cli._agent_choice import agents_line
from sessiongate.cli._common import (
    EXIT_FAILURE,
    EXIT_USAGE,
    ConfigOption,
    HomeOption,
    Paths,
    err_console,
    fail,
    load_paths_and_config,
    open_store,
)
from sessiongate.cli.preflight import PreflightError, Prepared, preflight
from sessiongate.config import default_config_path
from sessiongate.errors import SessiongateError
from sessiongate.gateway import tracing
from sessiongate.gateway.leadership import Leadership
from sessiongate.gateway.runner import GatewayRunner
from sessiongate.logs import configure_logging

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sessiongate.core.config import GatewayConfig
    from sessiongate.store.session_store import SessionStore

__all__ = ["bind_problem", "run", "usage_banner"]

log = logging.getLogger(__name__)

TOKEN_ENV = "SESSIONGATE_API__TOKEN"


def _url(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def _token_origin(config: GatewayConfig, paths: Paths) -> str | None:
    """Where `api.token` came from, for the banner (never the token itself): the environment
    variable, else the config file; None without a token."""
    if config.api.token is None:
        return None
    if os.environ.get(TOKEN_ENV, "").strip():
        return TOKEN_ENV
    return str(paths.config_file or default_config_path(home=paths.home))


def usage_banner(
    host: str,
    port: int,
    config: GatewayConfig,
    paths: Paths,
    *,
    platforms: Sequence[str] = (),
) -> str:
    """What `run` prints once it listens: where, with which agent and platforms, and how to
    talk to it. With a token it says where the token came from and never prints it."""
    url = _url(host, port)
    origin = _token_origin(config, paths)
    auth = chat_token = ""
    token_lines: list[str] = []
    if origin == TOKEN_ENV:
        auth = f' \\\n    -H "Authorization: Bearer ${TOKEN_ENV}"'
        chat_token = f' --token "${TOKEN_ENV}"'
        token_lines = [f"Token: api.token from ${TOKEN_ENV} (not shown)"]
    elif origin is not None:
        auth = ' \\\n    -H "Authorization: Bearer $TOKEN"'
        chat_token = ' --token "$TOKEN"'
        token_lines = [f"Token: api.token in {origin} (not shown); below, $TOKEN stands for it"]
    connected = ", ".join(platforms) if platforms else "none (only the HTTP API and the dashboard)"
    return "\n".join(
        [
            f"sessiongate is listening on {url} (home: {paths.home})",
            agents_line(config, os.environ),
            f"Platforms: {connected}",
            f"Dashboard: {url}/ui/",
            *token_lines,
            "",
            "Send a message and get the agent's reply:",
            f"  curl -s {url}/v1/messages -H 'Content-Type: application/json'{auth} \\",
            '    -d \'{"chat_id": "me", "text": "hello"}\'',
            "",
            f"Chat in a terminal:  sessiongate chat --url {url}{chat_token}",
            f"  (in a checkout:    make chat ARGS='--url {url}{chat_token}')",
            f"List sessions:  curl -s {url}/v1/sessions{' -H ...' if auth else ''}",
            f"API reference:  {url}/docs  (OpenAPI at {url}/openapi.json)",
            "Stop: Ctrl+C or SIGTERM (drains running turns first).",
        ]
    )


def bind_problem(host: str, port: int) -> str:
    """Why `host:port` cannot be listened on, in words, with what to do about it."""
    where = f"{_url(host, port).removeprefix('http://')}"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return f"{host!r} is not an address of this machine ({exc.strerror or exc})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    f"{where} is already in use (another gateway or program listens there); "
                    "choose another port with --port N (or api.port), or --port 0 for any free one"
                )
            if exc.errno == errno.EACCES:
                return (
                    f"{where} needs privileges this process lacks (ports below 1024); "
                    "choose another port with --port N"
                )
            return f"{where}: {exc.strerror or exc}"
    return f"{where} refused the listener (see the log line above)"


async def _serve(
    paths: Paths,
    config: GatewayConfig,
    store: SessionStore,
    host: str,
    port: int,
    prepared: Prepared,
) -> int:
    adapters = prepared.adapters
    runner = GatewayRunner(
        store,
        config,
        home=paths.home,
        agent_factory=prepared.agent_factory,
        adapters=adapters,
    )
    # A long poll or a socket runs on the one instance leading it among those sharing the
    # database, under the leases of the runner's instance presence (none on SQLite: this
    # instance simply leads).
    leadership = Leadership(runner.presence.ownership)
    for adapter in adapters:
        lead_with = getattr(adapter, "lead_with", None)
        if lead_with is not None:
            lead_with(leadership)
    try:
        app = create_app(runner, store, config, leadership=leadership)
        app.state.hooks = {str(a.platform): a for a in adapters if hasattr(a, "receive_webhook")}
        # The platforms connect here: a refused token stops the start with its message.
        await runner.start()

        def announce(bound_host: str, bound_port: int) -> None:
            # Plain text, never wrapped: the curl line must stay copyable.
            banner = usage_banner(
                bound_host,
                bound_port,
                config,
                paths,
                platforms=[str(a.platform) for a in adapters],
            )
            sys.stdout.write(banner + "\n")
            sys.stdout.flush()
            systemd.notify("READY=1", f"STATUS=serving on {_url(bound_host, bound_port)}")

        async def shutdown() -> None:
            systemd.notify("STOPPING=1", "STATUS=draining running turns")
            await runner.stop()

        server = build_server(
            app,
            host=host,
            port=port,
            graceful_timeout=config.agent.restart_drain_timeout,
            on_ready=announce,
            # The drain runs while the requests still wait, so each gets its answer.
            on_shutdown=shutdown,
            freeze_heap=True,
        )
        try:
            await server.serve()
        except SystemExit:
            # uvicorn exits this way when it cannot bind; its log line says why.
            err_console.print(
                f"error: could not listen on {_url(host, port)}: {bind_problem(host, port)}",
                markup=False,
                soft_wrap=True,
            )
            return EXIT_FAILURE
        if server.received_signals:
            log.info("stopping on a signal", extra={"signals": server.received_signals})
        return 0
    finally:
        await runner.stop()  # a no-op after the server's shutdown ran it


def run(
    home: HomeOption = None,
    host: Annotated[
        str | None,
        typer.Option(
            help="Address to listen on. Default: api.host (127.0.0.1).", show_default=False
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="Port; 0 picks a free one. Default: api.port (8787).",
            show_default=False,
        ),
    ] = None,
    config_file: ConfigOption = None,
    log_level: Annotated[
        str,
        typer.Option(help="debug, info, warning or error (on stderr, in the log.format)."),
    ] = "info",
) -> None:
    """Run the gateway: the HTTP API and the agent runner, until SIGTERM or Ctrl+C.

    Without api.token the server listens only on a loopback address. Once it listens it
    prints its URL, the dashboard's (/ui/, where / also leads), the agent, the connected
    platforms and how to talk to it; with api.token it says where the token came from
    (never the token). A port in use is named, with how to choose another.
    """
    paths, config = load_paths_and_config(home, config_file)
    bind_host = host if host is not None else config.api.host
    bind_port = port if port is not None else config.api.port
    level = log_level.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        fail(f"unknown log level {log_level!r}", EXIT_USAGE)
    configure_logging(level, log_format=config.log.format, redact_ids=config.redact_pii)
    try:
        # The checks `doctor` runs too: the address, the platforms' SDKs, the agents.
        prepared = preflight(config, host=bind_host)
    except PreflightError as exc:
        fail(exc.message, exc.exit_code)
    try:
        tracing.configure(config)
    except SessiongateError as exc:
        fail(exc.message)
    store = open_store(paths, config)
    try:
        code = asyncio.run(_serve(paths, config, store, bind_host, bind_port, prepared))
    except SessiongateError as exc:  # another runner holds the home, the store refused
        fail(exc.message, error_code=exc.code)
    finally:
        store.close()
        tracing.shutdown()  # the spans still buffered are sent
    raise typer.Exit(code)
