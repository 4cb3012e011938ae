"""The lanes this instance may run turns on: `SoloOwnership` or `LeasedOwnership`, chosen once
when the runner is composed (`open_lane_ownership`); callers ask it, never which one it is.

`SoloOwnership`: one instance on its own database (SQLite, or PostgreSQL without others; the
home lock keeps it alone). Every lane is its own: every check passes, a fence is no fence,
nothing is claimed, lingers or is swept, and start-up recovers the whole journal.

`LeasedOwnership`: several instances on one PostgreSQL database (DESIGN decision 12):

- a lane's worker runs turns only while this instance holds the lane's lease (`acquire`,
  `Ownership.claim`: the epoch rises and fences every earlier owner);
- every write of a turn (the claim of its row, the messages it stores, its outcome) commits
  inside `fence(key)`, one transaction whose first statement renews the lease at its epoch; a
  paused or partitioned instance that wakes finds it lost, nothing of the write commits, the
  outcome is dropped (`fenced_commits`), and the successor reruns or recovers the turn;
- past `may_act()` (the lease may already have moved on) no agent call or send starts;
- an accept claims its turn at once only on a lane held here (its lease lingering), under the
  lane's fence; elsewhere it takes the lane's writer lock, and the lane's worker claims;
- an idle lane's lease is kept `store.lane_idle_seconds` (its next message needs no claim,
  and its agent stays warm here), then given back, refused while a row waits, so a message
  accepted meanwhile is never stranded;
- a lane this instance could not take is hinted to its owner (`NOTIFY`) unless
  `store.poll_only`; the sweep (`sweep`) is the ground truth either way: lanes with waiting
  work and no live owner, or owned here without a worker, every `store.sweep_seconds` ± 30 %;
- start-up recovers nothing of the shared journal: each lane is recovered by the worker that
  takes its lease (`LaneWorker.recover`), and a caller waiting for a turn another instance
  runs is answered from the journal (`Intake.follow_remote_outcomes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from typing import TYPE_CHECKING, Protocol

from sessiongate.errors import LeaseLostError, StoreUnavailableError
from sessiongate.gateway import recovery
from sessiongate.store.backends import open_wakeups

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Iterator
    from contextlib import AbstractContextManager
    from datetime import datetime
    from pathlib import Path
    from typing import Any

    from sessiongate.core.config import GatewayConfig
    from sessiongate.store.lanes import LaneStore
    from sessiongate.store.ownership import Lease, Ownership
    from sessiongate.store.session_store import SessionStore

__all__ = ["LaneOwnership", "LeasedOwnership", "SoloOwnership", "open_lane_ownership"]

log = logging.getLogger(__name__)

SWEEP_JITTER = 0.3
SWEEP_BATCH = 16


class LaneOwnership(Protocol):
    """What the intake, the lane worker, the turns and the runner ask about lanes."""

    def holds(self, key: str) -> bool:
        """This instance may run `key`'s turns (and deliver its replies)."""
        ...

    def may_act(self) -> bool:
        """No agent call or send starts past this (the lease may have moved on)."""
        ...

    async def acquire(self, key: str) -> bool | None:
        """Hold `key`: True if claimed now (what an earlier owner left is to recover), False
        if held already, None if another instance owns it or the database is away."""
        ...

    def busy(self, key: str) -> None: ...
    def idle(self, key: str) -> None: ...
    def unsettled(self, key: str) -> bool: ...
    def settle(self, key: str, *, settled: bool = True) -> None: ...

    def fence(self, key: str, *, lock_lane: bool = False) -> AbstractContextManager[None]:
        """One transaction that commits only while `key` is held here."""
        ...

    async def in_flight(self, key: str) -> list[int]: ...

    def rejoined(self, instance_id: str) -> None:
        """Declared dead by the others (a long pause): back under a new id, nothing held."""
        ...

    async def close(self) -> None:
        """At the drain, once the background tasks were told to stop."""
        ...

    def held_for_accept(self, key: str) -> bool:
        """An accept on `key` claims its turn under the lane's fence (a lease held here)."""
        ...

    def lock_for_accept(self, key: str, *, held: bool, lock_lane: Callable[[str], None]) -> None:
        """Inside the accepting transaction, before the route: the lane's writer lock when
        the fence does not take it."""
        ...

    def claim_at_accept(self, key: str, *, held: bool, routed_key: str) -> bool:
        """Whether an accept routed to `routed_key` may claim its turn now (lane free)."""
        ...

    def recovery_plan(
        self,
        *,
        home: Path,
        store: SessionStore,
        lane_store: LaneStore,
        config: GatewayConfig,
        now: datetime,
    ) -> recovery.RecoveryPlan:
        """What start-up recovers (`recovery.py`)."""
        ...

    def background(
        self,
        stop: asyncio.Event,
        *,
        wake: Callable[[str], None],
        follow_remote: Callable[[asyncio.Event], Coroutine[Any, Any, None]],
    ) -> list[Coroutine[Any, Any, None]]:
        """The tasks the runner keeps until `stop` (`wake(key)`: a lane has work)."""
        ...


