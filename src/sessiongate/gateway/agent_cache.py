"""One warm `Agent` per session key, bounded by count, idle time and memory (spec §11).

A cached agent keeps the provider's prompt cache warm across turns, and may pin its whole live
transcript in memory. Three rules bound the cache: an LRU cap (`max_size`), an idle TTL
(`idle_ttl_secs`, swept by housekeeping) and the memory-pressure valve (`sweep_pressure`). Two
kinds of agent are never evicted by any of them: one in the middle of a turn (`mark_busy`) and
one whose transcript has not fully reached disk (`mark_unflushed`) — evicting it would drop the
only copy of part of a conversation. The pressure pass also spares the `protect_recent` most
recently used agents, whose prompt caches are worth the most. When nothing can be evicted, the
cache may exceed `max_size` until a turn ends or a flush lands.

Eviction commits first, then releases, in two steps:

1. The sync methods (`put`, `sweep_idle`, `sweep_pressure`, `mark_idle`, `mark_flushed`) decide
   and commit: the entry leaves the cache at once, its agent joins a release queue, and the
   evicted keys are returned. No `await` separates reading the cache from changing it, so a
   cancellation can never leave an agent half-evicted, and no lock is needed on one event loop.
2. `await drain_released()` then, for each queued agent, awaits `on_evict(key, agent)` (the
   caller's commit hook) and `agent.aclose()` (the soft release), and runs `malloc_trim` after
   a pressure pass so the freed arenas return to the OS. Callers drain after any call that
   returned evicted keys.

Eviction never ends a transcript: the next turn on that key builds a fresh agent from the
persisted session. `remove(key)` is the exception to the queue: it hands the agent to the caller,
who owns its teardown.

A conversation boundary (`/new`, `/reset`, `/resume`, a reset or delete over HTTP) gets a full
teardown, never a carried-over agent (spec §11): each agent remembers the conversation it serves
(`put(..., conversation=...)`), and `release_stale` queues it for release (reason `boundary`)
once its key has moved on to another one.
"""

from __future__ import annotations

import enum
import itertools
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sessiongate.gateway.memory import MemoryProbe

if TYPE_CHECKING:
    from sessiongate.core.clock import Clock
    from sessiongate.core.config import AgentCacheConfig
    from sessiongate.gateway.agent import Agent

__all__ = ["AgentCache", "AgentCacheStatistics", "EvictionReason", "OnEvict"]

logger = logging.getLogger(__name__)

OnEvict = Callable[[str, "Agent"], Awaitable[None]]


class EvictionReason(enum.StrEnum):
    LRU = "lru"
    IDLE = "idle"
    PRESSURE = "pressure"
    # `put` gave the key a different agent; the old one is released like an evicted one.
    REPLACED = "replaced"
    SHUTDOWN = "shutdown"
    # The key moved on to another conversation; the agent served the old one.
    BOUNDARY = "boundary"


@dataclass(frozen=True, slots=True)
class AgentCacheStatistics:
    size: int
    max_size: int
    busy: int
    unflushed: int
    # Evicted agents whose commit and release have not run yet (see `drain_released`).
    pending_release: int
    evictions: Mapping[EvictionReason, int]
    release_failures: int
    pressure_passes: int
    # What the last pressure pass measured; `None` before the first pass, or when the probe
    # could not read RSS / the valve is off.
    last_pressure_rss_bytes: int | None
    last_pressure_budget_bytes: int | None
    trims: int

    @property
    def evictions_total(self) -> int:
        return sum(self.evictions.values())


@dataclass(slots=True)
class _Slot:
    agent: Agent
    last_used: float
    busy: bool = False
    unflushed: bool = False
    # The conversation the agent serves (an opaque token); None until a caller names one.
    conversation: str | None = None

    @property
    def is_evictable(self) -> bool:
        return not self.busy and not self.unflushed


@dataclass(frozen=True, slots=True)
class _Release:
    key: str
    agent: Agent
    reason: EvictionReason


