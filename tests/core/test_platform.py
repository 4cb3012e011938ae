"""Platforms: the built-in set, plugin registration and PII safety."""

from __future__ import annotations

import json

import pytest

from sessiongate.core import platform as platform_module
from sessiongate.core.platform import Platform, platform_info, register_platform

BUILTINS = [
    "telegram",
    "discord",
    "slack",
    "signal",
    "whatsapp",
    "matrix",
    "mattermost",
    "email",
    "sms",
    "webhook",
    "homeassistant",
    "local",
    "api",
]


@pytest.fixture(autouse=True)
def isolated_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plugins registered by a test vanish after it."""
    monkeypatch.setattr(platform_module, "_REGISTRY", dict(platform_module._REGISTRY))


@pytest.mark.parametrize("name", BUILTINS)
def test_every_builtin_is_registered_with_a_constant(name):
    platform = Platform(name)
    assert platform == name
    assert getattr(Platform, name.upper()) is not None
    assert getattr(Platform, name.upper()) == platform
    assert platform_info(platform).builtin


def test_platform_is_plain_text_when_serialised():
    assert json.dumps({"p": Platform.TELEGRAM}) == '{"p": "telegram"}'
    assert Platform.TELEGRAM.value == "telegram"
    assert repr(Platform.TELEGRAM) == "Platform('telegram')"


def test_names_are_normalised():
    assert Platform(" Telegram ") == Platform.TELEGRAM


@pytest.mark.parametrize("bad", ["myspace", "", 7, None])
def test_unknown_platform_raises_value_error(bad):
    with pytest.raises(ValueError, match="unknown platform"):
        Platform(bad)


def test_discord_is_not_pii_safe_and_other_builtins_are():
    assert not platform_info(Platform.DISCORD).pii_safe
    for name in BUILTINS:
        if name != "discord":
            assert platform_info(name).pii_safe, name


def test_plugin_platform_registers_and_is_not_pii_safe_by_default():
    irc = register_platform("irc")
    assert Platform("irc") == irc
    info = platform_info("irc")
    assert (info.name, info.pii_safe, info.builtin) == ("irc", False, False)


def test_plugin_platform_can_declare_pii_safe():
    register_platform("Zulip", pii_safe=True)
    assert platform_info("zulip").pii_safe


def test_plugin_registration_does_not_outlive_its_test():
    with pytest.raises(ValueError, match="unknown platform"):
        Platform("irc")


def test_builtin_names_cannot_be_registered_again():
    with pytest.raises(ValueError, match="built-in"):
        register_platform("discord", pii_safe=True)
    assert not platform_info("discord").pii_safe


@pytest.mark.parametrize("bad", ["two words", "a-b", "", "9lives"])
def test_plugin_names_must_be_identifiers(bad):
    with pytest.raises(ValueError, match="identifiers"):
        register_platform(bad)
