"""The housekeeping watcher (spec §10): idle sweep, pressure sweep, redelivery, hourly prunes.

Every `housekeeping_interval_seconds` it sweeps cached agents idle past their TTL, sheds agents
under memory pressure, releases what both evicted, sends again the replies whose delivery failed
(the runner's `redeliver`, with its own grace period and back-off), and — at most once an hour —
prunes routing
entries older than `session_store_max_age_days` and the gateway's own records older than
`JOURNAL_RETENTION_SECONDS` (dedup records of inbound message ids and finished journal turns),
and applies the `retention.*` budgets (`store/retention.py`). Eviction only releases a warm
agent and pruning keeps the canonical transcript; only a retention budget deletes sessions.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from sessiongate.gateway.store_calls import InlineCalls

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.gateway.agent_cache import AgentCache
    from sessiongate.gateway.store_calls import StoreCalls
    from sessiongate.store.lanes import LaneStore
    from sessiongate.store.session_store import SessionStore

__all__ = [
    "JOURNAL_RETENTION_SECONDS",
    "PRUNE_INTERVAL_SECONDS",
    "HousekeepingReport",
    "HousekeepingWatcher",
]

logger = logging.getLogger(__name__)

# Pruning walks every routing entry; once an hour is plenty for a retention counted in days.
PRUNE_INTERVAL_SECONDS = 3600.0

# How long, by the clock, an inbound message id is remembered and a finished turn stays in the
# journal. Platforms redeliver within hours (Telegram keeps an update for 24 h) and clients
# retry within minutes, so a week leaves a wide margin; a message whose row still waits is
# remembered whatever its age, and unfinished turns are never pruned.
JOURNAL_RETENTION_SECONDS = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class HousekeepingReport:
    idle_evicted: tuple[str, ...]
    pressure_evicted: tuple[str, ...]
    # Keys whose agents were committed and released in this tick (may include earlier evictions).
    released: tuple[str, ...]
    # Routing entries pruned; `None` when the hourly prune was not due this tick.
    pruned: int | None
    # (dedup records, journal turns) pruned; `None` when not due or there is no lane store.
    journal_pruned: tuple[int, int] | None = None
    # Replies delivered on a retry this tick; `None` when the watcher has no `redeliver`.
    redelivered: int | None = None
    # Keys the retention budgets removed (`retention.*`); `None` when not due this tick.
    retention_removed: tuple[str, ...] | None = None
    # Tool approvals that expired this tick (`approvals.py`); `None` without approvals.
    approvals_expired: int | None = None


class HousekeepingWatcher:
    """Runs `tick()` every `config.housekeeping_interval_seconds` until stopped."""

    def __init__(
        self,
        *,
        store: SessionStore,
        cache: AgentCache,
        config: GatewayConfig,
        clock: Clock,
        lanes: LaneStore | None = None,
        redeliver: Callable[[], Awaitable[int]] | None = None,
        expire_approvals: Callable[[], int] | None = None,
        prune_hook_receipts: Callable[[], int] | None = None,
        calls: StoreCalls | None = None,
    ) -> None:
        self._store = store
        # How the store is called from the loop: inline (SQLite) or off it (PostgreSQL).
        self._calls: StoreCalls = calls or InlineCalls()
        # Expires approvals nobody waits on any more (their feed events go out on time).
        self._expire_approvals = expire_approvals
        self._lanes = lanes
        # Forgets inbound webhooks' delivery ids past `hooks.dedupe_hours` (hourly).
        self._prune_hook_receipts = prune_hook_receipts
        self._redeliver = redeliver
        self._cache = cache
        self._config = config
        self._clock = clock
        self._last_prune: float | None = None
        self.next_deadline = clock.monotonic() + config.housekeeping_interval_seconds
        self.ticks = 0
        self.failures = 0

    async def tick(self) -> HousekeepingReport:
        """One pass; the first one prunes, later ones prune once `PRUNE_INTERVAL_SECONDS` have
        passed on the clock since the last prune."""
        idle = self._cache.sweep_idle()
        pressure = self._cache.sweep_pressure()
        released = await self._cache.drain_released()
        redelivered = await self._redeliver() if self._redeliver is not None else None
        expired = self._expire_approvals() if self._expire_approvals is not None else None
        pruned = journal_pruned = None
        retention_removed: tuple[str, ...] | None = None
        now = self._clock.monotonic()
        if self._last_prune is None or now - self._last_prune >= PRUNE_INTERVAL_SECONDS:
            # Recorded before the call, so a failing prune is retried in an hour, not every tick.
            self._last_prune = now
            pruned, journal_pruned, retention_removed = await self._calls.run(self._prune)
        self.ticks += 1
        if (
            idle
            or pressure
            or pruned
            or redelivered
            or retention_removed
            or (journal_pruned and any(journal_pruned))
        ):
            logger.info(
                "housekeeping: idle_evicted=%d pressure_evicted=%d pruned=%s journal_pruned=%s "
                "redelivered=%s retention_removed=%s",
                len(idle),
                len(pressure),
                pruned,
                journal_pruned,
                redelivered,
                None if retention_removed is None else len(retention_removed),
            )
        return HousekeepingReport(
            tuple(idle),
            tuple(pressure),
            tuple(released),
            pruned,
            journal_pruned,
            redelivered,
            retention_removed,
            expired,
        )

    def _prune(self) -> tuple[int, tuple[int, int] | None, tuple[str, ...]]:
        """The hourly store work: old entries, old journal rows, the retention budgets and
        old inbound-webhook receipts (a store call)."""
        pruned = self._store.prune_old_entries(self._config.session_store_max_age_days)
        journal_pruned: tuple[int, int] | None = None
        if self._lanes is not None:
            cutoff = self._clock.now() - timedelta(seconds=JOURNAL_RETENTION_SECONDS)
            journal_pruned = self._lanes.prune(cutoff)
        # The budgets of `retention.*`: oldest archived lanes first, then oldest idle ones,
        # never a pinned, protected, busy or resume-pending one (each removal is logged by
        # the store).
        removed = self._store.enforce_retention()
        if self._prune_hook_receipts is not None:
            self._prune_hook_receipts()
        return pruned, journal_pruned, tuple(r.session_key for r in removed)

    async def run(self, stop: asyncio.Event) -> None:
        """Tick at each deadline until `stop` is set; a failing tick is logged and counted, and
        the watcher goes on. Sleeps until the next deadline rather than polling."""
        interval = self._config.housekeeping_interval_seconds
        while not stop.is_set():
            timeout = max(0.0, self.next_deadline - self._clock.monotonic())
            try:
                await asyncio.wait_for(stop.wait(), timeout)
            except TimeoutError:
                pass
            else:
                return
            try:
                await self.tick()
            except Exception:
                self.failures += 1
                logger.exception("housekeeping tick failed")
            # Deadlines stay on a fixed grid; after a stall, skip the missed ones instead of
            # ticking back to back.
            now = self._clock.monotonic()
            self.next_deadline += interval
            if self.next_deadline <= now:
                self.next_deadline = now + interval
