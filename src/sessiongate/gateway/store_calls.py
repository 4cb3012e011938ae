"""`StoreCalls`: how the gateway's coroutines call the synchronous store (decision 15).

Chosen once, when the runner is composed, by where the database is (`SessionStore.remote`):

- `InlineCalls` (SQLite): a call runs on the event loop. A local database answers a short
  transaction faster than a hop to a thread and back costs, so SQLite keeps its speed.
- `ThreadedCalls` (PostgreSQL): a call runs on one of the store's threads, each on a writer
  connection of its own (`store/postgres/database.py`), so while the server answers the loop
  serves every other lane, request and stream, and lanes overlap their round trips.

Either way the caller awaits, and the same rules hold:

- One coroutine's calls run in the order it awaits them, so one lane's transactions stay
  ordered (and fenced: the fence is inside each call).
- A call once started finishes, and its result is kept. A caller cancelled while it runs (an
  interrupt, a timeout) waits for it and is cancelled at its next await, exactly as if the call
  had run inline: cancellation never splits a store call from the bookkeeping after it.
- What a commit tells the store's change listeners reaches them on the loop (`on_loop`): they
  hold the loop's state (the feed, the scheduler's live runs, the webhook sender's wake-up).
"""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeVar

from sessiongate.errors import StoreUnavailableError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["InlineCalls", "StoreCalls", "ThreadedCalls", "in_thread", "store_calls"]

P = ParamSpec("P")
T = TypeVar("T")
A = TypeVar("A")


class StoreCalls(Protocol):
    async def run(self, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`call(*args, **kwargs)`, without the loop waiting on the network."""
        ...

    def on_loop(self, listener: Callable[[A], None]) -> Callable[[A], None]:
        """`listener`, called on the loop whichever thread calls it (once `start` ran)."""
        ...

    def start(self) -> None:
        """On the loop, before the first call."""
        ...

    def close(self) -> None:
        """After the last call: its threads end, and a later call is refused
        (`StoreUnavailableError`)."""
        ...


class InlineCalls:
    """Every call on the loop: a database in the process."""

    async def run(self, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        return call(*args, **kwargs)

    def on_loop(self, listener: Callable[[A], None]) -> Callable[[A], None]:
        return listener

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass


class ThreadedCalls:
    """Every call on one of `threads` store threads: a database across the network."""

    def __init__(self, threads: int) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="sessiongate-store")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._closed = False

    async def run(self, call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        if self._closed:
            # A request that came in as the gateway stopped: a retry later is safe (503).
            raise StoreUnavailableError("the gateway has stopped")
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, functools.partial(call, *args, **kwargs))
        return await finished(future)

    def on_loop(self, listener: Callable[[A], None]) -> Callable[[A], None]:
        def told(value: A) -> None:
            loop = self._loop
            if loop is None or threading.get_ident() == self._loop_thread or loop.is_closed():
                listener(value)
            else:
                loop.call_soon_threadsafe(listener, value)

        return told

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    def close(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=True)


def store_calls(remote: bool, *, threads: int) -> StoreCalls:
    """The variant for a store whose calls wait on the network (`remote`), or not."""
    return ThreadedCalls(threads) if remote else InlineCalls()


async def in_thread(call: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
    """`call(*args, **kwargs)` on a worker thread whichever the backend (a long read, such as
    a model context's snapshot, would hold the loop even on SQLite). It finishes as a store
    call does, so no read outlives its caller: the store may close right after."""
    loop = asyncio.get_running_loop()
    return await finished(loop.run_in_executor(None, functools.partial(call, *args, **kwargs)))


async def finished(future: asyncio.Future[T]) -> T:
    """`future`'s outcome once it is done, even if the awaiting task is cancelled meanwhile:
    the cancellations then reach the task at its next await, with their messages."""
    cancels: list[asyncio.CancelledError] = []
    while not future.done():
        try:
            await asyncio.wait([future])
        except asyncio.CancelledError as cancel:
            cancels.append(cancel)
    if cancels:
        task = asyncio.current_task()
        assert task is not None
        for _ in cancels:
            task.uncancel()
        for cancelled in cancels:
            task.cancel(cancelled.args[0] if cancelled.args else None)
    return future.result()
