"""Which sessions a retention budget removes, as one pure function (`plan_retention`).

Housekeeping and `sessiongate sessions prune --dry-run` both call it on the same candidates,
so the plan a dry run prints is the one a pass carries out. Order: archived lanes first,
oldest first, then the other idle lanes, oldest first; a pinned, protected, busy (a turn
running or messages waiting) or resume-pending lane is never a candidate. A lane is removed
when it is older than `max_age_days`, or while the store holds more than `max_sessions`
lanes, or while its estimated size is over `max_disk_mb`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

__all__ = ["LaneUsage", "Removal", "RetentionPlan", "RetentionPolicy", "plan_retention"]

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    max_age_days: int | None = None
    max_disk_mb: float | None = None
    max_sessions: int | None = None

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.max_age_days, self.max_disk_mb, self.max_sessions))


@dataclass(frozen=True, slots=True)
class LaneUsage:
    """One lane as the planner sees it; `bytes` is its estimated share of the disk."""

    session_key: str
    session_id: str
    updated_at: datetime
    archived: bool
    bytes: int
    # Never removed: pinned, protected, busy or resume pending (`why_kept` says which).
    why_kept: str | None = None


@dataclass(frozen=True, slots=True)
class Removal:
    session_key: str
    session_id: str
    reason: str  # "max_age_days" | "max_sessions" | "max_disk_mb"
    archived: bool
    updated_at: datetime
    bytes: int


@dataclass(frozen=True, slots=True)
class RetentionPlan:
    removals: tuple[Removal, ...]
    sessions_before: int
    sessions_after: int
    bytes_before: int
    bytes_after: int
    # Budgets still exceeded after every candidate was considered (what is kept blocks them).
    over_budget: tuple[str, ...] = ()


def plan_retention(
    lanes: Iterable[LaneUsage], policy: RetentionPolicy, *, now: datetime, disk_bytes: int
) -> RetentionPlan:
    """The lanes to remove, in order, with the reason each goes. `disk_bytes` is what the
    store occupies now; each removal is assumed to give back its lane's `bytes`."""
    all_lanes = list(lanes)
    count = len(all_lanes)
    used = disk_bytes
    cutoff = None if policy.max_age_days is None else now - timedelta(days=policy.max_age_days)
    budget = None if policy.max_disk_mb is None else int(policy.max_disk_mb * MIB)
    candidates = sorted(
        (lane for lane in all_lanes if lane.why_kept is None),
        key=lambda lane: (not lane.archived, lane.updated_at, lane.session_key),
    )
    removals: list[Removal] = []
    for lane in candidates:
        reason = None
        if cutoff is not None and lane.updated_at < cutoff:
            reason = "max_age_days"
        elif policy.max_sessions is not None and count > policy.max_sessions:
            reason = "max_sessions"
        elif budget is not None and used > budget:
            reason = "max_disk_mb"
        if reason is None:
            continue
        removals.append(
            Removal(
                lane.session_key,
                lane.session_id,
                reason,
                lane.archived,
                lane.updated_at,
                lane.bytes,
            )
        )
        count -= 1
        used = max(0, used - lane.bytes)
    over: list[str] = []
    if policy.max_sessions is not None and count > policy.max_sessions:
        over.append("max_sessions")
    if budget is not None and used > budget:
        over.append("max_disk_mb")
    return RetentionPlan(tuple(removals), len(all_lanes), count, disk_bytes, used, tuple(over))
