"""`Leadership`: the singular platform connections of this instance, under leader leases.

A Telegram long poll, Slack Socket Mode and a Discord gateway socket must run on exactly one
gateway instance at a time among those sharing a database: two pollers confirm each other's
offsets, two sockets answer every event twice. Webhooks need none of this (any instance takes
a signed POST). `LeaderRole.run(connection)` keeps one such connection under the lease named
for it (`"telegram:polling"`):

- not leading: `claim_leader`; while another live instance leads, wait about a heartbeat
  (with jitter, so followers do not knock in lockstep) and ask again;
- leading: run `connection()` as a task and renew the lease at its epoch every heartbeat; a
  renewal refused (a successor took over), or none accepted before the local deadline (the
  database is unreachable, or this process was paused past the lease), cancels the
  connection at once and the role goes back to claiming;
- the connection calls `check()` before each platform action that must not happen twice
  (confirming a Telegram offset, acknowledging an envelope): a database round trip that
  renews the lease or raises `LeaseLostError`, so a leader that wakes from a SIGSTOP after its
  successor took over never acts; `leading` is the free local half of that check (the last
  renewal is recent enough), for actions too frequent for a round trip each.

On a database only this process uses (SQLite: `ownership` is None) the instance simply leads.
A connection that ends by itself (a refused token) ends the role and gives the lease up; one
that fails is retried after a backoff, the lease given up meanwhile so another instance may
try.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from typing import TYPE_CHECKING, Any

from sessiongate.core.clock import SystemClock
from sessiongate.errors import LeaseLostError, SessiongateError
from sessiongate.store.ownership import DEADLINE_MARGIN_SECONDS, Lease

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

    from sessiongate.core.clock import Clock
    from sessiongate.store.ownership import Ownership

__all__ = ["LeaderRole", "Leadership"]

log = logging.getLogger(__name__)

# A failed connection is retried after this long (the lease is free meanwhile).
_FAILED_CONNECTION_DELAY = 5.0
# The lead a process has on a database it alone uses.
_LOCAL_EPOCH = 0


class Leadership:
    """The roles of one instance; `ownership` None means a database no other instance uses."""

    def __init__(
        self,
        ownership: Ownership | None,
        *,
        clock: Clock | None = None,
        # Waits until that much time has passed (a test's fake clock: until it is advanced).
        sleep: Callable[[float], Awaitable[None]] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.ownership = ownership
        self.clock: Clock = clock or SystemClock()
        self.sleep = sleep or asyncio.sleep
        self.rng = rng or random.Random()
        self.roles: dict[str, LeaderRole] = {}

    def role(self, name: str) -> LeaderRole:
        """The role `name`, one per name in this instance."""
        if name not in self.roles:
            self.roles[name] = LeaderRole(name, self)
        return self.roles[name]

    def leading(self) -> dict[str, bool]:
        """Each role and whether this instance leads it now (metrics, /v1/instances)."""
        return {name: role.leading for name, role in sorted(self.roles.items())}


class LeaderRole:
    """One singular connection's lease as this instance holds it (see the module docstring)."""

    def __init__(self, name: str, leadership: Leadership) -> None:
        self.name = name
        self._own = leadership.ownership
        self._clock = leadership.clock
        self._sleep = leadership.sleep
        self._rng = leadership.rng
        self.lease: Lease | None = None
        self.takeovers = 0  # times this instance became the leader
        self.losses = 0  # times it lost the lead while leading
        self.renewals = 0
        self.claims = 0  # claims answered (refused ones included)
        self._deadline = 0.0
        self._lost = asyncio.Event()

    # ------------------------------------------------------------------ the checks

    @property
    def leading(self) -> bool:
        """The local check: a lease renewed recently enough that no successor can have it."""
        if self.lease is None:
            return False
        return self._own is None or self._clock.monotonic() < self._deadline

    async def check(self) -> None:
        """Before a platform action: renew the lease at its epoch, or raise `LeaseLostError`
        (and stop the connection) when it moved on or cannot be confirmed."""
        own, lease = self._own, self.lease
        if own is None and lease is not None:
            return
        if own is None or lease is None:
            raise LeaseLostError(f"this instance does not lead {self.name!r}")
        started = self._clock.monotonic()
        try:
            held = await asyncio.to_thread(own.hold_leader, lease)
        except SessiongateError as exc:
            # Unconfirmed is not held: a partitioned leader must not act.
            self._lose(f"the lease could not be confirmed: {exc}")
            raise LeaseLostError(f"the lead of {self.name!r} could not be confirmed") from exc
        if not held:
            self._lose("a successor took the lease over")
            raise LeaseLostError(f"{self.name!r} is led by another instance now")
        self._renewed(started)

    # ------------------------------------------------------------------ the loop

    async def run(self, connection: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Lead when possible and run `connection` while leading, until cancelled or the
        connection ends by itself."""
        if self._own is None:
            self.lease = Lease(self.name, "local", _LOCAL_EPOCH, kind="leader")
            try:
                await connection()
            finally:
                self.lease = None
            return
        try:
            while True:
                if not await self._claim():
                    await self._sleep(self._retry_delay())
                    continue
                outcome = await self._lead(connection)
                # Given up whatever the outcome: a lease already lost is not touched (the
                # release matches this owner and epoch only).
                await self._release()
                if outcome == "finished":
                    return
                if outcome == "failed":
                    await self._sleep(_FAILED_CONNECTION_DELAY * self._jitter())
        finally:
            await self._release()

    async def _claim(self) -> bool:
        assert self._own is not None
        started = self._clock.monotonic()
        try:
            lease = await asyncio.to_thread(self._own.claim_leader, self.name)
        except SessiongateError as exc:
            log.warning("leader claim failed", extra={"role": self.name, "error": str(exc)})
            return False
        finally:
            self.claims += 1
        if lease is None:
            return False
        self.lease = lease
        self._lost.clear()
        self._renewed(started)
        self.takeovers += 1
        log.info("leading the singular connection", extra={"role": self.name, "epoch": lease.epoch})
        return True

    async def _lead(self, connection: Callable[[], Coroutine[Any, Any, None]]) -> str:
        """Run the connection while the lease holds: "finished", "failed" or "lost"."""
        task = asyncio.create_task(connection(), name=f"leader:{self.name}")
        lost = asyncio.create_task(self._lost.wait())
        try:
            while True:
                beat = asyncio.ensure_future(self._sleep(self._heartbeat()))
                try:
                    await asyncio.wait({task, lost, beat}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    beat.cancel()
                if task.done():
                    return self._ended(task)
                if lost.done() or not await self._renew():
                    return "lost"
        finally:
            lost.cancel()
            if not task.done():
                task.cancel()
            await asyncio.gather(task, lost, return_exceptions=True)

    def _ended(self, task: asyncio.Task[None]) -> str:
        if task.cancelled():
            return "lost"
        exc = task.exception()
        if isinstance(exc, LeaseLostError):
            return "lost"
        if exc is not None:
            log.error(
                "singular connection failed; retrying",
                extra={"role": self.name, "error": repr(exc)},
                exc_info=exc,
            )
            return "failed"
        return "finished"

    async def _renew(self) -> bool:
        assert self._own is not None
        assert self.lease is not None
        started = self._clock.monotonic()
        try:
            held = await asyncio.to_thread(self._own.hold_leader, self.lease)
        except SessiongateError as exc:
            if self._clock.monotonic() < self._deadline:
                log.warning("leader renewal failed", extra={"role": self.name, "error": str(exc)})
                return True
            self._lose("no renewal before the deadline (the database is unreachable)")
            return False
        if not held:
            self._lose("the lease expired or a successor took it over")
            return False
        self._renewed(started)
        self.renewals += 1
        return True

    async def _release(self) -> None:
        lease = self.lease
        if lease is None or self._own is None:
            return
        # `lease` reads None only once the database has let it go, so whoever sees the
        # role idle may claim the lead at once.
        try:
            with contextlib.suppress(SessiongateError):
                await asyncio.to_thread(self._own.release_leader, lease)
        finally:
            self.lease = None

    # ------------------------------------------------------------------ the clock

    def _renewed(self, started: float) -> None:
        assert self._own is not None
        # A short TTL (tests, eager operators) keeps a deadline past the next heartbeat.
        margin = min(DEADLINE_MARGIN_SECONDS, self._own.ttl / 3)
        self._deadline = started + self._own.ttl - margin

    def _lose(self, why: str) -> None:
        if self.lease is not None and not self._lost.is_set():
            self.losses += 1
            log.warning("lost the lead", extra={"role": self.name, "reason": why})
        self._lost.set()

    def _heartbeat(self) -> float:
        assert self._own is not None
        return self._own.heartbeat_interval

    def _jitter(self) -> float:
        return self._rng.uniform(0.5, 1.5)

    def _retry_delay(self) -> float:
        return self._heartbeat() * self._jitter()
