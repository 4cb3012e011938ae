"""Session keys: the deterministic name of a conversation lane.

Format (spec §4): `agent:main:{platform}:{chat_type}[:{chat_id}][:{thread_id}][:{participant_id}]`.
Components are percent-escaped (`%` → `%25`, `:` → `%3A`, control characters → `%XX`) so an id
containing `:` cannot shift positions; ordinary ids give keys byte-identical to the spec's.

The format still has positional look-alikes (a group's shared thread `X` and its user `X`). The
store resolves those with `disambiguate`: the newcomer's thread or participant component gets a
tag (`%t` / `%p`) that escaping can never produce, since an escaped `%` is always followed by two
hex digits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sessiongate.core.identity import AliasResolver, canonical_whatsapp_identifier
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource

__all__ = [
    "NAMESPACE",
    "KeyParts",
    "build_key_parts",
    "build_session_key",
    "disambiguate",
    "escape_component",
    "format_session_key",
    "is_per_user",
    "is_shared_multi_user_session",
    "parse_session_key",
    "unescape_component",
]

NAMESPACE = "agent:main"
THREAD_TAG = "%t"
PARTICIPANT_TAG = "%p"
_MAX_KEY_CHARS = 4096
_ESCAPE = re.compile(r"[%:\x00-\x1f\x7f]")
_VALID_ESCAPED = re.compile(r"(?:[^%:\x00-\x1f\x7f]|%[0-9A-F]{2})*")


@dataclass(frozen=True, slots=True)
class KeyParts:
    """The structured components of a key; the store keeps these as columns."""

    platform: str
    chat_type: str
    chat_id: str | None = None
    thread_id: str | None = None
    participant_id: str | None = None
    namespace: str = NAMESPACE
    # Which component carries a disambiguation tag, if any ("thread" or "participant").
    tagged: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "platform": self.platform,
            "chat_type": self.chat_type,
            "chat_id": self.chat_id,
            "thread_id": self.thread_id,
            "participant_id": self.participant_id,
        }

    def same_conversation(self, other: KeyParts) -> bool:
        return (
            self.platform == other.platform
            and self.chat_type == other.chat_type
            and self.chat_id == other.chat_id
            and self.thread_id == other.thread_id
            and self.participant_id == other.participant_id
        )


def escape_component(value: str) -> str:
    return _ESCAPE.sub(lambda m: f"%{ord(m.group()):02X}", value)


def unescape_component(value: str) -> str:
    if not _VALID_ESCAPED.fullmatch(value):
        raise ValueError(f"invalid key component: {value!r}")
    return re.sub(r"%([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), value)


def is_per_user(
    source: SessionSource, *, group_sessions_per_user: bool, thread_sessions_per_user: bool
) -> bool:
    """The one isolation rule: DMs are private; threads follow `thread_sessions_per_user`;
    groups and channels follow `group_sessions_per_user`."""
    if source.chat_type is ChatType.DM:
        return False
    if source.thread_id:
        return thread_sessions_per_user
    return group_sessions_per_user


def is_shared_multi_user_session(
    source: SessionSource,
    *,
    group_sessions_per_user: bool = True,
    thread_sessions_per_user: bool = False,
) -> bool:
    """True when several people share the lane, exactly as `build_session_key` decided it.

    A per-user lane with no participant id to key on is shared in fact, and said so.
    """
    if source.chat_type is ChatType.DM:
        return False
    per_user = is_per_user(
        source,
        group_sessions_per_user=group_sessions_per_user,
        thread_sessions_per_user=thread_sessions_per_user,
    )
    return not (per_user and source.participant_id)


def build_key_parts(
    source: SessionSource,
    *,
    group_sessions_per_user: bool = True,
    thread_sessions_per_user: bool = False,
    resolve_identity: AliasResolver | None = None,
) -> KeyParts:
    platform = str(source.platform)
    chat_id = source.chat_id or None
    participant = source.participant_id
    if source.platform == Platform.WHATSAPP:
        # DM chat ids and participants are people, so they are canonicalised; group ids are not.
        if chat_id and source.chat_type is ChatType.DM:
            chat_id = canonical_whatsapp_identifier(chat_id, resolve_identity)
        if participant:
            participant = canonical_whatsapp_identifier(participant, resolve_identity)
    if source.chat_type is ChatType.DM:
        if chat_id:
            return KeyParts(platform, "dm", chat_id, source.thread_id)
        return KeyParts(platform, "dm", None, None, participant)
    per_user = is_per_user(
        source,
        group_sessions_per_user=group_sessions_per_user,
        thread_sessions_per_user=thread_sessions_per_user,
    )
    return KeyParts(
        platform,
        str(source.chat_type),
        chat_id,
        source.thread_id,
        participant if per_user else None,
    )


def format_session_key(parts: KeyParts) -> str:
    out = [parts.namespace, parts.platform, parts.chat_type]
    if parts.chat_id is not None:
        out.append(escape_component(parts.chat_id))
    if parts.thread_id is not None:
        tag = THREAD_TAG if parts.tagged == "thread" else ""
        out.append(tag + escape_component(parts.thread_id))
    if parts.participant_id is not None:
        tag = PARTICIPANT_TAG if parts.tagged == "participant" else ""
        out.append(tag + escape_component(parts.participant_id))
    return ":".join(out)


def build_session_key(
    source: SessionSource,
    group_sessions_per_user: bool = True,
    thread_sessions_per_user: bool = False,
    *,
    resolve_identity: AliasResolver | None = None,
) -> str:
    return format_session_key(
        build_key_parts(
            source,
            group_sessions_per_user=group_sessions_per_user,
            thread_sessions_per_user=thread_sessions_per_user,
            resolve_identity=resolve_identity,
        )
    )


def disambiguate(parts: KeyParts) -> KeyParts:
    """The tagged variant used when `parts` collides with a different conversation's key."""
    if parts.thread_id is not None:
        return KeyParts(
            parts.platform,
            parts.chat_type,
            parts.chat_id,
            parts.thread_id,
            parts.participant_id,
            parts.namespace,
            "thread",
        )
    if parts.participant_id is not None:
        return KeyParts(
            parts.platform,
            parts.chat_type,
            parts.chat_id,
            None,
            parts.participant_id,
            parts.namespace,
            "participant",
        )
    return parts


