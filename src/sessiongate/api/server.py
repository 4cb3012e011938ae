"""Serving the app with uvicorn, with sessiongate's signal rules.

uvicorn's own handlers re-raise the captured signal once the server has stopped, which would
kill the process before the runner drains and the store closes. `GatewayServer` instead only
records the signal and asks the server to exit (a second one forces it), restores the old
handlers afterwards and re-raises nothing.

Shutdown order: the listeners close (no new connection), the requests whose bodies are still
arriving are answered 503 at once (api/uploads.py: a stalled upload would otherwise hold the
graceful wait to its end), then `on_shutdown` runs — the runner's drain, which answers every
waiting request (its reply, or `queued` for a turn journalled for the restart) — and only then
does uvicorn's graceful wait begin, for responses that are now on their way. Were the drain
to start after that wait, as it once did, uvicorn would cancel the requests still waiting for
their turn (a plain-text 500) and the shutdown would take two drain timeouts. A second signal
cuts the drain short.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import threading
from typing import TYPE_CHECKING, Any

import uvicorn

from sessiongate.api.http_protocol import BoundedHttpToolsProtocol

if TYPE_CHECKING:
    import socket
    from collections.abc import Awaitable, Callable, Generator
    from types import FrameType

    from fastapi import FastAPI

    from sessiongate.api.uploads import UploadGate

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
        on_shutdown: Callable[[], Awaitable[None]] | None = None,
        uploads: UploadGate | None = None,
        freeze_heap: bool = False,
    ) -> None:
        super().__init__(config)
        self.install_signal_handlers = install_signal_handlers
        self.freeze_heap = freeze_heap
        self.on_ready = on_ready
        self.on_shutdown = on_shutdown
        self.uploads = uploads
        self.received_signals: list[int] = []
        self.bound: tuple[str, int] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._forced = asyncio.Event()

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
            if self._loop is not None:
                # Wakes a drain in progress (`shutdown`); thread-safe, so fine in a handler.
                self._loop.call_soon_threadsafe(self._forced.set)
        self.should_exit = True

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)
        if self.should_exit or not getattr(self, "servers", None):
            return
        bound = self.servers[0].sockets[0].getsockname()
        self.bound = (str(bound[0]), int(bound[1]))
        if self.freeze_heap:
            gc.collect()
            gc.freeze()
        if self.on_ready is not None:
            self.on_ready(*self.bound)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            # Stop accepting first (uvicorn closes them again, harmlessly), drop the uploads
            # still arriving, then drain while the requests still wait (see the module
            # docstring).
            for server in getattr(self, "servers", ()):
                server.close()
            if self.uploads is not None:
                self.uploads.close()
            if self.on_shutdown is not None:
                log.info("draining before shutdown")
                await self._drain(self.on_shutdown)
        finally:
            await super().shutdown(sockets=sockets)

    async def _drain(self, on_shutdown: Callable[[], Awaitable[None]]) -> None:
        draining = asyncio.ensure_future(on_shutdown())
        forced = asyncio.ensure_future(self._forced.wait())
        try:
            await asyncio.wait({draining, forced}, return_when=asyncio.FIRST_COMPLETED)
            if not draining.done():
                log.warning("second signal: the drain is cut short")
                draining.cancel()
                await asyncio.wait({draining})
        finally:
            forced.cancel()
        # The hook's own failure propagates; its cancellation by a second signal does not.
        if not draining.cancelled():
            draining.result()


def build_server(
    app: FastAPI,
    *,
    host: str,
    port: int,
    graceful_timeout: float,
    install_signal_handlers: bool = True,
    on_ready: Callable[[str, int], None] | None = None,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
    freeze_heap: bool = False,
    **uvicorn_options: Any,
) -> GatewayServer:
    """A server for `app` on `host:port` (0 picks a free port; see `GatewayServer.bound`).

    `on_shutdown` (the runner's stop) runs when the server stops, after the listeners close and
    the uploads still arriving are dropped (the app's `state.uploads`, set by `create_app`),
    and before uvicorn waits `graceful_timeout` for the open requests.

    The protocol is httptools with h11's bounds (`api/http_protocol.py`), named rather than
    left to uvicorn's "auto", which takes whichever parser happens to be installed: the two
    answer malformed requests differently, and the tests run the one that serves.

    Logging is left to the caller's configuration (`sessiongate.logs`), and uvicorn's access
    log is off: request counts are in `/metrics`. `freeze_heap` is for a process the server
    owns (see the module docstring); an embedding process keeps its garbage collector as is.
    """
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=max(1, round(graceful_timeout)),
        **{"http": BoundedHttpToolsProtocol, **uvicorn_options},
    )
    return GatewayServer(
        config,
        install_signal_handlers=install_signal_handlers,
        on_ready=on_ready,
        on_shutdown=on_shutdown,
        uploads=getattr(app.state, "uploads", None),
        freeze_heap=freeze_heap,
    )
