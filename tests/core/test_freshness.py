from datetime import UTC, datetime, timedelta

import pytest

from sessiongate.core.clock import FakeClock
from sessiongate.core.config import ResetPolicyConfig, ResetRule
from sessiongate.core.freshness import (
    SYSTEM_EVENT_KINDS,
    evaluate_freshness,
    is_system_event,
    next_reset_at,
    resolve_rule,
    resolve_timezone,
)
from sessiongate.core.source import ChatType


def utc(year, month, day, hour=0, minute=0, second=0):
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def fresh(rule, *, tz="UTC", started=None, last=None, now):
    return evaluate_freshness(
        rule, timezone=tz, session_started_at=started, last_interaction_at=last, now=now
    )


# --- resolve_rule ---------------------------------------------------------------------------


def test_default_policy_never_resets():
    rule = resolve_rule(ResetPolicyConfig(), platform="telegram", chat_type="dm", is_thread=False)
    assert rule.mode == "none"
    assert fresh(rule, started=utc(2000, 1, 1), last=utc(2000, 1, 1), now=utc(2026, 1, 1)) is None


@pytest.mark.parametrize(
    ("chat_type", "is_thread", "expected"),
    [
        (ChatType.DM, False, "daily"),
        (ChatType.GROUP, False, "idle"),
        (ChatType.CHANNEL, False, "idle"),
        (ChatType.GROUP, True, "both"),
        (ChatType.THREAD, False, "both"),
        ("dm", True, "both"),
    ],
)
def test_type_overrides_pick_direct_group_or_thread(chat_type, is_thread, expected):
    policy = ResetPolicyConfig(
        by_type={
            "direct": ResetRule(mode="daily"),
            "group": ResetRule(mode="idle"),
            "thread": ResetRule(mode="both"),
        }
    )
    rule = resolve_rule(policy, platform="slack", chat_type=chat_type, is_thread=is_thread)
    assert rule.mode == expected


def test_channel_override_wins_over_type_override_which_wins_over_default():
    policy = ResetPolicyConfig(
        mode="daily",
        at_hour=5,
        by_type={"group": ResetRule(mode="idle", idle_minutes=30)},
        by_channel={"discord": ResetRule(mode="none")},
    )
    discord = resolve_rule(policy, platform="discord", chat_type="group", is_thread=False)
    slack = resolve_rule(policy, platform="slack", chat_type="group", is_thread=False)
    dm = resolve_rule(policy, platform="slack", chat_type="dm", is_thread=False)
    assert discord.mode == "none"
    assert (slack.mode, slack.idle_minutes) == ("idle", 30)
    assert (dm.mode, dm.at_hour) == ("daily", 5)


def test_an_override_only_replaces_the_fields_it_names():
    policy = ResetPolicyConfig.model_validate(
        {"mode": "both", "at_hour": 6, "by_channel": {"discord": {"idle_minutes": 15}}}
    )
    rule = resolve_rule(policy, platform="Discord", chat_type="group", is_thread=False)
    assert (rule.mode, rule.at_hour, rule.idle_minutes) == ("both", 6, 15)


def test_config_clamps_hour_and_idle_minutes():
    rule = ResetRule(mode="both", at_hour=30, idle_minutes=0)
    assert (rule.at_hour, rule.idle_minutes) == (23, 1)
    assert ResetRule(at_hour=-3).at_hour == 0


def test_unknown_timezone_is_refused_by_the_config_and_at_resolve_time():
    with pytest.raises(ValueError, match="unknown timezone"):
        ResetPolicyConfig(mode="daily", timezone="Mars/Olympus_Mons")
    # A policy built without validation still fails clearly where the zone is used.
    policy = ResetPolicyConfig.model_construct(mode="daily", timezone="Mars/Olympus_Mons")
    with pytest.raises(ValueError, match="unknown timezone"):
        resolve_rule(policy, platform="telegram", chat_type="dm", is_thread=False)
    with pytest.raises(ValueError, match="unknown timezone"):
        resolve_timezone("../../etc/passwd")
    with pytest.raises(ValueError, match="unknown timezone"):
        fresh(
            ResetRule(mode="daily"), tz="Nowhere/City", started=utc(2026, 1, 1), now=utc(2026, 1, 2)
        )


# --- idle ---------------------------------------------------------------------------------


