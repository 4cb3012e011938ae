"""`sessiongate.config`: YAML files, environment overrides, secret masking and readable errors."""

from __future__ import annotations

import json
from pathlib import Path

import platformdirs
import pytest

from sessiongate.config import ConfigError, config_as_dict, default_home, load_config
from sessiongate.core.config import GatewayConfig


def _write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --- files ------------------------------------------------------------------------------------


def test_yaml_file_sets_nested_keys(tmp_path):
    path = _write(
        tmp_path,
        """
group_sessions_per_user: false
session_store_max_age_days: 90
agent:
  gateway_timeout: 60
  agent_cache:
    max_size: 8
    memory_high_mb: 512
  echo:
    delay_seconds: 1.5
platforms:
  telegram:
    home_channel: -10012345
    token: "123:abc"
""",
    )
    config = load_config(path, environ={})
    assert config.group_sessions_per_user is False
    assert config.session_store_max_age_days == 90
    assert config.agent.gateway_timeout == 60
    assert config.agent.agent_cache.max_size == 8
    assert config.agent.agent_cache.memory_high_mb == 512
    assert config.agent.echo.delay_seconds == 1.5
    assert config.platforms["telegram"].home_channel == "-10012345"
    token = config.platforms["telegram"].token
    assert token is not None
    assert token.get_secret_value() == "123:abc"


def test_dotted_yaml_keys_nest_like_mappings(tmp_path):
    dotted = _write(tmp_path, "agent.echo.delay_seconds: 1\nagent.gateway_timeout: 7\n", "a.yaml")
    nested = _write(tmp_path, "agent: {echo: {delay_seconds: 1}, gateway_timeout: 7}\n", "b.yaml")
    assert load_config(dotted, environ={}) == load_config(nested, environ={})
    assert load_config(dotted, environ={}).agent.echo.delay_seconds == 1


def test_dotted_and_nested_spellings_merge(tmp_path):
    path = _write(tmp_path, "agent:\n  gateway_timeout: 7\nagent.echo.delay_seconds: 2\n")
    config = load_config(path, environ={})
    assert config.agent.gateway_timeout == 7
    assert config.agent.echo.delay_seconds == 2


def test_the_same_key_spelled_twice_is_an_error(tmp_path):
    path = _write(tmp_path, "agent:\n  gateway_timeout: 7\nagent.gateway_timeout: 8\n")
    with pytest.raises(ConfigError, match=r"agent\.gateway_timeout"):
        load_config(path, environ={})


def test_empty_file_gives_defaults(tmp_path):
    assert load_config(_write(tmp_path, ""), environ={}) == GatewayConfig()


def test_missing_file_error_names_the_path(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="not found") as info:
        load_config(path, environ={})
    assert str(path) in str(info.value)
    assert info.value.path == path


