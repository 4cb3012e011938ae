"""Two runners (two homes) on one PostgreSQL schema with the same jobs: each slot runs on one
instance only (the unique claim is the fence), and a claim left by an instance that died is
taken up by the other once it is stale."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
from gateway_support import HANG_GUARD_SECONDS, Hub

from sessiongate.store.jobs import JobStore

if TYPE_CHECKING:
    from pathlib import Path

HALF_HOUR = 30 * 60
JOB = {"id": "digest", "every": "30m", "deliver_to": "telegram:chat", "prompt": "digest"}


@pytest.fixture
def make_gateway(make_gateway):
    """A started runner whose scheduler loop has made its first tick: from then on it sleeps
    until the next slot by the real clock, so only the test's own `tick()` calls claim the
    slots the fake clock makes due."""

    async def make(**kwargs: Any):
        gateway = await make_gateway(**kwargs)
        if kwargs.get("start", True):
            await until(lambda: gateway.runner.jobs.statistics().ticks > 0, "the first tick")
        return gateway

    return make


async def until(check, what: str) -> None:
    async with asyncio.timeout(HANG_GUARD_SECONDS):
        while not check():  # noqa: ASYNC110  # the state is rows in the database
            await asyncio.sleep(0.01)
    assert check(), what


def shared(url: str) -> dict[str, Any]:
    return {
        "store": {"url": url, "sweep_seconds": 0.05, "lane_idle_seconds": 0},
        "mirror_sessions_json": False,
        "jobs": [JOB],
    }


async def test_two_instances_run_each_slot_once(pg_schema, make_gateway, tmp_path: Path, clock):
    hub = Hub()
    a = await make_gateway(home=tmp_path / "a", hub=hub, **shared(pg_schema.url))
    b = await make_gateway(home=tmp_path / "b", hub=hub, **shared(pg_schema.url))
    for slot in range(1, 4):
        clock.advance(HALF_HOUR)
        ran_a, ran_b = await asyncio.gather(a.runner.jobs.tick(), b.runner.jobs.tick())
        assert len(ran_a) + len(ran_b) == 1

        def sent(n: int = slot) -> bool:
            return len(a.adapter.sent) + len(b.adapter.sent) == n

        await until(sent, f"slot {slot} delivered once")
    history = JobStore(a.store).history("digest")
    assert len(history) == 3
    assert len({r.slot_at for r in history}) == 3
    assert len([r for r in hub.requests if r.messages[-1]["content"] == "digest"]) == 3


async def test_a_dead_instances_claim_is_taken_up_once_it_is_stale(
    pg_schema, make_gateway, tmp_path: Path, clock
):
    hub = Hub()
    b = await make_gateway(home=tmp_path / "b", hub=hub, **shared(pg_schema.url))
    clock.advance(HALF_HOUR)
    # Instance "a" claimed the slot and died before handing it off.
    [run] = JobStore(b.store).claim_due("digest", owner="jobs-dead")
    assert await b.runner.jobs.tick() == []  # a live instance may be handing it off
    clock.advance(150)
    [resumed] = await b.runner.jobs.tick()
    assert (resumed.run_id, resumed.state) == (run.run_id, "accepted")
    await until(lambda: len(b.adapter.sent) == 1, "the resumed run is delivered")
    assert await b.runner.jobs.tick() == []