class SoloOwnership:
    """Every lane is this instance's: one instance on its own database."""

    def holds(self, key: str) -> bool:
        return True

    def may_act(self) -> bool:
        return True

    async def acquire(self, key: str) -> bool | None:
        return False

    def busy(self, key: str) -> None:
        pass

    def idle(self, key: str) -> None:
        pass

    def unsettled(self, key: str) -> bool:
        return False

    def settle(self, key: str, *, settled: bool = True) -> None:
        pass

    def fence(self, key: str, *, lock_lane: bool = False) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    async def in_flight(self, key: str) -> list[int]:
        return []

    def rejoined(self, instance_id: str) -> None:
        pass

    async def close(self) -> None:
        pass

    def held_for_accept(self, key: str) -> bool:
        return False  # nothing to hold: the accept claims without a fence

    def lock_for_accept(self, key: str, *, held: bool, lock_lane: Callable[[str], None]) -> None:
        pass  # the database has one writer

    def claim_at_accept(self, key: str, *, held: bool, routed_key: str) -> bool:
        return True

    def recovery_plan(
        self,
        *,
        home: Path,
        store: SessionStore,
        lane_store: LaneStore,
        config: GatewayConfig,
        now: datetime,
    ) -> recovery.RecoveryPlan:
        return recovery.plan_recovery(
            home=home, store=store, lane_store=lane_store, config=config, now=now
        )

    def background(
        self,
        stop: asyncio.Event,
        *,
        wake: Callable[[str], None],
        follow_remote: Callable[[asyncio.Event], Coroutine[Any, Any, None]],
    ) -> list[Coroutine[Any, Any, None]]:
        return []


