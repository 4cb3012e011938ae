"""`plan_retention`: archived lanes go first, oldest first; kept lanes never go; each budget
stops removing once it is met."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sessiongate.core.retention import MIB, LaneUsage, RetentionPolicy, plan_retention

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def lane(key: str, days_old: float, *, archived: bool = False, mb: float = 1, kept=None):
    return LaneUsage(
        key, f"id-{key}", NOW - timedelta(days=days_old), archived, int(mb * MIB), kept
    )


LANES = [
    lane("new", 1),
    lane("old", 50),
    lane("older", 80),
    lane("arch-new", 2, archived=True),
    lane("arch-old", 40, archived=True),
    lane("pinned-ancient", 400, kept="pinned"),
    lane("busy-ancient", 300, kept="busy"),
]


def keys(plan):
    return [r.session_key for r in plan.removals]


def test_no_budget_removes_nothing():
    plan = plan_retention(LANES, RetentionPolicy(), now=NOW, disk_bytes=7 * MIB)
    assert plan.removals == ()


def test_max_sessions_takes_archived_lanes_first_then_the_oldest_idle_ones():
    plan = plan_retention(LANES, RetentionPolicy(max_sessions=3), now=NOW, disk_bytes=7 * MIB)
    assert keys(plan) == ["arch-old", "arch-new", "older", "old"]
    assert {r.reason for r in plan.removals} == {"max_sessions"}
    assert plan.sessions_after == 3
    assert plan.over_budget == ()


def test_max_age_removes_every_old_lane_but_the_kept_ones():
    plan = plan_retention(LANES, RetentionPolicy(max_age_days=30), now=NOW, disk_bytes=0)
    assert keys(plan) == ["arch-old", "older", "old"]
    assert {r.reason for r in plan.removals} == {"max_age_days"}


def test_max_disk_removes_until_the_estimate_is_under_budget():
    plan = plan_retention(LANES, RetentionPolicy(max_disk_mb=5.5), now=NOW, disk_bytes=7 * MIB)
    assert keys(plan) == ["arch-old", "arch-new"]
    assert plan.bytes_after == 5 * MIB


def test_a_budget_the_kept_lanes_exceed_is_reported():
    plan = plan_retention(LANES, RetentionPolicy(max_sessions=1), now=NOW, disk_bytes=0)
    assert "pinned-ancient" not in keys(plan)
    assert "busy-ancient" not in keys(plan)
    assert plan.over_budget == ("max_sessions",)
