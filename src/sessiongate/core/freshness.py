"""Reset policies: when a conversation lane goes stale (DESIGN decision 7).

Policies are off by default (`mode: none`); `daily` resets on the first message after the local
`at_hour:00` boundary, `idle` after `idle_minutes` without a real interaction, `both` whichever
expires first. Freshness is judged lazily, on the next inbound message, from two anchors:
`session_started_at` (daily) and `last_interaction_at` (idle). `updated_at` is never an anchor.

System events (heartbeat, cron wake-ups, exec notifications, gateway bookkeeping) never extend
freshness: callers must not move `last_interaction_at` for a kind where `is_system_event` is
true. Otherwise a heartbeat every few minutes keeps an idle session alive for ever.
"""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sessiongate.core.clock import ensure_utc
from sessiongate.core.config import ResetRule
from sessiongate.core.source import ChatType

if TYPE_CHECKING:
    from sessiongate.core.config import ResetPolicyConfig

__all__ = [
    "SYSTEM_EVENT_KINDS",
    "evaluate_freshness",
    "is_system_event",
    "next_reset_at",
    "resolve_rule",
    "resolve_timezone",
]

SYSTEM_EVENT_KINDS = frozenset({"heartbeat", "cron", "exec", "system", "webhook"})
_RULE_FIELDS = ("mode", "at_hour", "idle_minutes")


def is_system_event(kind: str | None) -> bool:
    """True for event kinds that may touch a session row but never extend its freshness."""
    return kind is not None and kind.strip().lower() in SYSTEM_EVENT_KINDS


def resolve_timezone(name: str) -> ZoneInfo:
    """The IANA zone `name`; `ValueError` when there is no such zone."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone: {name!r}") from None


def resolve_rule(
    policy: ResetPolicyConfig, *, platform: str, chat_type: ChatType | str, is_thread: bool
) -> ResetRule:
    """The effective rule for one lane: channel override > type override > default.

    An override sets only the fields it names (`model_fields_set`); the rest come from the
    level below, so `by_channel: {discord: {idle_minutes: 30}}` keeps the default mode. Types
    are `direct` (DMs), `thread` (a thread, or the thread chat type) and `group` (groups and
    channels). Raises `ValueError` for an unknown `policy.timezone`.
    """
    resolve_timezone(policy.timezone)
    kind = ChatType.parse(chat_type)
    type_key: Literal["direct", "group", "thread"]
    if is_thread or kind is ChatType.THREAD:
        type_key = "thread"
    elif kind is ChatType.DM:
        type_key = "direct"
    else:
        type_key = "group"
    values = {name: getattr(policy, name) for name in _RULE_FIELDS}
    for override in (policy.by_type.get(type_key), policy.by_channel.get(platform.lower())):
        if override is not None:
            values.update({n: getattr(override, n) for n in override.model_fields_set})
    return ResetRule(**values)


def evaluate_freshness(
    rule: ResetRule,
    *,
    timezone: str,
    session_started_at: datetime | None,
    last_interaction_at: datetime | None,
    now: datetime,
) -> str | None:
    """`"daily"` or `"idle"` when the lane is stale at `now`, else None.

    Daily: stale once `now` reaches the first local `at_hour:00` after `session_started_at`.
    Idle: stale once `now - last_interaction_at >= idle_minutes`. Both: the one that expired
    earlier is reported (daily on a tie). A missing anchor never makes a lane stale.
    """
    expiries = _expiries(
        rule,
        timezone=timezone,
        session_started_at=session_started_at,
        last_interaction_at=last_interaction_at,
    )
    now = ensure_utc(now)
    expired = [(when, reason) for reason, when in expiries if when <= now]
    return min(expired)[1] if expired else None


def next_reset_at(
    rule: ResetRule,
    *,
    timezone: str,
    session_started_at: datetime | None,
    last_interaction_at: datetime | None,
) -> datetime | None:
    """The earliest moment (aware UTC) the lane becomes stale; None when it never will."""
    expiries = _expiries(
        rule,
        timezone=timezone,
        session_started_at=session_started_at,
        last_interaction_at=last_interaction_at,
    )
    return min(when for _, when in expiries) if expiries else None


def _expiries(
    rule: ResetRule,
    *,
    timezone: str,
    session_started_at: datetime | None,
    last_interaction_at: datetime | None,
) -> list[tuple[str, datetime]]:
    zone = resolve_timezone(timezone)
    out: list[tuple[str, datetime]] = []
    # "daily" sorts before "idle", so `min` reports daily on a tie.
    if rule.mode in ("daily", "both") and session_started_at is not None:
        out.append(("daily", _next_boundary(ensure_utc(session_started_at), rule.at_hour, zone)))
    if rule.mode in ("idle", "both") and last_interaction_at is not None:
        out.append(("idle", ensure_utc(last_interaction_at) + timedelta(minutes=rule.idle_minutes)))
    return out


def _next_boundary(after: datetime, hour: int, zone: ZoneInfo) -> datetime:
    """The first local `hour:00` strictly after `after`, as aware UTC."""
    day = after.astimezone(zone).date()
    # Today's boundary if it is still ahead, else tomorrow's: the day is the local one.
    for offset in (0, 1):
        # A naive wall-clock time on purpose: the zone is applied by `_wall_to_utc`.
        wall = datetime.combine(day + timedelta(days=offset), time(hour))
        boundary = _wall_to_utc(wall, zone)
        if boundary > after:
            return boundary
    raise AssertionError("unreachable: a local day always has a boundary")  # pragma: no cover


def _wall_to_utc(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant the local clock reads `wall`, DST-correct.

    Ambiguous (a fall-back repeat): the first occurrence, so a day has one boundary. Nonexistent
    (a spring-forward gap): the first valid instant after it, which is the transition itself.
    """
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # In a gap, fold=0 applies the old offset and lands at or after the transition, fold=1 the
    # new one and lands before it; bisect between them on whole seconds for the transition.
    lo = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    lo, hi = min(lo, first), max(lo, first)
    while (hi - lo) > timedelta(seconds=1):
        mid = lo + timedelta(seconds=(hi - lo).total_seconds() // 2)
        if mid.astimezone(zone).replace(tzinfo=None) >= wall:
            hi = mid
        else:
            lo = mid
    return hi
