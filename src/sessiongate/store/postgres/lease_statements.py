"""The `LeaseTx` statements of `PostgresTx`: each binds its function in `leases.py` (which
states the rules) to the transaction's connection.
"""

from __future__ import annotations

from typing import Any

from sessiongate.store.postgres import leases
from sessiongate.store.postgres._tx_base import TxBase

__all__ = ["PostgresLeases"]


class PostgresLeases(TxBase):
    """Instances, lane leases and leader leases of `PostgresTx`."""

    __slots__ = ()

    def register_instance(self, instance_id: str, host: str, pid: int) -> None:
        leases.register_instance(self.conn, instance_id, host, pid)

    def heartbeat(self, instance_id: str, ttl: float) -> int:
        return leases.heartbeat(self.conn, instance_id, ttl)

    def stop_instance(self, instance_id: str) -> None:
        leases.stop_instance(self.conn, instance_id)

    def mark_dead(self, stale_after: float) -> list[str]:
        return leases.mark_dead(self.conn, stale_after)

    def list_instances(self) -> list[dict[str, Any]]:
        return leases.list_instances(self.conn)

    def claim_lane(self, key: str, owner: str, ttl: float) -> int | None:
        return leases.claim_lane(self.conn, key, owner, ttl)

    def fence_lane(self, key: str, owner: str, epoch: int, ttl: float) -> None:
        leases.fence_lane(self._sure or self.conn, key, owner, epoch, ttl)

    def release_lane(self, key: str, owner: str, epoch: int) -> bool:
        return leases.release_lane(self.conn, key, owner, epoch)

    def lanes_wanting_owner(self, owner: str, limit: int) -> list[str]:
        return leases.lanes_wanting_owner(self.conn, owner, limit)

    def lane_in_flight(self, key: str) -> list[int]:
        return leases.lane_in_flight(self.conn, key)

    def nudge_lane_owner(self, key: str, me: str) -> bool:
        return leases.nudge_lane_owner(self.conn, key, me)

    def reap_vanished(self, me: str, late: float, grace: float) -> list[str]:
        return leases.reap_vanished(self.conn, me, late, grace)

    def claim_leader(self, name: str, owner: str, ttl: float) -> int | None:
        return leases.claim_leader(self.conn, name, owner, ttl)

    def hold_leader(self, name: str, owner: str, epoch: int, ttl: float) -> bool:
        return leases.hold_leader(self.conn, name, owner, epoch, ttl)

    def release_leader(self, name: str, owner: str, epoch: int) -> bool:
        return leases.release_leader(self.conn, name, owner, epoch)
