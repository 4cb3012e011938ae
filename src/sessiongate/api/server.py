"""Serving the app with uvicorn, with sessiongate's signal rules.

uvicorn's own handlers re-raise the captured signal once the server has stopped, which would
kill the process before the runner drains and the store closes. `GatewayServer` instead only
records the signal and asks the server to exit (a second one forces it), restores the old
handlers afterwards and re-raises nothing, so the caller can finish the shutdown in order:
stop accepting (uvicorn) → `runner.stop()` → `store.close()`.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from typing import TYPE_CHECKING, Any

import uvicorn

if TYPE_CHECKING:
    import socket
    from collections.abc import Callable, Generator
    from types import FrameType

    from fastapi import FastAPI

__all__ = ["GatewayServer", "build_server"]

log = logging.getLogger(__name__)

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class GatewayServer(uvicorn.Server):
    """A uvicorn server that reports its bound address and handles signals as described."""

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        install_signal_handlers: bool = True,
        on_ready: Callable[[str, int], None] | None = None,
    ) -> None:
        super().__init__(config)
        self.install_signal_handlers = install_signal_handlers
        self.on_ready = on_ready
        self.received_signals: list[int] = []
        self.bound: tuple[str, int] | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if not self.install_signal_handlers or threading.current_thread() is not (
            threading.main_thread()
        ):
            yield
            return
        previous = {sig: signal.signal(sig, self._on_signal) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, sig: int, _frame: FrameType | None) -> None:
        # Only record and flag; the serving task does the work.
        self.received_signals.append(sig)
        if self.should_exit:
            self.force_exit = True
        self.should_exit = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.should_exit or not getattr(self, "servers", None):
            return
        bound = self.servers[0].sockets[0].getsockname()
        self.bound = (str(bound[0]), int(bound[1]))
        if self.on_ready is not None:
            self.on_ready(*self.bound)


def build_server(
    app: FastAPI,
    *,
    host: str,
    port: int,
    graceful_timeout: float,
    install_signal_handlers: bool = True,
    on_ready: Callable[[str, int], None] | None = None,
    **uvicorn_options: Any,
) -> GatewayServer:
    """A server for `app` on `host:port` (0 picks a free port; see `GatewayServer.bound`).

    Logging is left to the caller's configuration (`sessiongate.logs`), and uvicorn's access
    log is off: request counts are in `/metrics`.
    """
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=max(1, round(graceful_timeout)),
        **uvicorn_options,
    )
    return GatewayServer(config, install_signal_handlers=install_signal_handlers, on_ready=on_ready)