class LeasedOwnership:
    """The lanes this instance holds the lease of, on a database shared with others."""

    def __init__(self, ownership: Ownership, config: GatewayConfig) -> None:
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
        # Idle lanes being given back (`release`), each done when the database answered.
        self._releasing: dict[str, asyncio.Future[None]] = {}
        self.claims = 0
        self.claims_refused = 0
        self.sweeps = 0
        # This instance's own connection (its liveness lock, and the wake-up hints other
        # instances send it, unless `store.poll_only`): listening from `background` on.
        self._wakeups = open_wakeups(config, self._hint_from_thread)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: Callable[[str], None] | None = None

    def holds(self, key: str) -> bool:
        return key in self._held

    def held(self) -> list[str]:
        return list(self._held)

    def may_act(self) -> bool:
        return self.ownership.may_act()

    async def acquire(self, key: str) -> bool | None:
        own = self.ownership
        releasing = self._releasing.get(key)
        if releasing is not None:
            await asyncio.shield(releasing)  # given back, or kept: then it is held here
        if not own.may_act():
            return None
        if key in self._held:
            return False  # the fence finds out if it has moved on meanwhile
        lease = await asyncio.to_thread(own.claim, key)
        if lease is None:
            self.claims_refused += 1
            if self._hints and own.connected:
                with contextlib.suppress(StoreUnavailableError):
                    await asyncio.to_thread(own.nudge, key)
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
        lease = self._held.get(key)
        if lease is None:
            raise LeaseLostError(f"lane {key!r} is not held by this instance")
        try:
            with self.ownership.fenced(lease, lock_lane=lock_lane):
                yield
        except LeaseLostError:
            # The fence may run on a store thread (`gateway/store_calls.py`): the table of
            # leases is the loop's, so it forgets there, before the caller hears of it.
            loop = self._loop
            if loop is None or loop.is_closed() or _on_loop(loop):
                self._forget_lease(key, lease)
            else:
                loop.call_soon_threadsafe(self._forget_lease, key, lease)
            raise

    def _forget_lease(self, key: str, lease: Lease) -> None:
        if self._held.get(key) == lease:
            self.forget(key)

    async def in_flight(self, key: str) -> list[int]:
        """Turns of a held lane an earlier owner (or this one, before it lost the database)
        left unfinished."""
        lease = self._held.get(key)
        if lease is None:
            return []
        return await asyncio.to_thread(self.ownership.in_flight, lease)

    def held_for_accept(self, key: str) -> bool:
        # Its lease lingering after its last turn (not being given back), and nothing of an
        # earlier owner's left.
        return (
            self.holds(key)
            and key not in self._releasing
            and not self.unsettled(key)
            and self.may_act()
        )

    def lock_for_accept(self, key: str, *, held: bool, lock_lane: Callable[[str], None]) -> None:
        if not held:
            # The lane's writer lock before the route's row lock, in the order a claim takes
            # them, so an accept (a merge into the waiting slot) and the owner's claim of
            # that slot never interleave, and never deadlock.
            lock_lane(key)

    def claim_at_accept(self, key: str, *, held: bool, routed_key: str) -> bool:
        # Elsewhere the lane's worker takes the lease first, and claims.
        return held and routed_key == key

    def recovery_plan(
        self,
        *,
        home: Path,
        store: SessionStore,
        lane_store: LaneStore,
        config: GatewayConfig,
        now: datetime,
    ) -> recovery.RecoveryPlan:
        # The journal is shared with live instances: nothing in it is this one's to recover
        # until it owns the lane, and each lane is recovered by the worker that claims it
        # (`LaneWorker.recover`); the sweep finds the lanes with work.
        return recovery.RecoveryPlan(clean=True, pending_lanes=lane_store.lanes_with_pending())

    def background(
        self,
        stop: asyncio.Event,
        *,
        wake: Callable[[str], None],
        follow_remote: Callable[[asyncio.Event], Coroutine[Any, Any, None]],
    ) -> list[Coroutine[Any, Any, None]]:
        self._loop, self._wake = asyncio.get_running_loop(), wake
        tasks = [self.sweep(stop, wake), follow_remote(stop)]
        if self._wakeups is not None:
            self._wakeups.listen(self.ownership.instance_id)
        return tasks

    def _hint_from_thread(self, key: str) -> None:
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            loop.call_soon_threadsafe(wake, key)

    def rejoined(self, instance_id: str) -> None:
        self.forget_all()
        if self._wakeups is not None:
            self._wakeups.listen(instance_id)

    async def close(self) -> None:
        if self._wakeups is not None:
            await asyncio.to_thread(self._wakeups.close)

    async def release(self, key: str) -> bool:
        """Give an idle lane back; False while a row waits on it (the worker goes on). While
        the database gives it back, an accept claims nothing under it and a worker's
        `acquire` waits for the outcome."""
        lease = self._held.get(key)
        if lease is None:
            return True
        releasing = asyncio.get_running_loop().create_future()
        self._releasing[key] = releasing
        try:
            released = await asyncio.to_thread(self.ownership.release, lease)
            if released and self._held.get(key) == lease:
                self.forget(key)
            return released
        finally:
            del self._releasing[key]
            releasing.set_result(None)

    def forget(self, key: str) -> None:
        self._held.pop(key, None)
        self._idle.pop(key, None)
        self._unsettled.discard(key)

    def forget_all(self) -> None:
        """After a rejoin under a new id: every lease of the old id has moved on."""
        self._held.clear()
        self._idle.clear()
        self._unsettled.clear()

    async def _release_idle(self, wake: Callable[[str], None]) -> None:
        due = time.monotonic() - self._linger
        for key, since in list(self._idle.items()):
            if since > due or self._idle.get(key) != since:
                continue
            try:
                if not await self.release(key):
                    # A row arrived meanwhile: the lane has work, and stays ours.
                    self._idle.pop(key, None)
                    wake(key)
            except StoreUnavailableError:
                return

    async def sweep(self, stop: asyncio.Event, wake: Callable[[str], None]) -> None:
        """Until `stop`: every `store.sweep_seconds` ± 30 %, wake the lanes with waiting work
        and no live owner (or owned here), a few at a time."""
        own = self.ownership
        while not stop.is_set():
            delay = self._sweep_seconds * random.uniform(1 - SWEEP_JITTER, 1 + SWEEP_JITTER)
            try:
                await asyncio.wait_for(stop.wait(), delay)
            except TimeoutError:
                pass
            else:
                return
            self.sweeps += 1
            await asyncio.to_thread(own.reap_vanished)
            for key in await asyncio.to_thread(own.wanting_owner, SWEEP_BATCH):
                wake(key)
            await self._release_idle(wake)


def open_lane_ownership(ownership: Ownership | None, config: GatewayConfig) -> LaneOwnership:
    """Chosen once, at the runner's composition: leases when the database is shared (the
    instance presence has an `Ownership`), every lane this instance's otherwise."""
    if ownership is None:
        return SoloOwnership()
    return LeasedOwnership(ownership, config)


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
