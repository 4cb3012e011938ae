from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
from gateway_support import HANG_GUARD_SECONDS, settle

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.agents import Agent, EchoAgent
from sessiongate.core.platform import Platform
from sessiongate.gateway.agent_cache import AgentCache
from sessiongate.gateway.delivery import REDELIVERY_BACKOFF_MAX_SECONDS, REDELIVERY_GRACE_SECONDS
from sessiongate.gateway.housekeeping import (
    JOURNAL_RETENTION_SECONDS,
    PRUNE_INTERVAL_SECONDS,
    HousekeepingWatcher,
)
from sessiongate.gateway.memory import MemoryProbe
from sessiongate.store.lanes import TurnState

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from sessiongate.core.clock import FakeClock

DAY = 86400


class World:
    """A real store under tmp_path, a cache over a fake /proc, and the watcher over both."""

    def __init__(self, tmp_path: Path, clock: FakeClock, **config: Any) -> None:
        self.clock = clock
        self.config = GatewayConfig(**config)
        self.store = SessionStore(tmp_path / "sessions", self.config, clock=clock)
        self.proc = tmp_path / "machine"
        self.set_rss_mb(10)
        self.committed: list[str] = []
        self.committed_event = asyncio.Event()
        self.cache = AgentCache(
            self.config.agent.agent_cache,
            clock=clock,
            memory=MemoryProbe(self.proc),
            on_evict=self.commit,
        )
        self.watcher = HousekeepingWatcher(
            store=self.store, cache=self.cache, config=self.config, clock=clock
        )

    async def commit(self, key: str, agent: Agent) -> None:
        self.committed.append(key)
        self.committed_event.set()

    def set_rss_mb(self, megabytes: int) -> None:
        status = self.proc / "proc/self/status"
        status.parent.mkdir(parents=True, exist_ok=True)
        status.write_text(f"RssAnon:\t{megabytes * 1024} kB\n")

    def open_session(self, chat_id: str) -> tuple[str, str]:
        entry = self.store.get_or_create_session(
            SessionSource(platform=Platform.TELEGRAM, chat_id=chat_id)
        )
        self.cache.put(entry.session_key, EchoAgent())
        return entry.session_key, entry.session_id


@pytest.fixture
def make(tmp_path: Path, clock: FakeClock) -> Iterator[Callable[..., World]]:
    worlds: list[World] = []

    def make(**config: Any) -> World:
        world = World(tmp_path, clock, **config)
        worlds.append(world)
        return world

    yield make
    for world in worlds:
        world.store.close()


async def test_tick_sweeps_idle_agents_without_ending_their_transcripts(make, clock) -> None:
    w = make(agent={"agent_cache": {"idle_ttl_secs": 600}})
    key_a, id_a = w.open_session("a")
    key_b, _ = w.open_session("b")
    clock.advance(300)
    w.cache.get(key_b)
    clock.advance(300)
    report = await w.watcher.tick()
    assert report.idle_evicted == (key_a,)
    assert report.released == (key_a,)
    assert w.committed == [key_a]
    assert key_b in w.cache
    # Eviction released the agent only: the session goes on.
    info = w.store.session_info(id_a)
    assert info is not None
    assert info["ended_at"] is None
    assert w.store.get_session(key_a) is not None


async def test_tick_sheds_agents_under_memory_pressure(make) -> None:
    w = make(
        agent={
            "agent_cache": {"memory_high_mb": 50, "protect_recent": 1, "max_evictions_per_pass": 4}
        }
    )
    keys = [w.open_session(str(n))[0] for n in range(3)]
    w.set_rss_mb(80)
    report = await w.watcher.tick()
    assert report.pressure_evicted == tuple(keys[:2])
    assert report.idle_evicted == ()
    assert w.committed == keys[:2]


async def test_prune_runs_at_most_once_an_hour(make, clock) -> None:
    w = make(session_store_max_age_days=1)
    old_key, old_id = w.open_session("old")
    clock.advance(2 * DAY)
    assert (await w.watcher.tick()).pruned == 1
    assert w.store.get_session(old_key) is None
    # Pruning drops the routing entry; the canonical session row stays.
    assert w.store.session_info(old_id) is not None

    young_key, _ = w.open_session("young")
    clock.advance(DAY - 1800)  # over an hour: this tick prunes, but "young" is too young
    assert (await w.watcher.tick()).pruned == 0
    clock.advance(1801)  # "young" is now over a day old, but the last prune was 30 min ago
    assert (await w.watcher.tick()).pruned is None
    assert w.store.get_session(young_key) is not None
    clock.advance(PRUNE_INTERVAL_SECONDS)
    assert (await w.watcher.tick()).pruned == 1
    assert w.store.get_session(young_key) is None


