"""A TCP relay between one instance and its database that can cut the line silently.

`cut()` stops relaying in both directions without closing anything: the instance's sockets
stay open and its statements wait for answers that do not come, as behind a dropped link or
a firewall that discards packets (no reset, no FIN). `heal()` relays what was held back, as
TCP's retransmissions would once the link is back. Unlike `pg_terminate_backend`, neither
side learns of the cut until the server ends the session itself (the others declare the
instance dead and end its writer session) or the link heals.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["CutProxy"]

_CHUNK = 65536


class CutProxy:
    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0
        self.cuts = 0

    async def start(self) -> CutProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def cut(self) -> None:
        self._flowing.clear()
        self.cuts += 1

    def heal(self) -> None:
        self._flowing.set()

    async def aclose(self) -> None:
        self._flowing.set()
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            # A connection opened during a cut waits too (its SYN would be dropped).
            await self._flowing.wait()
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pump(source, sink))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(_CHUNK):
                await self._flowing.wait()
                sink.write(data)
                await sink.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            # What the other side closed is closed here too, once the line flows.
            await self._flowing.wait()
            with contextlib.suppress(OSError, RuntimeError):
                sink.close()
