"""How the gateway's coroutines call the store (`gateway/store_calls.py`): on the loop for
SQLite, on the store's threads for PostgreSQL, and in both a call once started finishes."""

from __future__ import annotations

import asyncio
import threading

import pytest

from sessiongate.errors import StoreUnavailableError
from sessiongate.gateway.store_calls import InlineCalls, ThreadedCalls, store_calls

GUARD_SECONDS = 30


@pytest.fixture
async def threaded():
    calls = ThreadedCalls(2)
    calls.start()
    yield calls
    calls.close()


def test_the_variant_follows_where_the_database_is():
    assert isinstance(store_calls(False, threads=4), InlineCalls)
    remote = store_calls(True, threads=4)
    assert isinstance(remote, ThreadedCalls)
    remote.close()


async def test_inline_calls_run_on_the_loop_and_threaded_ones_off_it(threaded):
    loop_thread = threading.get_ident()
    assert await InlineCalls().run(threading.get_ident) == loop_thread
    assert await threaded.run(threading.get_ident) != loop_thread
    assert await threaded.run(lambda a, *, b: a + b, 1, b=2) == 3


async def test_a_calls_error_reaches_its_caller(threaded):
    def fails() -> None:
        raise LookupError("no such row")

    with pytest.raises(LookupError, match="no such row"):
        await threaded.run(fails)


async def test_a_cancelled_caller_keeps_its_calls_result_and_is_cancelled_at_its_next_await(
    threaded,
):
    started, go = threading.Event(), threading.Event()
    seen: list[object] = []

    def call() -> str:
        started.set()
        assert go.wait(GUARD_SECONDS)
        return "committed"

    async def caller() -> None:
        seen.append(await threaded.run(call))  # the bookkeeping after the call runs
        await asyncio.sleep(0)  # and the cancellation arrives here
        seen.append("not reached")

    task = asyncio.create_task(caller())
    assert await asyncio.to_thread(started.wait, GUARD_SECONDS)
    task.cancel("interrupted")
    await asyncio.sleep(0)
    assert not task.done()  # still waiting for the call, which cannot be stopped
    go.set()
    with pytest.raises(asyncio.CancelledError, match="interrupted"):
        await task
    assert seen == ["committed"]


async def test_a_timeout_around_a_call_still_times_out(threaded):
    started, go = threading.Event(), threading.Event()

    def call() -> None:
        started.set()
        assert go.wait(GUARD_SECONDS)

    async def bounded() -> None:
        async with asyncio.timeout(0):  # expires at the first await: inside the call
            await threaded.run(call)
            await asyncio.sleep(GUARD_SECONDS)

    task = asyncio.create_task(bounded())
    assert await asyncio.to_thread(started.wait, GUARD_SECONDS)
    go.set()
    with pytest.raises(TimeoutError):
        await task


async def test_a_listener_told_on_a_store_thread_runs_on_the_loop(threaded):
    loop_thread = threading.get_ident()
    told: list[tuple[str, int]] = []
    listener = threaded.on_loop(lambda value: told.append((value, threading.get_ident())))
    await asyncio.to_thread(listener, "from a thread")
    listener("on the loop")
    await asyncio.sleep(0)
    assert told == [("from a thread", loop_thread), ("on the loop", loop_thread)]


async def test_a_call_after_the_close_is_refused_as_unavailable():
    calls = ThreadedCalls(1)
    calls.start()
    calls.close()
    with pytest.raises(StoreUnavailableError):
        await calls.run(threading.get_ident)
