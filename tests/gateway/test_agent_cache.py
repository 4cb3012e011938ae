from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import pytest

from sessiongate.agents.base import Agent, TurnRequest, TurnResult
from sessiongate.core.config import AgentCacheConfig
from sessiongate.gateway.agent_cache import AgentCache, EvictionReason
from sessiongate.gateway.memory import MemoryProbe, malloc_trim

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.core.clock import FakeClock

MB = 1024 * 1024
HAS_MALLOC_TRIM = malloc_trim()


class RecordingAgent:
    """An agent that writes its release into a shared log."""

    def __init__(self, name: str, log: list[tuple[str, str]]) -> None:
        self.name = name
        self.log = log
        self.closed = False

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        return TurnResult(text=self.name)

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return ""

    async def aclose(self) -> None:
        self.closed = True
        self.log.append(("close", self.name))


class Harness:
    """A cache over a fake /proc whose anonymous RSS the test sets."""

    def __init__(self, root: Path, clock: FakeClock, **config: Any) -> None:
        self.root = root
        self.log: list[tuple[str, str]] = []
        self.set_rss_mb(10)
        self.cache = AgentCache(
            AgentCacheConfig(**config),
            clock=clock,
            memory=MemoryProbe(root),
            on_evict=self.commit,
        )

    async def commit(self, key: str, agent: Agent) -> None:
        assert isinstance(agent, RecordingAgent)
        self.log.append(("commit", agent.name))

    def set_rss_mb(self, megabytes: int) -> None:
        status = self.root / "proc/self/status"
        status.parent.mkdir(parents=True, exist_ok=True)
        status.write_text(f"RssAnon:\t{megabytes * 1024} kB\n")

    def agent(self, name: str) -> RecordingAgent:
        return RecordingAgent(name, self.log)

    def fill(self, *keys: str) -> dict[str, RecordingAgent]:
        agents = {key: self.agent(key) for key in keys}
        for key, agent in agents.items():
            assert self.cache.put(key, agent) == []
        return agents


@pytest.fixture
def make(tmp_path: Path, clock: FakeClock):
    def make(**config: Any) -> Harness:
        return Harness(tmp_path, clock, **config)

    return make


def test_get_returns_the_cached_agent_and_none_on_a_miss(make) -> None:
    h = make()
    agent = h.agent("a")
    h.cache.put("a", agent)
    assert h.cache.get("a") is agent
    assert h.cache.get("b") is None


async def test_lru_cap_evicts_least_recently_used_and_commits_before_release(make) -> None:
    h = make(max_size=2)
    agents = h.fill("a", "b")
    h.cache.get("a")
    assert h.cache.put("c", h.agent("c")) == ["b"]
    assert "b" not in h.cache
    # Committed to the release queue, not yet released.
    assert not agents["b"].closed
    assert h.cache.statistics().pending_release == 1
    assert await h.cache.drain_released() == ["b"]
    assert h.log == [("commit", "b"), ("close", "b")]
    stats = h.cache.statistics()
    assert stats.pending_release == 0
    assert stats.evictions[EvictionReason.LRU] == 1


async def test_busy_agent_is_never_evicted_by_the_cap(make) -> None:
    h = make(max_size=1)
    h.fill("a")
    h.cache.mark_busy("a")
    assert h.cache.put("b", h.agent("b")) == []
    assert len(h.cache) == 2
    # The turn ends: "a" is now the most recently used, so the cap takes "b".
    assert h.cache.mark_idle("a") == ["b"]
    assert await h.cache.drain_released() == ["b"]
    assert h.cache.statistics().evictions[EvictionReason.LRU] == 1
    assert h.cache.statistics().evictions_total == 1