class AgentCache:
    """An LRU of agents keyed by session key; see the module docstring for the rules."""

    def __init__(
        self,
        config: AgentCacheConfig,
        *,
        clock: Clock,
        memory: MemoryProbe | None = None,
        on_evict: OnEvict | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._memory = memory if memory is not None else MemoryProbe()
        self._on_evict = on_evict
        # Least recently used first; `move_to_end` marks use.
        self._slots: OrderedDict[str, _Slot] = OrderedDict()
        # The evictable slots alone (neither busy nor unflushed), least recently used first:
        # the cap takes its victims from the front without walking past busy agents, which
        # thousands of turns in flight (a burst of jobs) would otherwise make quadratic.
        self._evictable: OrderedDict[str, None] = OrderedDict()
        self._releases: deque[_Release] = deque()
        self._evictions = dict.fromkeys(EvictionReason, 0)
        self._release_failures = 0
        self._pressure_passes = 0
        self._last_rss: int | None = None
        self._last_budget: int | None = None
        self._trim_requested = False
        self._trims = 0

    def __len__(self) -> int:
        return len(self._slots)

    def __contains__(self, key: object) -> bool:
        return key in self._slots

    # ------------------------------------------------------------------ use

    def get(self, key: str) -> Agent | None:
        """The cached agent for `key`, now the most recently used; `None` on a miss."""
        slot = self._slots.get(key)
        if slot is None:
            return None
        self._touch(key, slot)
        return slot.agent

    def put(self, key: str, agent: Agent, *, conversation: str | None = None) -> list[str]:
        """Cache `agent` as the most recently used; returns the keys the LRU cap evicted.

        A different agent already cached for `key` is released (reason `replaced`) but its
        busy and unflushed marks carry over to the new one, since they describe the session.
        `conversation` names the conversation the agent serves (see `release_stale`).
        """
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot(agent, self._clock.monotonic())
            self._reflect(key, slot)
        else:
            if slot.agent is not agent:
                self._queue_release(key, slot.agent, EvictionReason.REPLACED)
                slot.agent = agent
            self._touch(key, slot)
        if conversation is not None:
            slot.conversation = conversation
        return self._enforce_cap(spare=key)

    def release_stale(self, key: str, *, conversation: str) -> bool:
        """Queue `key`'s agent for release (reason `boundary`) when it serves a conversation
        other than `conversation`, whatever its marks: the caller is about to use the key for
        `conversation`, so nothing else holds the old agent. Returns whether one was queued
        (drain it). An agent that serves no named conversation yet adopts this one."""
        slot = self._slots.get(key)
        if slot is None or slot.conversation == conversation:
            return False
        if slot.conversation is None:
            slot.conversation = conversation
            return False
        self._evict(key, EvictionReason.BOUNDARY)
        return True

    def remove(self, key: str) -> Agent | None:
        """Take `key`'s agent out regardless of its marks; the caller now owns its teardown."""
        slot = self._slots.pop(key, None)
        self._evictable.pop(key, None)
        return None if slot is None else slot.agent

    # ------------------------------------------------------------------ marks

    def mark_busy(self, key: str) -> None:
        """A turn started: the agent must not be evicted until `mark_idle`. No-op on a miss."""
        slot = self._slots.get(key)
        if slot is not None:
            slot.busy = True
            self._touch(key, slot)

    def mark_idle(self, key: str) -> list[str]:
        """The turn ended; idle time counts from now. Returns keys the LRU cap could now evict."""
        slot = self._slots.get(key)
        if slot is None:
            return []
        slot.busy = False
        self._touch(key, slot)
        return self._enforce_cap()

    def mark_unflushed(self, key: str) -> None:
        """The agent holds transcript rows not yet on disk: never evict it."""
        slot = self._slots.get(key)
        if slot is not None:
            slot.unflushed = True
            self._reflect(key, slot)

    def mark_flushed(self, key: str) -> list[str]:
        """The transcript caught up with the agent. Returns keys the LRU cap could now evict."""
        slot = self._slots.get(key)
        if slot is None:
            return []
        slot.unflushed = False
        self._reflect(key, slot)
        return self._enforce_cap()

    def is_busy(self, key: str) -> bool:
        slot = self._slots.get(key)
        return slot is not None and slot.busy

    # ------------------------------------------------------------------ sweeps

    def sweep_idle(self) -> list[str]:
        """Evict agents unused for `idle_ttl_secs` or longer (by the injected clock)."""
        cutoff = self._clock.monotonic() - self.config.idle_ttl_secs
        expired = [key for key in self._evictable if self._slots[key].last_used <= cutoff]
        for key in expired:
            self._evict(key, EvictionReason.IDLE)
        return expired

    def sweep_pressure(self) -> list[str]:
        """If anonymous RSS is over budget, evict least recently used agents.

        At most `max_evictions_per_pass`; never the `protect_recent` most recently used, never
        a busy or unflushed one. The memory only leaves when the agents are released, so the
        `malloc_trim` that returns it to the OS runs at the end of `drain_released`. The next
        pass measures again, which keeps one pass from shedding more than it must.
        """
        self._pressure_passes += 1
        budget = self._memory.budget_bytes(self.config.memory_high_mb)
        rss = None if budget is None else self._memory.anon_rss_bytes()
        self._last_budget, self._last_rss = budget, rss
        if budget is None or rss is None or rss <= budget:
            return []
        # The trim is worth running even if every agent is protected: turns free memory too.
        self._trim_requested = True
        keys = list(self._slots)
        unprotected = keys[: max(0, len(keys) - self.config.protect_recent)]
        victims = [key for key in unprotected if self._slots[key].is_evictable]
        victims = victims[: self.config.max_evictions_per_pass]
        for key in victims:
            self._evict(key, EvictionReason.PRESSURE)
        logger.warning(
            "agent cache over memory budget: rss_bytes=%d budget_bytes=%d evicted=%d",
            rss,
            budget,
            len(victims),
        )
        return victims

    # ------------------------------------------------------------------ release

    async def drain_released(self) -> list[str]:
        """Commit and release every evicted agent; returns their keys in eviction order.

        For each: `on_evict(key, agent)`, then `agent.aclose()`. A failure of either is logged
        and counted in `statistics().release_failures`; the release still goes on, because the
        transcript was already durable when the agent became evictable. Cancellation stops the
        drain; agents not reached stay queued for the next one.
        """
        released: list[str] = []
        while self._releases:
            item = self._releases.popleft()
            await self._release(item)
            released.append(item.key)
        if self._trim_requested:
            self._trim_requested = False
            if self._memory.malloc_trim():
                self._trims += 1
        return released

    async def aclose_all(self) -> None:
        """Shutdown: commit and release every cached agent, busy or not; the cache is empty
        afterwards. Call it after the lanes have drained."""
        for key in list(self._slots):
            self._evict(key, EvictionReason.SHUTDOWN)
        await self.drain_released()

    # ------------------------------------------------------------------ statistics

    def statistics(self) -> AgentCacheStatistics:
        slots = self._slots.values()
        return AgentCacheStatistics(
            size=len(self._slots),
            max_size=self.config.max_size,
            busy=sum(1 for slot in slots if slot.busy),
            unflushed=sum(1 for slot in slots if slot.unflushed),
            pending_release=len(self._releases),
            evictions=dict(self._evictions),
            release_failures=self._release_failures,
            pressure_passes=self._pressure_passes,
            last_pressure_rss_bytes=self._last_rss,
            last_pressure_budget_bytes=self._last_budget,
            trims=self._trims,
        )

    # ------------------------------------------------------------------ internals

    def _touch(self, key: str, slot: _Slot) -> None:
        slot.last_used = self._clock.monotonic()
        self._slots.move_to_end(key)
        self._reflect(key, slot)

    def _reflect(self, key: str, slot: _Slot) -> None:
        """Keep `_evictable` in step with the slot's marks; one that becomes evictable is
        the most recently used of them."""
        if slot.is_evictable:
            self._evictable[key] = None
            self._evictable.move_to_end(key)
        else:
            self._evictable.pop(key, None)

    def _enforce_cap(self, *, spare: str | None = None) -> list[str]:
        excess = len(self._slots) - self.config.max_size
        if excess <= 0:
            return []
        # Oldest first, and no further than the victims: over the cap, every new chat's turn
        # evicts, so it must not walk the cache (busy agents are not in `_evictable`).
        candidates = (k for k in self._evictable if k != spare)
        victims = list(itertools.islice(candidates, excess))
        for key in victims:
            self._evict(key, EvictionReason.LRU)
        return victims

    def _evict(self, key: str, reason: EvictionReason) -> None:
        slot = self._slots.pop(key)
        self._evictable.pop(key, None)
        self._queue_release(key, slot.agent, reason)

    def _queue_release(self, key: str, agent: Agent, reason: EvictionReason) -> None:
        self._evictions[reason] += 1
        self._releases.append(_Release(key, agent, reason))

    async def _release(self, item: _Release) -> None:
        if self._on_evict is not None:
            try:
                await self._on_evict(item.key, item.agent)
            except Exception:
                self._release_failures += 1
                logger.exception(
                    "agent commit before release failed: session_key=%s reason=%s",
                    item.key,
                    item.reason,
                )
        try:
            await item.agent.aclose()
        except Exception:
            self._release_failures += 1
            logger.exception(
                "agent release failed: session_key=%s reason=%s", item.key, item.reason
            )