async def test_retention_deletes_old_sessions_hourly_and_logs_each(make, clock, caplog) -> None:
    w = make(retention={"max_age_days": 10})
    old_key, old_id = w.open_session("old")
    w.store.patch_session(old_key, pinned=False)
    pinned_key, _ = w.open_session("pinned")
    w.store.patch_session(pinned_key, pinned=True)
    clock.advance(11 * DAY)
    young_key, _ = w.open_session("young")
    caplog.set_level("INFO", logger="sessiongate.store.retention")
    report = await w.watcher.tick()
    assert report.retention_removed == (old_key,)
    # Unlike the routing prune, retention deletes the transcript too.
    assert w.store.session_info(old_id) is None
    assert w.store.get_session(pinned_key) is not None
    assert w.store.get_session(young_key) is not None
    assert any(
        old_key in r.getMessage() and "max_age_days" in r.getMessage() for r in caplog.records
    )
    assert (await w.watcher.tick()).retention_removed is None  # not due again for an hour


async def test_prune_disabled_by_zero_max_age_keeps_old_entries(make, clock) -> None:
    w = make(session_store_max_age_days=0)
    key, _ = w.open_session("a")
    clock.advance(400 * DAY)
    assert (await w.watcher.tick()).pruned == 0
    assert w.store.get_session(key) is not None


async def test_run_returns_at_once_when_stopped(make) -> None:
    w = make()
    stop = asyncio.Event()
    stop.set()
    await w.watcher.run(stop)
    assert w.watcher.ticks == 0


async def test_run_ticks_at_the_deadline_and_stops_on_the_event(make, clock) -> None:
    w = make(housekeeping_interval_seconds=300, agent={"agent_cache": {"idle_ttl_secs": 60}})
    key, _ = w.open_session("a")
    clock.advance(300)
    stop = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        group.create_task(w.watcher.run(stop))
        async with asyncio.timeout(30):
            await w.committed_event.wait()
        stop.set()
    assert w.watcher.ticks == 1
    assert w.committed == [key]
    # The next deadline is one interval after the one just served.
    assert w.watcher.next_deadline == clock.monotonic() + 300


async def test_run_survives_a_failing_tick(make, clock) -> None:
    w = make(
        housekeeping_interval_seconds=300,
        session_store_max_age_days=1,
        agent={"agent_cache": {"idle_ttl_secs": 60}},
    )
    w.open_session("a")
    w.store.close()  # the prune after the sweep will fail
    clock.advance(300)
    stop = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        task = group.create_task(w.watcher.run(stop))
        async with asyncio.timeout(30):
            await w.committed_event.wait()
        # The tick ran on to its failing prune before the watcher waited again.
        assert not task.done()
        stop.set()
    assert w.watcher.failures == 1


async def test_the_runners_prune_forgets_old_dedup_records_and_finished_turns(
    make_gateway, clock
) -> None:
    assert JOURNAL_RETENTION_SECONDS == 7 * DAY
    gw = await make_gateway()
    old = await gw.adapter.receive("hello", message_id="m1")
    assert (await gw.runner.housekeeping.tick()).journal_pruned == (0, 0)
    clock.advance(JOURNAL_RETENTION_SECONDS - 60)
    recent = await gw.adapter.receive("still here", message_id="m2")
    clock.advance(120)  # `old` is now past the window; `recent` is two minutes old
    report = await gw.runner.housekeeping.tick()
    assert report.journal_pruned == (1, 1)
    assert gw.lanes.get_turn(old.turn_id) is None
    assert gw.lanes.get_turn(recent.turn_id) is not None
    assert (await gw.adapter.receive("still here", message_id="m2")).status == "duplicate"
    # The transcript is never pruned with the journal.
    assert [m["content"] for m in gw.store.load_transcript(old.session_id)][:2] == [
        "hello",
        "re: hello",
    ]
    # Past the window a redelivered id is a new message again: the documented trade-off.
    assert (await gw.adapter.receive("hello", message_id="m1")).status == "replied"


