"""`GatewayConfig`: the spec's configuration appendix, built with keyword arguments."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from sessiongate.core.config import GatewayConfig, PlatformConfig, ResetRule


def test_defaults_match_the_spec_appendix():
    config = GatewayConfig()
    assert config.group_sessions_per_user is True
    assert config.thread_sessions_per_user is False
    assert config.session_store_max_age_days == 0
    assert config.agent.gateway_auto_continue_freshness == 3600
    assert config.agent.gateway_timeout == 1800
    cache = config.agent.agent_cache
    assert cache.max_size == 128
    assert cache.idle_ttl_secs == 3600
    assert cache.memory_high_mb == "auto"
    assert cache.max_evictions_per_pass == 16
    assert cache.protect_recent == 8


def test_project_defaults():
    config = GatewayConfig()
    assert config.redact_pii is False
    assert config.queue_cap == 32
    assert config.stuck_loop_threshold == 3
    assert config.busy_input_mode == "interrupt"
    assert config.reset_mode == "new_session"
    assert config.reset_policy.mode == "none"
    assert config.agent.echo.delay_seconds == 0.0
    assert config.api.host == "127.0.0.1"
    assert config.api.port == 8787
    assert config.api.token is None


def test_nested_keys_are_given_as_keyword_arguments():
    config = GatewayConfig(
        thread_sessions_per_user=True,
        agent={"gateway_timeout": 60, "agent_cache": {"max_size": 4}},
    )
    assert config.thread_sessions_per_user is True
    assert config.agent.gateway_timeout == 60
    assert config.agent.agent_cache.max_size == 4
    assert config.agent.agent_cache.protect_recent == 8


def test_unknown_keys_are_rejected():
    with pytest.raises(ValidationError, match="group_session_per_user"):
        GatewayConfig(group_session_per_user=False)  # type: ignore[call-arg]


def test_invalid_values_are_rejected_on_construction_and_assignment():
    with pytest.raises(ValidationError):
        GatewayConfig(queue_cap=0)
    config = GatewayConfig()
    with pytest.raises(ValidationError):
        config.agent.gateway_timeout = 0


def test_validation_errors_are_value_errors():
    with pytest.raises(ValueError, match="busy_input_mode"):
        GatewayConfig(busy_input_mode="drop")


@pytest.mark.parametrize(("given", "kept"), [(512, 512), ("auto", "auto"), ("off", "off")])
def test_memory_budget_is_megabytes_auto_or_off(given, kept):
    config = GatewayConfig(agent={"agent_cache": {"memory_high_mb": given}})
    assert config.agent.agent_cache.memory_high_mb == kept


def test_memory_budget_rejects_other_words():
    with pytest.raises(ValidationError):
        GatewayConfig(agent={"agent_cache": {"memory_high_mb": "lots"}})


def test_numeric_ids_and_tokens_are_kept_as_text():
    platform = PlatformConfig(home_channel=-10012345, allow_from=[42], token=123)
    assert platform.home_channel == "-10012345"
    assert platform.allow_from == ["42"]
    assert isinstance(platform.token, SecretStr)
    assert platform.token.get_secret_value() == "123"


def test_secrets_are_hidden_in_repr():
    config = GatewayConfig(api={"token": "s3cret"})
    assert "s3cret" not in repr(config)
    assert config.api.token is not None
    assert config.api.token.get_secret_value() == "s3cret"


def test_connected_platforms_lists_enabled_ones_sorted():
    config = GatewayConfig(
        platforms={
            "telegram": {},
            "discord": {"enabled": False},
            "api": {"enabled": True},
        }
    )
    assert config.connected_platforms() == ["api", "telegram"]


def test_reset_rule_clamps_hour_and_idle_minutes():
    assert ResetRule(at_hour=30).at_hour == 23
    assert ResetRule(at_hour=-1).at_hour == 0
    assert ResetRule(idle_minutes=0).idle_minutes == 1


def test_reset_policy_overrides_by_type_and_channel():
    config = GatewayConfig(
        reset_policy={
            "mode": "daily",
            "timezone": "Europe/Paris",
            "by_type": {"group": {"mode": "idle", "idle_minutes": 30}},
            "by_channel": {"discord": {"mode": "none"}},
        }
    )
    assert config.reset_policy.by_type["group"].mode == "idle"
    assert config.reset_policy.by_channel["discord"].mode == "none"
    with pytest.raises(ValidationError):
        GatewayConfig(reset_policy={"by_type": {"dm": {}}})
