"""`InstancePresence`: this gateway instance as the other instances on a shared database see it.

On PostgreSQL the runner registers itself at start, renews its heartbeat and its leases every
`store.heartbeat_seconds`, reaps instances silent for longer than the lease TTL (their leases
expire at once; a takeover still raises each epoch), and frees its own leases at a clean stop.
An instance that loses the database says so once and stops claiming until it is back (the
`Ownership` it holds answers None). On SQLite there is one instance by construction and
`instances()` describes just this process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import TYPE_CHECKING, Any

from sessiongate.errors import LeaseLostError, SessiongateError, StoreUnavailableError

if TYPE_CHECKING:
    from collections.abc import Callable

    from sessiongate.core.config import GatewayConfig
    from sessiongate.store.ownership import Ownership
    from sessiongate.store.session_store import SessionStore

__all__ = ["InstancePresence"]

log = logging.getLogger(__name__)


class InstancePresence:
    def __init__(self, store: SessionStore, config: GatewayConfig) -> None:
        self.ownership: Ownership | None = store.open_ownership(config)
        self.heartbeats = 0
        self.failures = 0
        self.rejoins = 0
        self.lost = False
        # Told the new id after a rejoin (the runner forgets its leases, listens again).
        self.on_rejoin: Callable[[str], None] | None = None

    async def start(self) -> None:
        if self.ownership is not None:
            await asyncio.to_thread(self.ownership.start)
            log.info("instance registered", extra={"instance": self.ownership.instance_id})

    async def run(self, stop: asyncio.Event) -> None:
        """Heartbeat (and reap the silent) until `stop` is set."""
        own = self.ownership
        if own is None:
            return
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), own.heartbeat_interval)
            except TimeoutError:
                pass
            else:
                return
            try:
                await asyncio.to_thread(own.heartbeat)
                self.heartbeats += 1
                if own.connected:
                    await asyncio.to_thread(own.reap)
            except LeaseLostError:
                # Declared dead by the others (a long pause): what it held has moved on. It
                # comes back under a new id, so it can own lanes again.
                log.error("this instance was declared dead; it holds no leases and rejoins")
                try:
                    await asyncio.to_thread(own.rejoin)
                except SessiongateError:
                    self.lost = True
                    log.exception("rejoin failed; this instance claims nothing more")
                    return
                self.rejoins += 1
                if self.on_rejoin is not None:
                    self.on_rejoin(own.instance_id)
            except StoreUnavailableError as exc:
                # The heartbeat itself says so once (`Ownership.heartbeat`); the reap after it
                # can still meet the outage's start.
                self.failures += 1
                log.warning("instance heartbeat failed", extra={"error": str(exc)})
            except SessiongateError:
                self.failures += 1
                log.exception("instance heartbeat failed")

    async def stop(self) -> None:
        if self.ownership is not None:
            await asyncio.to_thread(self.ownership.stop)

    def statistics(self) -> dict[str, Any]:
        own = self.ownership
        return {
            "instance_heartbeats": self.heartbeats,
            "instance_heartbeat_failures": self.failures,
            "database_connected": own is None or (own.connected and not self.lost),
            "fenced_commits": 0 if own is None else own.fenced_commits,
        }

    def instances(self, *, lanes: int) -> list[dict[str, Any]]:
        """Every instance on the database, with its heartbeat age and lane count."""
        if self.ownership is None:
            return [
                {
                    "instance_id": "local",
                    "host": socket.gethostname(),
                    "pid": os.getpid(),
                    "state": "live",
                    "heartbeat_age_s": 0.0,
                    "lanes": lanes,
                    "leader_of": [],
                    "this": True,
                }
            ]
        mine = self.ownership.instance_id
        return [{**i, "this": i["instance_id"] == mine} for i in self.ownership.instances()]
