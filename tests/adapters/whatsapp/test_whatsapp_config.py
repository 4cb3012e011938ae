"""`platforms.whatsapp`: its keys, defaults, the mistakes refused at load, and secrets that
never show."""

from __future__ import annotations

import pytest

from sessiongate.adapters.registry import build_adapters
from sessiongate.adapters.whatsapp import WhatsAppAdapter
from sessiongate.config import ConfigError, load_config
from sessiongate.core.config import GatewayConfig, WhatsAppConfig

SECTION = {
    "token": "EAAG-secret-token",
    "phone_number_id": "106540352242922",
    "app_secret": "app-secret-value",
    "verify_token": "verify-secret-value",
}


def test_the_defaults_are_safe():
    whatsapp = GatewayConfig(platforms={"whatsapp": SECTION}).platforms["whatsapp"]
    assert isinstance(whatsapp, WhatsAppConfig)
    assert whatsapp.base_url == "https://graph.facebook.com"
    assert whatsapp.dm_policy == "pairing"
    assert whatsapp.allow_from is None
    assert whatsapp.window_template is None


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ({"base_url": "ftp://x"}, "base_url"),
        ({"base_url": "https://graph.facebook.com/v23.0"}, "without the /vNN.N"),
        ({"api_version": "latest"}, "api_version"),
        ({"max_webhook_bytes": 10}, "max_webhook_bytes"),
        ({"app_secrett": "x"}, "unknown key"),
    ],
)
def test_mistakes_are_one_config_error_naming_the_key(tmp_path, section, problem):
    path = tmp_path / "config.yaml"
    lines = ["platforms:", "  whatsapp:"] + [f"    {k}: {v!r}" for k, v in section.items()]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=r"platforms\.whatsapp") as caught:
        load_config(path, environ={})
    assert problem in caught.value.message


def test_secrets_never_show_in_the_config_or_the_adapter():
    config = GatewayConfig(platforms={"whatsapp": SECTION})
    shown = " ".join(
        [
            repr(config),
            str(config.model_dump()),
            config.model_dump_json(),
            repr(build_adapters(config)),
        ]
    )
    for secret in ("EAAG-secret-token", "app-secret-value", "verify-secret-value"):
        assert secret not in shown


def test_the_registry_builds_the_adapter_when_enabled():
    (adapter,) = build_adapters(GatewayConfig(platforms={"whatsapp": SECTION}))
    assert isinstance(adapter, WhatsAppAdapter)
    assert adapter.settings.access.dm_policy == "pairing"


def test_allow_from_numbers_are_normalised_like_the_payloads():
    section = {**SECTION, "allow_from": ["+1 (650) 555-1234", "*"]}
    config = GatewayConfig(platforms={"whatsapp": section}).platforms["whatsapp"]
    assert isinstance(config, WhatsAppConfig)
    adapter = WhatsAppAdapter(config)
    assert adapter.settings.access.allow_from == frozenset({"16505551234", "*"})


def test_the_adapter_is_a_platform_adapter_that_never_streams():
    from sessiongate.gateway.adapter import PlatformAdapter, StreamingAdapter

    config = GatewayConfig(platforms={"whatsapp": SECTION}).platforms["whatsapp"]
    assert isinstance(config, WhatsAppConfig)
    adapter = WhatsAppAdapter(config)
    assert isinstance(adapter, PlatformAdapter)
    # WhatsApp cannot edit a sent message: the gateway sends it the final text only.
    assert not isinstance(adapter, StreamingAdapter)
