"""Serving a platform's API stub on loopback: what every `testing/stubs/<name>.py` shares.

`serve_app` runs an ASGI app under uvicorn on 127.0.0.1 (a free port) in the running event
loop and yields its base URL; `serve_in_thread` runs any such server on an event loop of its
own thread, for callers without a loop (a CLI test, the benchmark's parent process), and
yields what the server yields, with that loop (call the stub through it).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator
    from contextlib import AbstractAsyncContextManager

__all__ = ["serve_app", "serve_in_thread"]

_T = TypeVar("_T")

# A hang guard for a stub that never starts or stops, never a timing assertion.
GUARD_SECONDS = 30


@contextlib.asynccontextmanager
async def serve_app(
    app: Any, *, name: str, on_stop: Callable[[], object] | None = None
) -> AsyncIterator[str]:
    """Serve `app` (the stub `name`) on 127.0.0.1; yields its base URL. `on_stop` runs as the
    server stops (to end long polls in flight)."""
    import uvicorn

    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", access_log=False
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:  # uvicorn offers no event for it
            if task.done():
                task.result()
                raise RuntimeError(f"{name} did not start")
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        if on_stop is not None:
            result = on_stop()
            if asyncio.iscoroutine(result):
                await result
        await task


@contextlib.contextmanager
def serve_in_thread(
    serve: Callable[[], AbstractAsyncContextManager[_T]], *, name: str
) -> Iterator[tuple[_T, asyncio.AbstractEventLoop]]:
    """`serve()` entered on an event loop of its own thread; yields (what it yields, the
    loop), and stops it on exit."""
    started: queue.Queue[tuple[_T] | BaseException] = queue.Queue()
    stop: asyncio.Event | None = None
    loop: asyncio.AbstractEventLoop | None = None

    async def main() -> None:
        nonlocal stop, loop
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        try:
            async with serve() as served:
                started.put((served,))
                await stop.wait()
        except BaseException as exc:
            started.put(exc)
            raise

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    found = started.get(timeout=GUARD_SECONDS)
    if isinstance(found, BaseException):
        raise RuntimeError(f"{name} did not start") from found
    assert loop is not None
    try:
        yield found[0], loop
    finally:
        if stop is not None:
            loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=GUARD_SECONDS)