def test_idle_expires_exactly_at_idle_minutes():
    clock = FakeClock(utc(2026, 5, 1, 12))
    rule = ResetRule(mode="idle", idle_minutes=30)
    last = clock.now()
    clock.advance(30 * 60 - 1)
    assert fresh(rule, last=last, now=clock.now()) is None
    clock.advance(1)
    assert fresh(rule, last=last, now=clock.now()) == "idle"


def test_missing_anchors_are_never_stale():
    for mode in ("daily", "idle", "both"):
        assert fresh(ResetRule(mode=mode), now=utc(2030, 1, 1)) is None


def test_system_events_do_not_extend_idle_freshness():
    clock = FakeClock(utc(2026, 5, 1, 12))
    rule = ResetRule(mode="idle", idle_minutes=60)
    last_interaction = clock.now()
    for kind in ["heartbeat", "cron", "exec", "system", "heartbeat"]:
        clock.advance(20 * 60)
        if not is_system_event(kind):
            last_interaction = clock.now()
    assert fresh(rule, last=last_interaction, now=clock.now()) == "idle"


def test_is_system_event():
    assert {"heartbeat", "cron", "exec", "system", "webhook"} == SYSTEM_EVENT_KINDS
    assert is_system_event("Heartbeat")
    assert not is_system_event("user")
    assert not is_system_event(None)


# --- daily --------------------------------------------------------------------------------


def test_daily_resets_after_the_local_hour_boundary_in_utc():
    rule = ResetRule(mode="daily", at_hour=4)
    started = utc(2026, 5, 1, 10)
    assert fresh(rule, started=started, now=utc(2026, 5, 2, 3, 59, 59)) is None
    assert fresh(rule, started=started, now=utc(2026, 5, 2, 4)) == "daily"


def test_a_session_started_exactly_on_the_boundary_is_fresh_until_the_next_one():
    rule = ResetRule(mode="daily", at_hour=4)
    started = utc(2026, 5, 1, 4)
    assert fresh(rule, started=started, now=utc(2026, 5, 2, 3, 59)) is None
    assert fresh(rule, started=started, now=utc(2026, 5, 2, 4)) == "daily"


def test_a_session_started_before_todays_hour_resets_at_todays_hour():
    rule = ResetRule(mode="daily", at_hour=4)
    started = utc(2026, 5, 1, 1)
    assert fresh(rule, started=started, now=utc(2026, 5, 1, 3, 59)) is None
    assert fresh(rule, started=started, now=utc(2026, 5, 1, 4)) == "daily"


def test_daily_uses_local_hour_across_berlin_spring_forward():
    # 2026-03-29: Berlin goes from CET (+1) to CEST (+2); 04:00 local is 02:00 UTC that day.
    rule = ResetRule(mode="daily", at_hour=4)
    started = utc(2026, 3, 28, 12)  # 13:00 CET
    assert fresh(rule, tz="Europe/Berlin", started=started, now=utc(2026, 3, 29, 1, 59)) is None
    assert fresh(rule, tz="Europe/Berlin", started=started, now=utc(2026, 3, 29, 2)) == "daily"
    at = next_reset_at(
        rule, timezone="Europe/Berlin", session_started_at=started, last_interaction_at=None
    )
    assert at == utc(2026, 3, 29, 2)


def test_nonexistent_hour_uses_the_first_valid_instant_after_it_berlin():
    # 02:00 does not exist on 2026-03-29 in Berlin; the clocks read 03:00 CEST = 01:00 UTC.
    rule = ResetRule(mode="daily", at_hour=2)
    started = utc(2026, 3, 28, 12)
    at = next_reset_at(
        rule, timezone="Europe/Berlin", session_started_at=started, last_interaction_at=None
    )
    assert at == utc(2026, 3, 29, 1)
    assert fresh(rule, tz="Europe/Berlin", started=started, now=utc(2026, 3, 29, 0, 59)) is None
    assert fresh(rule, tz="Europe/Berlin", started=started, now=utc(2026, 3, 29, 1)) == "daily"


def test_nonexistent_hour_new_york_spring_forward():
    # 2026-03-08 02:00 EST does not exist; the first valid instant is 03:00 EDT = 07:00 UTC.
    rule = ResetRule(mode="daily", at_hour=2)
    at = next_reset_at(
        rule,
        timezone="America/New_York",
        session_started_at=utc(2026, 3, 7, 20),
        last_interaction_at=None,
    )
    assert at == utc(2026, 3, 8, 7)