def test_over_the_cap_with_many_busy_agents_only_idle_ones_go_oldest_first(make) -> None:
    # A burst of turns in flight: far more busy agents than the cap. Every idle agent over
    # the cap goes, oldest first (one that becomes idle is the most recently used), and no
    # busy one does.
    h = make(max_size=3)
    for n in range(200):
        assert h.cache.put(f"busy{n}", h.agent(f"busy{n}")) == []
        h.cache.mark_busy(f"busy{n}")
    assert h.cache.put("idle0", h.agent("idle0")) == []  # the agent just put is spared
    assert h.cache.put("idle1", h.agent("idle1")) == ["idle0"]
    assert h.cache.mark_idle("busy0") == ["idle1", "busy0"]
    h.cache.mark_unflushed("busy1")
    assert h.cache.mark_idle("busy1") == []
    assert h.cache.mark_flushed("busy1") == ["busy1"]
    assert all(f"busy{n}" in h.cache for n in range(2, 200))
    assert len(h.cache) == 198


async def test_unflushed_agent_is_never_evicted_until_flushed(make, clock: FakeClock) -> None:
    h = make(max_size=1, idle_ttl_secs=60, memory_high_mb=1, protect_recent=0)
    h.set_rss_mb(100)
    h.fill("a")
    h.cache.mark_unflushed("a")
    assert h.cache.put("b", h.agent("b")) == []
    clock.advance(3600)
    h.cache.mark_busy("b")
    assert h.cache.sweep_idle() == []
    assert h.cache.sweep_pressure() == []
    assert h.cache.statistics().unflushed == 1
    assert h.cache.mark_flushed("a") == ["a"]
    await h.cache.drain_released()
    assert h.log == [("commit", "a"), ("close", "a")]


async def test_idle_sweep_evicts_agents_unused_for_the_ttl(make, clock: FakeClock) -> None:
    h = make(idle_ttl_secs=60)
    h.fill("a", "b", "c")
    h.cache.mark_busy("c")
    clock.advance(30)
    h.cache.get("b")
    clock.advance(30)
    assert h.cache.sweep_idle() == ["a"]
    clock.advance(30)
    # "c" is mid-turn: idle time does not apply to it.
    assert h.cache.sweep_idle() == ["b"]
    assert await h.cache.drain_released() == ["a", "b"]
    assert h.cache.statistics().evictions[EvictionReason.IDLE] == 2
    assert "c" in h.cache


async def test_pressure_evicts_lru_up_to_the_cap_and_spares_recent(make) -> None:
    h = make(memory_high_mb=100, max_evictions_per_pass=2, protect_recent=2)
    h.fill("k0", "k1", "k2", "k3", "k4", "k5")
    h.set_rss_mb(200)
    assert h.cache.sweep_pressure() == ["k0", "k1"]
    assert h.cache.sweep_pressure() == ["k2", "k3"]
    # The two most recently used are protected however high the pressure.
    assert h.cache.sweep_pressure() == []
    assert await h.cache.drain_released() == ["k0", "k1", "k2", "k3"]
    stats = h.cache.statistics()
    assert stats.evictions[EvictionReason.PRESSURE] == 4
    assert stats.last_pressure_rss_bytes == 200 * MB
    assert stats.last_pressure_budget_bytes == 100 * MB
    assert stats.pressure_passes == 3
    assert stats.trims == int(HAS_MALLOC_TRIM)


def test_pressure_skips_busy_and_unflushed_agents(make) -> None:
    h = make(memory_high_mb=100, max_evictions_per_pass=2, protect_recent=0)
    h.fill("k0", "k1", "k2", "k3")
    h.cache.mark_busy("k0")
    h.cache.mark_unflushed("k2")
    h.set_rss_mb(200)
    # mark_busy touched k0, so the LRU order is now k1, k2, k3, k0.
    assert h.cache.sweep_pressure() == ["k1", "k3"]


def test_pressure_under_budget_evicts_nothing(make) -> None:
    h = make(memory_high_mb=100, protect_recent=0)
    h.fill("a", "b")
    h.set_rss_mb(99)
    assert h.cache.sweep_pressure() == []
    assert h.cache.statistics().last_pressure_rss_bytes == 99 * MB


