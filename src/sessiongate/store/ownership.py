"""`Ownership`: one instance's leases on a shared database, and the fence around its writes.

DESIGN decision 12: a lane belongs to one instance at an epoch, and a turn's outcome commits
only while that ownership holds. `fenced(lease)` is the outer transaction of an outcome: its
first statement renews the lease at the lease's own epoch, and the `LaneStore` and
`SessionStore` calls inside it become savepoints of that one transaction, so either all of the
outcome commits under a lease still held, or `LeaseLostError` is raised and nothing does. A
lane's renewal fails the transaction itself, so its answer is not waited for on its own: the
error may come with a later statement or the commit. The renewal's row lock lasts to the
commit: a successor's takeover waits for it, then finds the lease unexpired and fails.
Timeouts only decide when a lane may be taken over.

The same holds for singular roles (`claim_leader`): a Telegram poller, a Discord socket, Slack
Socket Mode run on the one instance leading their role, and `hold_leader` before each platform
action keeps a paused leader from acting after its successor took over.

An instance that cannot reach the database stops claiming (`claim` answers None) and says so
once in the log; the local deadline (`may_act`) tells its workers when a lease may already
have moved, so no new agent call or send starts past it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.errors import LeaseLostError, StoreUnavailableError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sessiongate.store.protocol import LeaseBackend

__all__ = ["DEFAULT_HEARTBEAT_SECONDS", "DEFAULT_LEASE_TTL_SECONDS", "Lease", "Ownership"]

log = logging.getLogger(__name__)

DEFAULT_LEASE_TTL_SECONDS = 10.0
DEFAULT_HEARTBEAT_SECONDS = 2.0
# Workers stop starting agent calls and sends this long before the lease could expire: the
# database's clock and ours agree on a single host, not to the millisecond on several.
DEADLINE_MARGIN_SECONDS = 2.0
# A heartbeat this many intervals late gets the liveness probe (`reap_vanished`): a free lock
# is a process gone, and lateness only spares a live one a reconnect of its own connection.
LIVENESS_LATE = 0.5
# Not in the first this many seconds after the database server started: a restart ends every
# session, every liveness lock goes with them, and a free one then means a listener not
# connected again yet, not a process gone (the TTL decides meanwhile). A listener takes its
# lock again within about a second of the server's return (`postgres/wakeups.py`).
DEFAULT_RESTART_GRACE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Lease:
    """Ownership of a lane (`kind` "lane") or a singular role (`kind` "leader") at an epoch."""

    name: str
    owner: str
    epoch: int
    kind: str = "lane"


class Ownership:
    """The leases of one gateway instance (`instance_id`, one per process start)."""

    def __init__(
        self,
        backend: LeaseBackend,
        *,
        instance_id: str | None = None,
        ttl: float = DEFAULT_LEASE_TTL_SECONDS,
        heartbeat: float = DEFAULT_HEARTBEAT_SECONDS,
        restart_grace: float = DEFAULT_RESTART_GRACE_SECONDS,
    ) -> None:
        if heartbeat * 2 > ttl:
            raise ValueError("the heartbeat must be at most half the lease TTL")
        self._backend = backend
        self.instance_id = instance_id or uuid.uuid4().hex
        self.ttl = ttl
        self.heartbeat_interval = heartbeat
        self.restart_grace = restart_grace
        self.connected = True
        self.fenced_commits = 0
        # Short TTLs (tests, tight failover) keep three quarters of the lease to act in.
        self._margin = min(DEADLINE_MARGIN_SECONDS, ttl / 4)
        self._deadline = 0.0
        self._started = False

    # ------------------------------------------------------------------ the instance

    def start(self) -> None:
        with self._backend.transaction() as tx:
            tx.register_instance(self.instance_id, socket.gethostname(), os.getpid())
        self._started = True
        self._deadline = time.monotonic() + self.ttl - self._margin

    def heartbeat(self) -> int:
        """Renew the instance and its leases (every `heartbeat_interval`); returns how many
        leases it holds. Raises `LeaseLostError` once the others declared it dead."""
        started = time.monotonic()
        try:
            with self._backend.transaction() as tx:
                held = tx.heartbeat(self.instance_id, self.ttl)
        except StoreUnavailableError as exc:
            if self.connected:
                log.error(
                    "lost the database: not claiming lanes until it is back",
                    extra={"instance": self.instance_id, "error": str(exc)},
                )
            self.connected = False
            return 0
        if not self.connected:
            log.warning(
                "the database is back: claiming again", extra={"instance": self.instance_id}
            )
        self.connected = True
        if held < 0:
            raise LeaseLostError(
                f"instance {self.instance_id} was declared dead; its leases have moved on"
            )
        self._deadline = started + self.ttl - self._margin
        return held

    def may_act(self) -> bool:
        """Whether a lease renewed at the last heartbeat can still be ours (local clock)."""
        return self.connected and time.monotonic() < self._deadline

    def stop(self) -> None:
        """A clean stop: the leases expire now, so successors need not wait out the TTL."""
        if self._started:
            with contextlib.suppress(StoreUnavailableError), self._backend.transaction() as tx:
                tx.stop_instance(self.instance_id)
            self._started = False

    def reap(self, stale_after: float | None = None) -> list[str]:
        """Declare instances silent for `stale_after` seconds (default: the TTL) dead and
        expire their leases; the ids reaped."""
        with self._backend.transaction() as tx:
            return tx.mark_dead(self.ttl if stale_after is None else stale_after)

    def reap_vanished(self) -> list[str]:
        """Declare dead at once the instances whose heartbeat is late and whose process is
        gone (its liveness lock is free): a SIGKILL moves lanes on within about a heartbeat,
        not a TTL. A paused or partitioned process keeps its lock, so the TTL decides there."""
        if not self.connected:
            return []
        late = self.heartbeat_interval * LIVENESS_LATE
        try:
            with self._backend.transaction() as tx:
                return tx.reap_vanished(self.instance_id, late, self.restart_grace)
        except StoreUnavailableError:
            return []

    def instances(self) -> list[dict[str, Any]]:
        with self._backend.transaction() as tx:
            return tx.list_instances()

    # ------------------------------------------------------------------ lanes

    def claim(self, session_key: str) -> Lease | None:
        """Take a free or expired lane (its epoch rises); None if another instance holds it
        or the database is unreachable. A lane this instance owns already is taken again at
        a new epoch: callers claim only what they do not know they hold, so that is a claim
        whose answer was lost with the connection."""
        if not self.connected:
            return None
        try:
            # Each of the claim's statements stands alone (`postgres/leases.py`).
            with self._backend.read() as tx:
                epoch = tx.claim_lane(session_key, self.instance_id, self.ttl)
        except StoreUnavailableError:
            self.connected = False
            return None
        return None if epoch is None else Lease(session_key, self.instance_id, epoch)

    @contextlib.contextmanager
    def fenced(self, lease: Lease, *, lock_lane: bool = False) -> Iterator[None]:
        """One transaction that commits only while `lease` holds at its epoch; with
        `lock_lane`, it also holds the lane's writer lock (as accepts do), so what it reads of
        the lane's waiting rows cannot change under it."""
        try:
            # No savepoints: nothing inside a fence goes on after a failed call (`transaction`).
            with self._backend.transaction(savepoints=False) as tx:
                if lease.kind != "leader":
                    tx.fence_lane(lease.name, lease.owner, lease.epoch, self.ttl)
                elif not tx.hold_leader(lease.name, lease.owner, lease.epoch, self.ttl):
                    raise LeaseLostError(
                        f"{lease.name!r} is no longer led by {lease.owner} at epoch {lease.epoch}"
                    )
                if lock_lane:
                    tx.lock_lane(lease.name)
                yield
        except LeaseLostError:
            self.fenced_commits += 1
            log.warning(
                "write fenced: the lease moved on",
                extra={"lease": lease.name, "epoch": lease.epoch},
            )
            raise

    def wanting_owner(self, limit: int = 16) -> list[str]:
        """Lanes with work and no live owner, or owned here: the sweep's ground truth."""
        if not self.connected:
            return []
        try:
            with self._backend.read() as tx:
                return tx.lanes_wanting_owner(self.instance_id, limit)
        except StoreUnavailableError:
            self.connected = False
            return []

    def in_flight(self, lease: Lease) -> list[int]:
        """The turns of the lane `lease` holds that an earlier owner may have left unfinished
        (whatever is done with them commits under the fence, so a read without it is enough)."""
        with self._backend.read() as tx:
            return tx.lane_in_flight(lease.name)

    def nudge(self, session_key: str) -> bool:
        """Hint the lane's live owner (another instance) that work waits; False if none."""
        with self._backend.transaction() as tx:
            return tx.nudge_lane_owner(session_key, self.instance_id)

    def rejoin(self) -> None:
        """Come back under a new id after the others declared this instance dead: nothing it
        held is its own any more, and its old id stays dead."""
        self.instance_id = uuid.uuid4().hex
        self.start()

    def release(self, lease: Lease) -> bool:
        """Give an idle lane up; refused (False) while anything waits on it, so a message
        accepted meanwhile is never left without an owner."""
        with self._backend.transaction() as tx:
            return tx.release_lane(lease.name, lease.owner, lease.epoch)

    # ------------------------------------------------------------------ singular roles

    def claim_leader(self, name: str) -> Lease | None:
        """Lead `name` (e.g. "telegram:poller"), or renew the lead this instance has; None
        while another live instance leads it."""
        if not self.connected:
            return None
        with self._backend.transaction() as tx:
            epoch = tx.claim_leader(name, self.instance_id, self.ttl)
        return None if epoch is None else Lease(name, self.instance_id, epoch, kind="leader")

    def hold_leader(self, lease: Lease) -> bool:
        """Renew a lead at its own epoch; False once it expired or a successor took it (the
        check before each action of a singular connection)."""
        with self._backend.transaction() as tx:
            return tx.hold_leader(lease.name, lease.owner, lease.epoch, self.ttl)

    def release_leader(self, lease: Lease) -> bool:
        with self._backend.transaction() as tx:
            return tx.release_leader(lease.name, lease.owner, lease.epoch)
