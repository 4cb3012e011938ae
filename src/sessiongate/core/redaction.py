"""PII redaction for model-facing text only.

When `redact_pii` is on, the `## Current Session Context` prompt shows hashed ids instead of raw
user, chat, thread and participant ids, and a session key with each raw component hashed.
Routing, session keys, storage and adapter calls always keep the original values: a hash is
one-way, so using it anywhere but in text for the model would break delivery.

Hashes are the first 12 hex digits of SHA-256: stable across restarts (the prompt stays
byte-identical, so prompt caching keeps working) and distinct enough to tell participants apart.
"""

from __future__ import annotations

import hashlib

from sessiongate.core.keys import parse_session_key
from sessiongate.core.platform import Platform, platform_info

__all__ = ["hash_chat_id", "hash_user_id", "redact_session_key", "should_redact"]

_HEX_CHARS = 12


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:_HEX_CHARS]


def hash_user_id(user_id: str) -> str:
    """`user_<12 hex of sha256>`."""
    return f"user_{_digest(str(user_id))}"


def hash_chat_id(chat_id: str, platform: Platform | str | None = None) -> str:
    """`<platform>:<12 hex>`, or just `<12 hex>` without a platform."""
    digest = _digest(str(chat_id))
    return f"{platform}:{digest}" if platform else digest


def should_redact(platform: Platform | str) -> bool:
    """Whether ids of `platform` may be hashed in the prompt.

    False for Discord (the model needs raw ids to write `<@id>` mentions) and for plugin
    platforms that have not declared `pii_safe`. Raises `ValueError` for an unknown platform.
    """
    return platform_info(platform).pii_safe


def redact_session_key(session_key: str) -> str:
    """The key with every raw component (chat, thread, participant id) hashed.

    Namespace, platform and chat type stay readable; a string that is not a session key is
    hashed whole (`key_<12 hex>`), so nothing raw can slip through.
    """
    try:
        parts = parse_session_key(session_key)
    except ValueError:
        return f"key_{_digest(session_key)}"
    hashed = [_digest(component) for component in parts["components"]]
    return ":".join([parts["namespace"], parts["platform"], parts["chat_type"], *hashed])