@pytest.mark.parametrize("setting", ["off", 0])
def test_pressure_valve_off_evicts_nothing(make, setting: str | int) -> None:
    h = make(memory_high_mb=setting, protect_recent=0)
    h.fill("a", "b")
    h.set_rss_mb(100_000)
    assert h.cache.sweep_pressure() == []
    assert h.cache.statistics().last_pressure_budget_bytes is None


async def test_put_of_a_new_agent_releases_the_old_one(make) -> None:
    h = make()
    old = h.agent("old")
    h.cache.put("k", old)
    h.cache.mark_busy("k")
    assert h.cache.put("k", old) == []
    assert h.cache.statistics().pending_release == 0
    new = h.agent("new")
    h.cache.put("k", new)
    assert h.cache.get("k") is new
    # The mark belongs to the session, not to the agent object.
    assert h.cache.is_busy("k")
    assert await h.cache.drain_released() == ["k"]
    assert old.closed
    assert not new.closed
    assert h.cache.statistics().evictions[EvictionReason.REPLACED] == 1


async def test_release_stale_releases_an_agent_of_another_conversation(make) -> None:
    h = make()
    old = h.agent("old")
    h.cache.put("k", old, conversation="s1")
    h.cache.mark_busy("k")  # the caller's own turn: the boundary releases it all the same
    assert not h.cache.release_stale("k", conversation="s1")
    assert h.cache.release_stale("k", conversation="s2")
    assert h.cache.get("k") is None
    assert await h.cache.drain_released() == ["k"]
    assert h.log == [("commit", "old"), ("close", "old")]
    assert h.cache.statistics().evictions[EvictionReason.BOUNDARY] == 1


def test_release_stale_lets_an_unnamed_agent_adopt_the_conversation(make) -> None:
    h = make()
    agent = h.agent("a")
    h.cache.put("k", agent)
    assert not h.cache.release_stale("k", conversation="s1")
    assert not h.cache.release_stale("missing", conversation="s1")
    assert h.cache.get("k") is agent
    assert h.cache.release_stale("k", conversation="s2")


async def test_remove_hands_the_agent_to_the_caller_unreleased(make) -> None:
    h = make()
    agent = h.agent("a")
    h.cache.put("a", agent)
    h.cache.mark_busy("a")
    assert h.cache.remove("a") is agent
    assert h.cache.remove("a") is None
    assert await h.cache.drain_released() == []
    assert not agent.closed
    assert h.log == []


async def test_failed_commit_is_logged_counted_and_release_still_happens(
    tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    async def failing_commit(key: str, agent: Agent) -> None:
        raise RuntimeError("memory provider down")

    cache = AgentCache(
        AgentCacheConfig(max_size=1),
        clock=clock,
        memory=MemoryProbe(tmp_path),
        on_evict=failing_commit,
    )
    log: list[tuple[str, str]] = []
    first = RecordingAgent("a", log)
    cache.put("a", first)
    cache.put("b", RecordingAgent("b", log))
    with caplog.at_level(logging.ERROR, logger="sessiongate.gateway.agent_cache"):
        assert await cache.drain_released() == ["a"]
    assert first.closed
    assert cache.statistics().release_failures == 1
    assert "session_key=a" in caplog.text


async def test_aclose_all_commits_and_releases_everything(make) -> None:
    h = make()
    agents = h.fill("a", "b")
    h.cache.mark_busy("a")
    h.cache.mark_unflushed("b")
    await h.cache.aclose_all()
    assert len(h.cache) == 0
    assert all(agent.closed for agent in agents.values())
    assert h.log == [("commit", "b"), ("close", "b"), ("commit", "a"), ("close", "a")]
    assert h.cache.statistics().evictions[EvictionReason.SHUTDOWN] == 2


def test_statistics_describe_the_cache(make) -> None:
    h = make(max_size=5)
    h.fill("a", "b", "c")
    h.cache.mark_busy("a")
    h.cache.mark_unflushed("b")
    stats = h.cache.statistics()
    assert (stats.size, stats.max_size, stats.busy, stats.unflushed) == (3, 5, 1, 1)
    assert stats.evictions_total == 0
    assert stats.last_pressure_rss_bytes is None
