"""`platforms.telegram`: its keys, defaults and the mistakes refused at load."""

from __future__ import annotations

import pytest

from sessiongate.config import ConfigError, load_config
from sessiongate.core.config import GatewayConfig, TelegramConfig


def test_the_defaults_are_safe():
    telegram = GatewayConfig(platforms={"telegram": {"token": "1:x"}}).platforms["telegram"]
    assert isinstance(telegram, TelegramConfig)
    assert telegram.base_url == "https://api.telegram.org"
    assert telegram.mode == "polling"
    assert telegram.require_mention is True
    assert telegram.dm_policy == "pairing"
    assert telegram.allow_from is None


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ({"mode": "hook"}, "mode"),
        ({"base_url": "ftp://x"}, "base_url"),
        ({"base_url": "https://api.telegram.org/bot123:abc"}, "without /bot"),
        ({"dm_policy": "everyone"}, "dm_policy"),
        ({"tokn": "1:x"}, "unknown key"),
    ],
)
def test_mistakes_are_one_config_error_naming_the_key(tmp_path, section, problem):
    path = tmp_path / "config.yaml"
    lines = ["platforms:", "  telegram:"] + [f"    {k}: {v!r}" for k, v in section.items()]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"platforms\.telegram") as caught:
        load_config(path, environ={})
    assert problem in caught.value.message


def test_a_self_hosted_bot_api_root_is_kept_without_its_trailing_slash():
    telegram = TelegramConfig(token="1:x", base_url="http://127.0.0.1:8081/")
    assert telegram.base_url == "http://127.0.0.1:8081"


def test_secrets_come_raw_from_the_environment():
    config = load_config(
        environ={
            "SESSIONGATE_PLATFORMS__TELEGRAM__WEBHOOK_SECRET": "00: 7",
            "SESSIONGATE_HOME": "/nonexistent-sessiongate-home",
        }
    )
    telegram = config.platforms["telegram"]
    assert isinstance(telegram, TelegramConfig)
    assert telegram.webhook_secret is not None
    assert telegram.webhook_secret.get_secret_value() == "00: 7"
