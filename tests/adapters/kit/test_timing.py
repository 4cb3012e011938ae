"""Backoff, the per-chat rate limiter and the watchdog, on the fake clock."""

from __future__ import annotations

import asyncio
import random

import pytest

from sessiongate.adapters.kit import Backoff, ChatRateLimiter, ClockSleep, Watchdog
from sessiongate.adapters.kit.watchdog import StalledError


def test_backoff_grows_to_its_cap_with_bounded_jitter():
    backoff = Backoff(base=1, factor=2, cap=10, jitter=0.2, max_attempts=6, rng=random.Random(1))
    delays = backoff.delays()
    assert len(delays) == 6
    assert 0.8 <= delays[0] <= 1.2
    assert 1.6 <= delays[1] <= 2.4
    assert all(d <= 10 for d in delays)
    assert delays[-1] >= 8
    # Jitter: two gateways with different seeds do not retry in lockstep.
    other = Backoff(base=1, factor=2, cap=10, jitter=0.2, max_attempts=6, rng=random.Random(2))
    assert other.delays() != delays


async def test_a_penalty_holds_every_kind_of_call_to_that_chat_only(clock):
    sleep = ClockSleep(clock)
    limiter = ChatRateLimiter(clock=clock, sleep=sleep, min_interval={"edit": 1.0})
    limiter.penalise("a", 2.0)
    assert limiter.ready_in("b", "send") == 0
    async with limiter.slot("a", "send"):
        pass
    assert sleep.waits == [2.0]
    async with limiter.slot("a", "edit"):
        pass
    async with limiter.slot("a", "edit"):
        pass
    assert sleep.waits == [2.0, 1.0]


async def test_the_watchdog_raises_on_a_call_that_never_completes():
    watchdog = Watchdog(stall_seconds=0.05)
    with pytest.raises(StalledError):
        await watchdog.guard(asyncio.Event().wait())
    assert watchdog.stalls == 1
    assert await watchdog.guard(asyncio.sleep(0, result="ok")) == "ok"


def test_failures_back_off_until_degraded():
    watchdog = Watchdog(stall_seconds=1, backoff=Backoff(max_attempts=3, cap=5))
    delays = [watchdog.failed() for _ in range(3)]
    assert watchdog.degraded
    assert all(d <= 5 for d in delays)
    watchdog.beat()
    assert not watchdog.degraded