async def test_the_journal_prune_runs_with_the_hourly_prune_only(make_gateway, clock) -> None:
    gw = await make_gateway()
    await gw.adapter.receive("hello", message_id="m1")
    assert (await gw.runner.housekeeping.tick()).journal_pruned == (0, 0)
    clock.advance(PRUNE_INTERVAL_SECONDS - 1)
    assert (await gw.runner.housekeeping.tick()).journal_pruned is None
    clock.advance(JOURNAL_RETENTION_SECONDS)
    assert (await gw.runner.housekeeping.tick()).journal_pruned == (1, 1)


# ------------------------------------------------------------------ redelivery


async def test_a_failed_delivery_is_sent_again_after_the_grace_period(make_gateway, clock) -> None:
    gw = await make_gateway()
    gw.adapter.fail_sends = 1
    receipt = await gw.adapter.receive("hello")
    assert gw.lanes.get_turn(receipt.turn_id).state is TurnState.REPLIED
    # Within the grace period the reply is left alone (its lane may still be sending it).
    assert (await gw.runner.housekeeping.tick()).redelivered == 0
    assert gw.adapter.send_attempts == 1
    clock.advance(REDELIVERY_GRACE_SECONDS)
    report = await gw.runner.housekeeping.tick()
    assert report.redelivered == 1
    assert gw.adapter.texts() == ["re: hello"]
    assert gw.adapter.sent[0].turn_id == receipt.turn_id
    assert gw.lanes.get_turn(receipt.turn_id).state is TurnState.DELIVERED
    clock.advance(REDELIVERY_GRACE_SECONDS)
    assert (await gw.runner.housekeeping.tick()).redelivered == 0
    assert gw.adapter.send_attempts == 2


async def test_redelivery_backs_off_and_the_backoff_is_bounded(make_gateway, clock) -> None:
    # Tries and age as good as unbounded here: giving up is `test_deliveries.py`'s.
    gw = await make_gateway(delivery={"max_attempts": 1000, "max_age_seconds": 10**7})
    gw.adapter.fail_sends = 1_000
    receipt = await gw.adapter.receive("hello")
    clock.advance(REDELIVERY_GRACE_SECONDS)
    await gw.runner.housekeeping.tick()
    assert gw.adapter.send_attempts == 2
    # Not again at once: the next try waits twice the grace period.
    await gw.runner.housekeeping.tick()
    clock.advance(REDELIVERY_GRACE_SECONDS)
    await gw.runner.housekeeping.tick()
    assert gw.adapter.send_attempts == 2
    clock.advance(REDELIVERY_GRACE_SECONDS)
    await gw.runner.housekeeping.tick()
    assert gw.adapter.send_attempts == 3
    # However many failures, a try is never further apart than the cap.
    for expected in range(4, 20):
        clock.advance(REDELIVERY_BACKOFF_MAX_SECONDS)
        await gw.runner.housekeeping.tick()
        assert gw.adapter.send_attempts == expected
    gw.adapter.fail_sends = 0
    clock.advance(REDELIVERY_BACKOFF_MAX_SECONDS)
    assert (await gw.runner.housekeeping.tick()).redelivered == 1
    assert gw.lanes.get_turn(receipt.turn_id).state is TurnState.DELIVERED


async def test_a_reply_being_sent_is_not_sent_twice_by_housekeeping(make_gateway, clock) -> None:
    gw = await make_gateway()
    gw.adapter.hold_sends = asyncio.Event()
    sending = asyncio.ensure_future(gw.adapter.receive("hello"))
    await gw.hub.next_started()
    await settle()
    assert gw.adapter.send_attempts == 1  # the lane is sending, held by the platform
    clock.advance(REDELIVERY_GRACE_SECONDS * 10)
    async with asyncio.timeout(HANG_GUARD_SECONDS):  # a second send would block on the hold
        assert (await gw.runner.housekeeping.tick()).redelivered == 0
    assert gw.adapter.send_attempts == 1
    gw.adapter.hold_sends.set()
    assert (await sending).status == "replied"
    assert gw.adapter.texts() == ["re: hello"]
