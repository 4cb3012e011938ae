"""`platforms.matrix`: its keys, defaults, the mistakes refused at load, and the adapter the
registry builds from it."""

from __future__ import annotations

import pytest

from sessiongate.adapters.matrix import MatrixAdapter
from sessiongate.adapters.registry import ADAPTER_EXTRAS, build_adapters
from sessiongate.config import ConfigError, load_config
from sessiongate.core.config import GatewayConfig, MatrixConfig

TOKEN = "syt_c2VjcmV0_abcdefghij"


def test_the_defaults_are_safe():
    matrix = GatewayConfig(platforms={"matrix": {"access_token": TOKEN}}).platforms["matrix"]
    assert isinstance(matrix, MatrixConfig)
    assert matrix.homeserver == "https://matrix.org"
    assert matrix.dm_policy == "pairing"
    assert matrix.allow_from is None
    assert matrix.require_mention is True


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ({"homeserver": "matrix.example.org"}, "homeserver"),
        ({"homeserver": "https://m.example.org/_matrix/client/v3"}, "without /_matrix"),
        ({"user_id": "bot"}, "user_id"),
        ({"sync_timeout_seconds": 500}, "sync_timeout_seconds"),
        ({"acess_token": TOKEN}, "unknown key"),
    ],
)
def test_mistakes_are_one_config_error_naming_the_key(tmp_path, section, problem):
    path = tmp_path / "config.yaml"
    lines = ["platforms:", "  matrix:"] + [f"    {k}: {v!r}" for k, v in section.items()]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"platforms\.matrix") as caught:
        load_config(path, environ={})
    assert problem in caught.value.message


def test_the_access_token_is_never_printed():
    config = GatewayConfig(platforms={"matrix": {"access_token": TOKEN}})
    assert TOKEN not in repr(config)
    assert TOKEN not in config.model_dump_json()
    assert TOKEN not in str(config.platforms["matrix"])


def test_the_access_token_comes_raw_from_the_environment():
    config = load_config(
        environ={
            "SESSIONGATE_PLATFORMS__MATRIX__ACCESS_TOKEN": TOKEN,
            "SESSIONGATE_HOME": "/nonexistent-sessiongate-home",
        }
    )
    matrix = config.platforms["matrix"]
    assert isinstance(matrix, MatrixConfig)
    assert matrix.access_token is not None
    assert matrix.access_token.get_secret_value() == TOKEN


def test_the_registry_builds_the_matrix_adapter():
    assert ADAPTER_EXTRAS["matrix"] == ("mautrix", "matrix")
    config = GatewayConfig(platforms={"matrix": {"access_token": TOKEN,
                                                 "homeserver": "http://127.0.0.1:9"}})  # fmt: skip
    (adapter,) = build_adapters(config)
    assert isinstance(adapter, MatrixAdapter)