def test_malformed_yaml_is_a_config_error_with_its_location(tmp_path):
    path = _write(tmp_path, "agent:\n  gateway_timeout: [1, 2\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    message = str(info.value)
    assert str(path) in message
    assert "line" in message
    assert "Traceback" not in message
    assert info.value.__suppress_context__


def test_top_level_list_is_rejected(tmp_path):
    with pytest.raises(ConfigError, match="mapping"):
        load_config(_write(tmp_path, "- a\n- b\n"), environ={})


def test_unknown_keys_are_listed_by_name(tmp_path):
    path = _write(tmp_path, "group_session_per_user: true\nagent:\n  gateway_timout: 5\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert sorted(info.value.unknown_keys) == ["agent.gateway_timout", "group_session_per_user"]
    message = str(info.value)
    assert "group_session_per_user" in message
    assert "agent.gateway_timout" in message
    assert str(path) in message


def test_config_error_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="bogus"):
        load_config(_write(tmp_path, "bogus: 1\n"), environ={})


def test_invalid_values_are_reported_without_echoing_them(tmp_path):
    path = _write(tmp_path, "api:\n  token: {nested: hunter2}\nqueue_cap: 0\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    message = str(info.value)
    assert "api.token" in message
    assert "queue_cap" in message
    assert "hunter2" not in message
    assert len(info.value.problems) == 2


def test_non_text_keys_are_rejected(tmp_path):
    with pytest.raises(ConfigError, match="keys must be non-empty text"):
        load_config(_write(tmp_path, "1: x\n"), environ={})


# --- where the file is looked for -------------------------------------------------------------


def test_no_path_reads_config_yaml_in_the_home_directory(tmp_path):
    _write(tmp_path, "queue_cap: 5\n")
    assert load_config(environ={"SESSIONGATE_HOME": str(tmp_path)}).queue_cap == 5


def test_no_path_and_no_file_gives_defaults(tmp_path):
    assert load_config(environ={"SESSIONGATE_HOME": str(tmp_path)}) == GatewayConfig()


def test_sessiongate_config_names_the_file_and_must_exist(tmp_path):
    path = _write(tmp_path, "queue_cap: 6\n", "elsewhere.yaml")
    assert load_config(environ={"SESSIONGATE_CONFIG": str(path)}).queue_cap == 6
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError, match="not found"):
        load_config(environ={"SESSIONGATE_CONFIG": str(missing)})


def test_home_argument_overrides_the_environment(tmp_path):
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    _write(chosen, "queue_cap: 9\n")
    environ = {"SESSIONGATE_HOME": str(tmp_path)}
    assert load_config(environ=environ, home=chosen).queue_cap == 9


def test_default_home_is_sessiongate_home(tmp_path):
    assert default_home(environ={"SESSIONGATE_HOME": str(tmp_path)}) == tmp_path


def test_default_home_falls_back_to_the_user_data_dir():
    assert default_home(environ={}) == Path(platformdirs.user_data_dir("sessiongate"))


def test_process_environment_is_read_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("SESSIONGATE_HOME", str(tmp_path))
    monkeypatch.setenv("SESSIONGATE_QUEUE_CAP", "11")
    assert default_home() == tmp_path
    assert load_config().queue_cap == 11


# --- environment overrides --------------------------------------------------------------------


def test_environment_overrides_the_file(tmp_path):
    path = _write(tmp_path, "agent:\n  gateway_timeout: 5\n  echo: {delay_seconds: 1}\n")
    environ = {
        "SESSIONGATE_AGENT__GATEWAY_TIMEOUT": "60",
        "SESSIONGATE_GROUP_SESSIONS_PER_USER": "false",
        "SESSIONGATE_API__TOKEN": "s3cret",
    }
    config = load_config(path, environ=environ)
    assert config.agent.gateway_timeout == 60
    assert config.agent.echo.delay_seconds == 1
    assert config.group_sessions_per_user is False
    assert config.api.token is not None
    assert config.api.token.get_secret_value() == "s3cret"


def test_environment_values_are_yaml_scalars():
    config = load_config(
        environ={
            "SESSIONGATE_AGENT__ECHO__DELAY_SECONDS": "0.25",
            "SESSIONGATE_AGENT__AGENT_CACHE__MEMORY_HIGH_MB": "512",
            "SESSIONGATE_THREAD_SESSIONS_PER_USER": "yes",
            "SESSIONGATE_RESET_TRIGGERS": "[/new, /fresh]",
            "SESSIONGATE_HOME": "/nonexistent-sessiongate-home",
        }
    )
    assert config.agent.echo.delay_seconds == 0.25
    assert config.agent.agent_cache.memory_high_mb == 512
    assert config.thread_sessions_per_user is True
    assert config.reset_triggers == ["/new", "/fresh"]


def test_text_fields_take_the_raw_environment_value():
    config = load_config(
        environ={
            "SESSIONGATE_API__TOKEN": "0123",
            "SESSIONGATE_PLATFORMS__TELEGRAM__HOME_CHANNEL": "-0010",
            "SESSIONGATE_PLATFORMS__TELEGRAM__TOKEN": "a: b",
            "SESSIONGATE_AGENT__OPENAI__MODEL": "null",
            "SESSIONGATE_HOME": "/nonexistent-sessiongate-home",
        }
    )
    assert config.api.token is not None
    assert config.api.token.get_secret_value() == "0123"
    telegram = config.platforms["telegram"]
    assert telegram.home_channel == "-0010"
    assert telegram.token is not None
    assert telegram.token.get_secret_value() == "a: b"
    assert config.agent.openai.model == "null"


@pytest.mark.parametrize("value", ["", "   ", "\t\n"])
def test_an_empty_or_blank_api_token_is_no_token(tmp_path, value):
    # Counted as a token, it let the API listen on a public address and then answer 401 to
    # every request (no bearer token can be empty).
    environ = {"SESSIONGATE_API__TOKEN": value, "SESSIONGATE_HOME": str(tmp_path)}
    assert load_config(environ=environ).api.token is None
    path = _write(tmp_path, f"api:\n  token: {json.dumps(value)}\n")
    assert load_config(path, environ={"SESSIONGATE_HOME": str(tmp_path)}).api.token is None
    assert GatewayConfig(api={"token": value}).api.token is None


def test_home_and_config_variables_are_not_config_keys(tmp_path):
    environ = {"SESSIONGATE_HOME": str(tmp_path), "SESSIONGATE_CONFIG": ""}
    assert load_config(environ=environ) == GatewayConfig()


def test_unknown_environment_key_names_the_variable():
    with pytest.raises(ConfigError) as info:
        load_config(environ={"SESSIONGATE_AGENT__BOGUS": "1", "SESSIONGATE_HOME": "/nonexistent"})
    assert info.value.unknown_keys == ["agent.bogus"]
    assert "SESSIONGATE_AGENT__BOGUS" in str(info.value)


def test_invalid_environment_value_names_the_variable():
    with pytest.raises(ConfigError, match="SESSIONGATE_QUEUE_CAP"):
        load_config(environ={"SESSIONGATE_QUEUE_CAP": "many", "SESSIONGATE_HOME": "/nonexistent"})


def test_malformed_environment_name_is_a_config_error():
    with pytest.raises(ConfigError, match="SESSIONGATE_AGENT____X"):
        load_config(environ={"SESSIONGATE_AGENT____X": "1", "SESSIONGATE_HOME": "/nonexistent"})


def test_environment_cannot_nest_under_a_scalar(tmp_path):
    path = _write(tmp_path, "queue_cap: 3\n")
    with pytest.raises(ConfigError, match="queue_cap"):
        load_config(path, environ={"SESSIONGATE_QUEUE_CAP__X": "1"})


# --- config_as_dict ---------------------------------------------------------------------------


def test_config_as_dict_masks_secrets():
    config = GatewayConfig(
        api={"token": "s3cret"},
        agent={"openai": {"api_key": "sk-live"}},
        platforms={"telegram": {"token": "bot-token"}},
    )
    shown = config_as_dict(config)
    text = json.dumps(shown)
    for secret in ("s3cret", "sk-live", "bot-token"):
        assert secret not in text
    assert shown["api"]["token"] == "***"
    assert shown["agent"]["openai"]["api_key"] == "***"
    assert shown["platforms"]["telegram"]["token"] == "***"
    assert shown["agent"]["gateway_timeout"] == 1800


def test_config_as_dict_shows_unset_secrets_as_none():
    assert config_as_dict(GatewayConfig())["api"]["token"] is None


def test_config_as_dict_can_reveal_secrets():
    config = GatewayConfig(api={"token": "s3cret"})
    assert config_as_dict(config, mask_secrets=False)["api"]["token"] == "s3cret"


def test_unmasked_dict_loads_back_to_the_same_config(tmp_path):
    config = GatewayConfig(
        api={"token": "s3cret"}, agent={"gateway_timeout": 42}, reset_triggers=["/new"]
    )
    path = tmp_path / "round.json"  # JSON is YAML, so the dump is a valid config file
    path.write_text(json.dumps(config_as_dict(config, mask_secrets=False)), encoding="utf-8")
    assert load_config(path, environ={}) == config


def test_a_bad_union_value_is_one_problem_on_its_own_key(tmp_path):
    path = _write(tmp_path, "agent.agent_cache.memory_high_mb: lots\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    [problem] = info.value.problems
    assert problem.startswith("agent.agent_cache.memory_high_mb: ")
    assert "'auto' or 'off'" in problem


# --- several agents, bindings, pricing, feed ----------------------------------------------------


def test_several_agents_and_bindings_load_from_yaml(tmp_path):
    path = _write(
        tmp_path,
        """
agents:
  support:
    kind: openai
    base_url: http://127.0.0.1:9/v1
    model: small-model
    context_window: 32000
  triage:
    kind: echo
    delay_seconds: 0.5
bindings:
  - {platform: telegram, chat_id: -100123, agent: support}
  - {platform: discord, guild_id: 9, chat_type: group, agent: triage}
pricing:
  small-model: {input_per_million: 0.15, output_per_million: 0.6}
""",
    )
    config = load_config(path, environ={})
    assert config.agent_ids() == ["main", "support", "triage"]
    assert config.agent_spec("support").kind == "openai"
    assert config.agent_spec("main").kind == "echo"
    assert config.bindings[0].chat_id == "-100123"
    assert config.context_window_for("agent:support:telegram:dm:1") == 32000
    assert config.context_window_for("agent:main:telegram:dm:1") == 100_000
    assert config.model_of("agent:support:x:dm:1") == "small-model"
    assert config.pricing["small-model"].output_per_million == 0.6


def test_the_old_agent_section_is_agent_main(tmp_path):
    path = _write(tmp_path, "agent:\n  openai:\n    base_url: http://127.0.0.1:9/v1\n")
    config = load_config(path, environ={})
    main = config.agent_spec("main")
    assert main.kind == "openai"
    assert config.model_of("agent:main:api:dm:a") == "gpt-4o-mini"


def test_a_binding_to_an_unknown_agent_is_refused_at_load(tmp_path):
    path = _write(
        tmp_path,
        "agents:\n  support: {kind: echo}\nbindings:\n  - {platform: telegram, agent: sales}\n",
    )
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    message = str(info.value)
    assert "bindings" in message
    assert "'sales'" in message
    assert "main, support" in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("agents:\n  Support: {kind: echo}\n", "invalid agent id 'Support'"),
        ("agents:\n  support: {kind: robot}\n", "agents.support"),
        ("agents:\n  support: {model: x}\n", "agents.support"),
        (
            "agent:\n  echo: {delay_seconds: 1}\nagents:\n  main: {kind: echo}\n",
            "agent main is given twice",
        ),
        ("pricing:\n  m: {input_per_million: -1, output_per_million: 1}\n", "pricing.m"),
        ("feed:\n  history_events: 10\n  max_events: 5\n", "feed.max_events"),
    ],
)
def test_bad_agent_and_pricing_settings_are_refused_clearly(tmp_path, text, fragment):
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, text), environ={})
    assert fragment in str(info.value)


def test_an_environment_variable_sets_one_agents_setting(tmp_path):
    path = _write(tmp_path, "agents:\n  support: {kind: openai, model: a}\n")
    config = load_config(path, environ={"SESSIONGATE_AGENTS__SUPPORT__MODEL": "b"})
    assert config.model_of("agent:support:api:dm:x") == "b"