def test_gap_that_does_not_start_on_the_hour_uses_the_transition_instant():
    # Goose Bay sprang from 00:01 AST (-4) to 01:01 ADT on 2000-04-02, so 01:00 did not exist
    # and the first valid instant after it is the transition itself, 04:01 UTC (not the 05:00
    # UTC that applying the old offset to 01:00 would give).
    rule = ResetRule(mode="daily", at_hour=1)
    at = next_reset_at(
        rule,
        timezone="America/Goose_Bay",
        session_started_at=utc(2000, 4, 1, 12),
        last_interaction_at=None,
    )
    assert at == utc(2000, 4, 2, 4, 1)


def test_repeated_hour_resets_once_at_its_first_occurrence_new_york_fall_back():
    # 2026-11-01 01:00 happens twice in New York: 05:00 UTC (EDT) and 06:00 UTC (EST).
    rule = ResetRule(mode="daily", at_hour=1)
    started = utc(2026, 10, 31, 12)
    assert fresh(rule, tz="America/New_York", started=started, now=utc(2026, 11, 1, 4, 59)) is None
    assert fresh(rule, tz="America/New_York", started=started, now=utc(2026, 11, 1, 5)) == "daily"
    # A session started between the two 01:00s is not reset again at the second one.
    between = utc(2026, 11, 1, 5, 30)
    assert fresh(rule, tz="America/New_York", started=between, now=utc(2026, 11, 1, 6, 30)) is None
    at = next_reset_at(
        rule, timezone="America/New_York", session_started_at=between, last_interaction_at=None
    )
    assert at == utc(2026, 11, 2, 6)  # 01:00 EST


def test_daily_across_berlin_fall_back():
    # 2026-10-25: CEST (+2) → CET (+1); 04:00 local is 03:00 UTC that day, 02:00 UTC the day before.
    rule = ResetRule(mode="daily", at_hour=4)
    started = utc(2026, 10, 24, 3)  # 05:00 CEST, after that day's boundary
    at = next_reset_at(
        rule, timezone="Europe/Berlin", session_started_at=started, last_interaction_at=None
    )
    assert at == utc(2026, 10, 25, 3)


# --- both and next_reset_at ---------------------------------------------------------------


def test_both_reports_whichever_expired_first():
    rule = ResetRule(mode="both", at_hour=4, idle_minutes=60)
    started = utc(2026, 5, 1, 10)
    # Idle expired at 11:00, daily at 04:00 the next day: idle came first.
    assert fresh(rule, started=started, last=utc(2026, 5, 1, 10), now=utc(2026, 5, 2, 5)) == "idle"
    # Daily expired at 04:00, idle at 04:30: daily came first.
    assert (
        fresh(rule, started=started, last=utc(2026, 5, 2, 3, 30), now=utc(2026, 5, 2, 5)) == "daily"
    )
    assert (
        fresh(rule, started=started, last=utc(2026, 5, 2, 3, 30), now=utc(2026, 5, 2, 3, 45))
        is None
    )


def test_next_reset_at_is_the_earliest_expiry_in_aware_utc():
    rule = ResetRule(mode="both", at_hour=4, idle_minutes=90)
    last = utc(2026, 5, 1, 20)
    at = next_reset_at(
        rule,
        timezone="Europe/Berlin",
        session_started_at=utc(2026, 5, 1, 10),
        last_interaction_at=last,
    )
    assert at == last + timedelta(minutes=90)
    assert at is not None
    assert at.utcoffset() == timedelta(0)
    at = next_reset_at(
        rule,
        timezone="Europe/Berlin",
        session_started_at=utc(2026, 5, 1, 10),
        last_interaction_at=utc(2026, 5, 2, 1),
    )
    assert at == utc(2026, 5, 2, 2)  # 04:00 CEST


def test_next_reset_at_is_none_without_a_policy_or_anchor():
    assert (
        next_reset_at(
            ResetRule(),
            timezone="UTC",
            session_started_at=utc(2026, 1, 1),
            last_interaction_at=utc(2026, 1, 1),
        )
        is None
    )
    assert (
        next_reset_at(
            ResetRule(mode="idle"),
            timezone="UTC",
            session_started_at=utc(2026, 1, 1),
            last_interaction_at=None,
        )
        is None
    )


def test_naive_datetimes_are_taken_as_utc():
    rule = ResetRule(mode="idle", idle_minutes=10)
    naive = datetime(2026, 5, 1, 12)  # noqa: DTZ001 - the point of the test
    assert fresh(rule, last=naive, now=utc(2026, 5, 1, 12, 10)) == "idle"
