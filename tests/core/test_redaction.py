import hashlib
import re

import pytest

from sessiongate.core.platform import register_platform
from sessiongate.core.redaction import (
    hash_chat_id,
    hash_user_id,
    redact_session_key,
    should_redact,
)


def test_hash_user_id_is_a_stable_sha256_prefix():
    expected = "user_" + hashlib.sha256(b"12345").hexdigest()[:12]
    assert hash_user_id("12345") == expected
    assert hash_user_id("12345") == hash_user_id("12345")
    assert hash_user_id("12346") != expected
    assert re.fullmatch(r"user_[0-9a-f]{12}", hash_user_id("alice@example.org"))


def test_hash_chat_id_with_and_without_platform():
    digest = hashlib.sha256(b"-10012345").hexdigest()[:12]
    assert hash_chat_id("-10012345") == digest
    assert hash_chat_id("-10012345", "telegram") == f"telegram:{digest}"


def test_should_redact_builtin_platforms():
    assert should_redact("telegram")
    assert should_redact("slack")
    # Discord needs raw ids so the model can write <@id> mentions.
    assert not should_redact("discord")


def test_should_redact_plugin_platforms_only_when_declared_pii_safe():
    register_platform("redactiontest_unsafe")
    register_platform("redactiontest_safe", pii_safe=True)
    assert not should_redact("redactiontest_unsafe")
    assert should_redact("redactiontest_safe")


def test_should_redact_unknown_platform_raises():
    with pytest.raises(ValueError, match="unknown platform"):
        should_redact("no_such_platform_anywhere")


def test_redact_session_key_hashes_every_raw_component():
    key = "agent:main:telegram:group:-100999:thread_42:user_777"
    redacted = redact_session_key(key)
    assert redacted.startswith("agent:main:telegram:group:")
    for raw in ("-100999", "thread_42", "user_777"):
        assert raw not in redacted
    assert len(redacted.split(":")) == len(key.split(":"))
    assert redact_session_key(key) == redacted


def test_redact_session_key_of_escaped_components_hides_the_raw_id():
    key = "agent:main:matrix:group:!room%3Aexample.org"
    redacted = redact_session_key(key)
    assert "room" not in redacted
    assert "example" not in redacted


def test_something_that_is_not_a_key_is_hashed_whole():
    assert re.fullmatch(r"key_[0-9a-f]{12}", redact_session_key("not a key: 555-1234"))
