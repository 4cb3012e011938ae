"""`LaneLeases`: the lanes this instance may run turns on, when several share one database.

On SQLite there is one instance per home (the home lock), every call here is a no-op and the
runner's path is what it always was. On PostgreSQL (DESIGN decision 12):

- a lane's worker runs turns only while this instance holds the lane's lease (`acquire`,
  `Ownership.claim`: the epoch rises and fences every earlier owner);
- every write of a turn (the claim of its row, the messages it stores, its outcome) commits
  inside `fence(key)`, one transaction whose first statement renews the lease at its epoch; a
  paused or partitioned instance that wakes finds it lost, nothing of the write commits, the
  outcome is dropped (`fenced_commits`), and the successor reruns or recovers the turn;
- past `may_act()` (the lease may already have moved on) no agent call or send starts;
- an idle lane's lease is kept `store.lane_idle_seconds` (its next message needs no claim,
  and its agent stays warm here), then given back, refused while a row waits, so a message
  accepted meanwhile is never stranded;
- a lane this instance could not take is hinted to its owner (`NOTIFY`) unless
  `store.poll_only`; the sweep (`sweep`) is the ground truth either way: lanes with waiting
  work and no live owner, or owned here without a worker, every `store.sweep_seconds` ± 30 %.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import TYPE_CHECKING

from sessiongate.errors import LeaseLostError, StoreUnavailableError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from sessiongate.core.config import GatewayConfig
    from sessiongate.store.ownership import Lease, Ownership

__all__ = ["LaneLeases"]

log = logging.getLogger(__name__)

SWEEP_JITTER = 0.3
SWEEP_BATCH = 16


class LaneLeases:
    def __init__(self, ownership: Ownership | None, config: GatewayConfig) -> None:
        self.ownership = ownership
        self._hints = not config.store.poll_only
        self._sweep_seconds = config.store.sweep_seconds
        self._linger = config.store.lane_idle_seconds
        self._held: dict[str, Lease] = {}
        # Held lanes without a worker, since when (monotonic): given back after the linger.
        self._idle: dict[str, float] = {}
        # Held lanes whose journal may hold a turn no worker here is running: claimed from
        # another owner, or left by a worker of this instance that stopped short.
        self._unsettled: set[str] = set()
        self.claims = 0
        self.claims_refused = 0
        self.sweeps = 0

    @property
    def shared(self) -> bool:
        return self.ownership is not None

    def holds(self, key: str) -> bool:
        return self.ownership is None or key in self._held

    def held(self) -> list[str]:
        return list(self._held)

    def may_act(self) -> bool:
        return self.ownership is None or self.ownership.may_act()

    def acquire(self, key: str) -> bool | None:
        """Hold `key`'s lease: True if claimed now (what an earlier owner left unfinished is
        this worker's to recover), False if it was held already, None if another instance
        owns it or the database is away (it was told, or the sweep finds the lane)."""
        own = self.ownership
        if own is None:
            return False
        if not own.may_act():
            return None
        if key in self._held:
            return False  # the fence finds out if it has moved on meanwhile
        lease = own.claim(key)
        if lease is None:
            self.claims_refused += 1
            if self._hints and own.connected:
                with contextlib.suppress(StoreUnavailableError):
                    own.nudge(key)
            return None
        self.claims += 1
        self._held[key] = lease
        self._unsettled.add(key)
        return True

    def busy(self, key: str) -> None:
        """A worker has the lane: it is not idle."""
        self._idle.pop(key, None)

    def idle(self, key: str) -> None:
        """The lane's worker found no more work: the lease lingers, then goes back."""
        if key in self._held:
            self._idle[key] = time.monotonic()

    def unsettled(self, key: str) -> bool:
        return key in self._unsettled

    def settle(self, key: str, *, settled: bool = True) -> None:
        """Whether what the lane's journal holds is accounted for by a worker here."""
        if settled:
            self._unsettled.discard(key)
        elif key in self._held:
            self._unsettled.add(key)

    @contextlib.contextmanager
    def fence(self, key: str, *, lock_lane: bool = False) -> Iterator[None]:
        """One transaction that commits only while this instance holds `key` at its epoch
        (with `lock_lane`, under the lane's writer lock too: claiming its next row)."""
        own = self.ownership
        if own is None:
            yield
            return
        lease = self._held.get(key)
        if lease is None:
            raise LeaseLostError(f"lane {key!r} is not held by this instance")
        try:
            with own.fenced(lease, lock_lane=lock_lane):
                yield
        except LeaseLostError:
            if self._held.get(key) == lease:
                self.forget(key)
            raise

    def in_flight(self, key: str) -> list[int]:
        """Turns of a held lane an earlier owner (or this one, before it lost the database)
        left unfinished."""
        own = self.ownership
        lease = self._held.get(key)
        if own is None or lease is None:
            return []
        return own.in_flight(lease)

    def release(self, key: str) -> bool:
        """Give an idle lane back; False while a row waits on it (the worker goes on)."""
        own = self.ownership
        lease = self._held.get(key)
        if own is None or lease is None:
            return True
        if not own.release(lease):
            return False
        self.forget(key)
        return True

    def forget(self, key: str) -> None:
        self._held.pop(key, None)
        self._idle.pop(key, None)
        self._unsettled.discard(key)

    def forget_all(self) -> None:
        """After a rejoin under a new id: every lease of the old id has moved on."""
        self._held.clear()
        self._idle.clear()
        self._unsettled.clear()

    def _release_idle(self, wake: Callable[[str], None]) -> None:
        due = time.monotonic() - self._linger
        for key, since in list(self._idle.items()):
            if since > due or self._idle.get(key) != since:
                continue
            try:
                if not self.release(key):
                    # A row arrived meanwhile: the lane has work, and stays ours.
                    self._idle.pop(key, None)
                    wake(key)
            except StoreUnavailableError:
                return

    async def sweep(self, stop: asyncio.Event, wake: Callable[[str], None]) -> None:
        """Until `stop`: every `store.sweep_seconds` ± 30 %, wake the lanes with waiting work
        and no live owner (or owned here), a few at a time."""
        own = self.ownership
        if own is None:
            return
        while not stop.is_set():
            delay = self._sweep_seconds * random.uniform(1 - SWEEP_JITTER, 1 + SWEEP_JITTER)
            try:
                await asyncio.wait_for(stop.wait(), delay)
            except TimeoutError:
                pass
            else:
                return
            self.sweeps += 1
            own.reap_vanished()
            for key in own.wanting_owner(SWEEP_BATCH):
                wake(key)
            self._release_idle(wake)