def parse_session_key(key: str) -> dict[str, Any]:
    """The inverse of `build_session_key`: `format_session_key(parts)` of the result is `key`.

    Positions are read as the default configuration builds them; tagged components say what
    they are. Raises `ValueError` for anything that is not a session key.
    """
    if not isinstance(key, str) or not key or len(key) > _MAX_KEY_CHARS:
        raise ValueError("invalid session key")
    pieces = key.split(":")
    if len(pieces) < 4 or ":".join(pieces[:2]) != NAMESPACE:
        raise ValueError(f"invalid session key: {key!r}")
    platform, chat_type, rest = pieces[2], pieces[3], pieces[4:]
    if not platform or not chat_type or len(rest) > 3:
        raise ValueError(f"invalid session key: {key!r}")
    chat_id = thread_id = participant = None
    tagged = None
    raw: list[tuple[str | None, str]] = []
    for piece in rest:
        if piece.startswith(THREAD_TAG):
            raw.append(("thread", piece[2:]))
        elif piece.startswith(PARTICIPANT_TAG):
            raw.append(("participant", piece[2:]))
        else:
            raw.append((None, piece))
    values = [unescape_component(p) for _, p in raw]
    tags = [t for t, _ in raw]
    if any(tags):
        tagged = next(t for t in tags if t)
    if chat_type == "dm":
        if tags and tags[0] == "participant" and len(values) == 1:
            participant = values[0]
        else:
            if len(values) > 2 or "participant" in tags:
                raise ValueError(f"invalid session key: {key!r}")
            chat_id = values[0] if values else None
            thread_id = values[1] if len(values) > 1 else None
    else:
        if values:
            chat_id = values[0]
        if len(values) == 2:
            if tags[1] == "thread":
                thread_id = values[1]
            else:
                participant = values[1]
        elif len(values) == 3:
            thread_id, participant = values[1], values[2]
    if tags and tags[0] is not None and not (chat_type == "dm" and tagged == "participant"):
        raise ValueError(f"invalid session key: {key!r}")
    parts = KeyParts(platform, chat_type, chat_id, thread_id, participant, NAMESPACE, tagged)
    if format_session_key(parts) != key:
        raise ValueError(f"invalid session key: {key!r}")
    result = parts.as_dict()
    result["components"] = values
    result["tagged"] = tagged
    return result
