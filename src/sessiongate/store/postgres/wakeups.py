"""One instance's own connection: its liveness lock, and its wake-up hints.

The liveness lock (`leases.hold_liveness`) is a session advisory lock on the instance's id:
the kernel closes this socket when the process dies, the server drops the lock, and the
others' probe (`leases.reap_vanished`) sees the process gone within about a heartbeat instead
of a lease TTL. A paused or cut-off process keeps it, and there the TTL decides.

Wake-up hints: `LISTEN sg_<instance id>`. Another instance that accepted a message for a
lane this one owns sends `pg_notify` with the lane's key (`leases.nudge_lane_owner`), and
`on_key` is called with it from this listener's thread. A hint only: a notify sent while
this connection was down is gone, and the sweep finds that lane anyway. The connection is
direct, never through a pooler in transaction mode (which cannot LISTEN); `store.poll_only`
turns the hints off (the lock stays).
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import psycopg

from sessiongate.store.postgres import leases
from sessiongate.store.postgres._link import with_link_checks

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Wakeups"]

log = logging.getLogger(__name__)

# How often the listener looks up from the socket (a new channel, a stop); never a delay of a
# hint, which arrives the moment it is sent.
_POLL_SECONDS = 0.5
# Reconnects back off from the first to the last: after a server restart the liveness lock
# is taken again within about a second of the server's return (the others' probe waits for
# it, `Ownership.restart_grace`).
_RETRY_FIRST_SECONDS = 0.1
_RETRY_SECONDS = 1.0


class Wakeups:
    def __init__(self, url: str, on_key: Callable[[str], None], *, hints: bool = True) -> None:
        self._url = url
        self._on_key = on_key
        self._hints = hints
        self._instance: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def listen(self, instance_id: str) -> None:
        """Listen for `instance_id` (again after a rejoin under a new id)."""
        self._instance = instance_id
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="sg-wakeups", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * _POLL_SECONDS + 1)

    def _run(self) -> None:
        failed = False
        delay = _RETRY_FIRST_SECONDS
        while not self._stop.is_set():
            try:
                with psycopg.connect(
                    with_link_checks(self._url), autocommit=True, connect_timeout=5
                ) as conn:
                    if failed:
                        log.info("wake-up hints are back")
                    failed = False
                    delay = _RETRY_FIRST_SECONDS
                    self._serve(conn)
            except psycopg.Error as exc:
                if not failed:
                    log.warning("wake-up hints lost; the sweep goes on", extra={"error": str(exc)})
                failed = True
                self._stop.wait(delay)
                delay = min(delay * 2, _RETRY_SECONDS)

    def _serve(self, conn: psycopg.Connection[Any]) -> None:
        current: str | None = None
        while not self._stop.is_set():
            instance = self._instance
            if instance != current and instance is not None:
                if current is not None:
                    leases.drop_liveness(conn, current)
                    if self._hints:
                        conn.execute(f'UNLISTEN "sg_{current}"')
                if self._hints:
                    conn.execute(f'LISTEN "sg_{instance}"')
                # Last: `probe_ready` then also says the hints are heard.
                leases.hold_liveness(conn, instance)
                current = instance
            if not self._hints:
                self._stop.wait(_POLL_SECONDS)
                continue
            for note in conn.notifies(timeout=_POLL_SECONDS):
                self._on_key(note.payload)
