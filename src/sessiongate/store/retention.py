"""Retention on the store: the candidates `core.retention.plan_retention` chooses from, and the
deletions that carry a plan out (`RetentionOps`, mixed into `SessionStore`).

A lane is kept whatever its age when it is pinned, protected (`protected_session_keys`),
busy (a turn accepted or running, inbound messages waiting, or live processes as the store's
`has_active_processes_fn` says), resume pending, or incognito. A removal deletes every
incarnation of the key with its search rows and archive blobs, and leaves a tombstone
(reason `expired`) so the key is not silently reused; each deletion is its own transaction
and re-checks the lane first, so a lane that became busy or was pinned meanwhile stays. After
the deletions the backend gives the freed pages back (SQLite's incremental vacuum).
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

from sessiongate.core.retention import LaneUsage, RetentionPlan, RetentionPolicy, plan_retention
from sessiongate.errors import StoreCorruptError, StoreUnavailableError
from sessiongate.store.changes import Change, ChangeKind
from sessiongate.store.records import to_us

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.retention import Removal
    from sessiongate.store.protocol import Backend, Tx

__all__ = ["RetentionOps", "policy_of"]

log = logging.getLogger(__name__)


def policy_of(config: GatewayConfig) -> RetentionPolicy:
    r = config.retention
    return RetentionPolicy(r.max_age_days, r.max_disk_mb, r.max_sessions)


class RetentionOps:
    _db: Backend
    clock: Clock
    config: GatewayConfig
    sessions_dir: Path
    _has_active_processes: Callable[[str], bool] | None

    if TYPE_CHECKING:  # provided by SessionStore

        def _mirror_dirty(self) -> None: ...

    def plan_retention(self, policy: RetentionPolicy | None = None) -> RetentionPlan:
        """What a retention pass would remove now (`policy`: the configured one by default);
        reads only."""
        policy = policy or policy_of(self.config)
        disk = self._db.disk_bytes()
        with self._db.read() as conn:
            entries = list(conn.iter_routes())
            sizes = conn.lane_sizes()
            busy = conn.busy_lanes()
        total = sum(sizes.get(e.session_key, 0) for e in entries)
        # Each lane's share of the file: its text and payload bytes, scaled so the shares
        # add up to what the database occupies (pages, indexes and the search index).
        scale = disk / total if total else 0.0
        lanes = [
            LaneUsage(
                e.session_key,
                e.session_id,
                e.updated_at,
                e.archived_at is not None,
                int(sizes.get(e.session_key, 0) * scale),
                self._why_kept(e, busy),
            )
            for e in entries
        ]
        return plan_retention(lanes, policy, now=self.clock.now(), disk_bytes=disk)

    def apply_retention(self, plan: RetentionPlan) -> list[Removal]:
        """Carry out `plan`'s removals (each re-checked in its own transaction); the ones
        done, each logged."""
        done: list[Removal] = []
        for removal in plan.removals:
            with self._db.transaction() as conn:
                entry = conn.get_route(removal.session_key)
                if entry is None or entry.session_id != removal.session_id:
                    continue
                if self._why_kept(entry, conn.busy_lanes()) is not None:
                    continue
                ids = _drop_lane(conn, entry, at=to_us(self.clock.now()))
            for session_id in ids:
                _unlink_blob(self.sessions_dir / "archive", session_id)
            done.append(removal)
            log.info(
                "retention removed %s (%s)",
                removal.session_key,
                removal.reason,
                extra={
                    "session_key": removal.session_key,
                    "session_id": removal.session_id,
                    "reason": removal.reason,
                    "archived": removal.archived,
                },
            )
        if done:
            self._mirror_dirty()
            self._db.give_back_space()
        return done

    def enforce_retention(self, policy: RetentionPolicy | None = None) -> list[Removal]:
        """Plan and apply in one call (housekeeping's pass); [] with no budget configured."""
        policy = policy or policy_of(self.config)
        if not policy.active:
            return []
        return self.apply_retention(self.plan_retention(policy))

    def _why_kept(self, entry: SessionEntry, busy: set[str]) -> str | None:
        key = entry.session_key
        if entry.pinned_at is not None:
            return "pinned"
        if key in self.config.protected_session_keys:
            return "protected"
        if entry.resume_pending:
            return "resume_pending"
        if entry.incognito:
            return "incognito"
        if key in busy or (self._has_active_processes and self._has_active_processes(key)):
            return "busy"
        return None


def _drop_lane(conn: Tx, entry: SessionEntry, *, at: int) -> list[str]:
    """Delete every incarnation of the lane, its search rows and route; a tombstone stays.
    The session ids deleted."""
    rows = conn.sessions_of_lane(entry.session_key, entry.session_id)
    for sid, _, _ in rows:
        try:
            conn.drop_session_from_search(sid)
        except (StoreCorruptError, StoreUnavailableError) as exc:
            conn.mark_search_stale(exc)
        conn.delete_session_rows(sid)
    conn.lower_search_cursor()
    conn.delete_route(entry.session_key)
    conn.note(Change(ChangeKind.SESSION_DELETED, entry.session_key, entry.session_id))
    conn.add_tombstone(entry.session_key, reason="expired", at=at)
    return [session_id for _, session_id, _ in rows]


def _unlink_blob(folder: Path, session_id: str) -> None:
    for name in (f"{session_id}.json.gz", f"{session_id}.sha256"):
        with contextlib.suppress(FileNotFoundError, OSError):
            (folder / name).unlink()
