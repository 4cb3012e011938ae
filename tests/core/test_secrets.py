"""The configuration's secrets found, and masked in text."""

from __future__ import annotations

from sessiongate.core.config import GatewayConfig
from sessiongate.core.secrets import collect_secrets, mask_secrets


def test_secret_fields_and_url_passwords_are_collected_everywhere():
    config = GatewayConfig.model_validate(
        {
            "api": {"token": "api-token-123"},
            "platforms": {"telegram": {"token": "1:tg", "webhook_secret": "hook-secret"}},
            "agents": {"helper": {"kind": "openai", "model": "m", "api_key": "sk-helper"}},
            "store": {"url": "postgresql://me:p%40ss@db/x?sslpassword=keypass"},
        }
    )
    assert collect_secrets(config) == {
        "api-token-123",
        "1:tg",
        "hook-secret",
        "sk-helper",
        "p%40ss",
        "p@ss",
        "keypass",
    }


def test_masking_replaces_every_form_and_leaves_other_text():
    secrets = frozenset({'a"b\\c', "tok-1", "tok-12"})
    text = 'tok-12 and tok-1, json "a\\"b\\\\c" raw a"b\\c'
    assert mask_secrets(text, secrets) == '*** and ***, json "***" raw ***'
    assert mask_secrets("nothing here", secrets) == "nothing here"
