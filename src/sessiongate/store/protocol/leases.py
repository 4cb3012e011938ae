"""What several instances sharing one database (PostgreSQL) ask of it: instances, lane
leases, the lane fence and leader leases (`postgres/leases.py` states the rules). SQLite is
one instance's own and implements none of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from sessiongate.store.protocol.tx import Tx

if TYPE_CHECKING:
    import contextlib

__all__ = ["LeaseBackend", "LeaseTx"]


class LeaseTx(Tx, Protocol):
    """The statements of many instances on one database (`postgres/leases.py` states the
    rules); times are the database's clock, TTLs in seconds."""

    def register_instance(self, instance_id: str, host: str, pid: int) -> None:
        """Record a starting instance as alive; `ConflictError` when its id is taken."""
        ...

    def heartbeat(self, instance_id: str, ttl: float) -> int:
        """Renew the instance and every lease it still holds for `ttl`; how many leases. A
        dead or stopped instance renews nothing (-1): it must stop claiming and say so."""
        ...

    def stop_instance(self, instance_id: str) -> None:
        """A clean stop: every lease it holds expires now, so successors need not wait."""
        ...

    def mark_dead(self, stale_after: float) -> list[str]:
        """Instances whose heartbeat is older than `stale_after` seconds become dead and their
        leases expire now (a takeover still raises each epoch); their ids."""
        ...

    def list_instances(self) -> list[dict[str, Any]]:
        """Every instance: id, host, pid, start and heartbeat times (microseconds), state,
        heartbeat age in seconds, how many lanes it holds and what it leads."""
        ...

    def claim_lane(self, key: str, owner: str, ttl: float) -> int | None:
        """Take the lane's lease for `ttl` when it is free, expired or already `owner`'s: the
        lease's new epoch; None when another live instance holds it."""
        ...

    def fence_lane(self, key: str, owner: str, epoch: int, ttl: float) -> None:
        """Renew the lane's lease at `epoch` as the transaction's first statement, or fail the
        transaction with `LeaseLostError`: here, at a later statement, or at the commit (the
        renewal's answer is not waited for before the next statements are sent)."""
        ...

    def release_lane(self, key: str, owner: str, epoch: int) -> bool:
        """Give up the lane's lease held at `epoch`, only when nothing is pending on the lane;
        whether it was given up."""
        ...

    def lanes_wanting_owner(self, owner: str, limit: int) -> list[str]:
        """Up to `limit` lanes with work (a pending row, an accepted or running turn) and no
        live owner, or owned by `owner`, in random order."""
        ...

    def lane_in_flight(self, key: str) -> list[int]:
        """The lane's turns a crash or a lost lease can leave unfinished (accepted, running,
        replied), oldest first."""
        ...

    def nudge_lane_owner(self, key: str, me: str) -> bool:
        """Tell the lane's live owner, when it is another instance than `me`, that work
        waits (a notification sent at commit); whether there was one to tell."""
        ...

    def reap_vanished(self, me: str, late: float, grace: float) -> list[str]:
        """Instances with a heartbeat `late` seconds old whose process is gone become dead
        and their leases expire now; none in the first `grace` seconds after the server
        started. Their ids."""
        ...

    def claim_leader(self, name: str, owner: str, ttl: float) -> int | None:
        """Renew `owner`'s leadership of `name` at the same epoch, or take a free or expired
        one at the next epoch; the epoch, or None when another live owner leads."""
        ...

    def hold_leader(self, name: str, owner: str, epoch: int, ttl: float) -> bool:
        """Renew the leadership held at `epoch` for `ttl`; False when it was lost."""
        ...

    def release_leader(self, name: str, owner: str, epoch: int) -> bool:
        """Give up the leadership held at `epoch`; whether it was held."""
        ...


class LeaseBackend(Protocol):
    """A backend several instances can share (PostgreSQL); SQLite is one instance's own."""

    url: str

    def transaction(self, *, savepoints: bool = True) -> contextlib.AbstractContextManager[LeaseTx]:
        """With `savepoints=False` nested calls make none (except `savepoint()`), and one
        that fails dooms the transaction: for the fence, whose callers never go on after a
        failed call inside it."""
        ...

    def read(self) -> contextlib.AbstractContextManager[LeaseTx]:
        """Statements outside a transaction, each committed on its own: for a lease statement
        that needs no transaction around it (it saves the `BEGIN` and `COMMIT` round trips)."""
        ...
