"""Session keys: the deterministic name of a conversation lane.

Format (spec §4): `agent:main:{platform}:{chat_type}[:{chat_id}][:{thread_id}][:{participant_id}]`.
Components are percent-escaped (`%` → `%25`, `:` → `%3A`, control characters → `%XX`) so an id
containing `:` cannot shift positions; ordinary ids give keys byte-identical to the spec's.

The format still has positional look-alikes (a group's shared thread `X` and its user `X`; a DM
keyed by chat id `X` and one keyed by participant `X`). The store resolves those with
`disambiguate`: one component of the newcomer gets a tag (`%t` thread, `%p` participant, `%c`
chat) that escaping can never produce, since an escaped `%` is always followed by two upper-case
hex digits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from sessiongate.core.identity import AliasResolver, canonical_whatsapp_identifier
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.errors import InvalidSessionKeyError

__all__ = [
    "MAX_KEY_CHARS",
    "NAMESPACE",
    "KeyParts",
    "build_key_parts",
    "build_session_key",
    "check_key_text",
    "disambiguate",
    "escape_component",
    "fork_key",
    "format_session_key",
    "is_per_user",
    "is_shared_multi_user_session",
    "parse_session_key",
    "unescape_component",
]

NAMESPACE = "agent:main"
THREAD_TAG = "%t"
PARTICIPANT_TAG = "%p"
CHAT_TAG = "%c"
FORK_TAG = "%f"
_FORK_ID = re.compile(r"[0-9a-f]{4,32}")
_TAGS = {THREAD_TAG: "thread", PARTICIPANT_TAG: "participant", CHAT_TAG: "chat"}
# Every Unicode control character (C0, DEL, C1) is escaped: `\x85` and friends end a line for
# `str.splitlines` and in some log viewers, so a key must never carry one raw.
_ESCAPE = re.compile(r"[%:\x00-\x1f\x7f-\x9f]")
_RAW_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Longer than any key the builder makes from a valid request; a bound for hostile input.
MAX_KEY_CHARS = 4096
_VALID_ESCAPED = re.compile(r"(?:[^%:\x00-\x1f\x7f-\x9f]|%[0-9A-F]{2})*")
_CHAT_TYPES = frozenset(str(t) for t in ChatType)


@dataclass(frozen=True, slots=True)
class KeyParts:
    """The structured components of a key; the store keeps these as columns."""

    platform: str
    chat_type: str
    chat_id: str | None = None
    thread_id: str | None = None
    participant_id: str | None = None
    namespace: str = NAMESPACE
    # Which component carries a disambiguation tag, if any ("chat", "thread" or "participant").
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
        raise InvalidSessionKeyError(f"invalid key component: {value!r}", component=value)
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

    A per-user lane with no participant id to key on is shared in fact, and said so. Derived
    from the key's own parts, so the prompt's wording can never disagree with the key.
    """
    if source.chat_type is ChatType.DM:
        return False
    parts = build_key_parts(
        source,
        group_sessions_per_user=group_sessions_per_user,
        thread_sessions_per_user=thread_sessions_per_user,
    )
    return parts.participant_id is None


def build_key_parts(
    source: SessionSource,
    *,
    group_sessions_per_user: bool = True,
    thread_sessions_per_user: bool = False,
    resolve_identity: AliasResolver | None = None,
) -> KeyParts:
    platform = str(source.platform)
    chat_id = source.chat_id
    participant = source.participant_id
    if source.platform == Platform.WHATSAPP:
        # DM chat ids and participants are people, so they are canonicalised; group ids are not.
        # An id that normalises to nothing (`@lid`, `+`) is treated as absent, not as "".
        if chat_id and source.chat_type is ChatType.DM:
            chat_id = canonical_whatsapp_identifier(chat_id, resolve_identity)
        if participant:
            participant = canonical_whatsapp_identifier(participant, resolve_identity) or None
    if source.chat_type is ChatType.DM:
        if chat_id:
            return KeyParts(platform, "dm", chat_id, source.thread_id)
        # No chat id: the participant names the DM and the thread still tells its threads
        # apart (`dm:<participant>:<thread>`, or `dm:<thread>` with no participant); only a DM
        # with no identifier at all falls into the platform's shared sink.
        return KeyParts(platform, "dm", None, source.thread_id or None, participant)
    per_user = is_per_user(
        source,
        group_sessions_per_user=group_sessions_per_user,
        thread_sessions_per_user=thread_sessions_per_user,
    )
    # Outside DMs the chat id always holds its position, even when empty, so a thread or a
    # participant can never slide into the chat id's place and pass for another group.
    return KeyParts(
        platform,
        str(source.chat_type),
        chat_id,
        source.thread_id,
        participant if per_user else None,
    )


def format_session_key(parts: KeyParts) -> str:
    out = [parts.namespace, parts.platform, parts.chat_type]
    chat = _component(parts.chat_id, CHAT_TAG, parts.tagged == "chat")
    thread = _component(parts.thread_id, THREAD_TAG, parts.tagged == "thread")
    participant = _component(parts.participant_id, PARTICIPANT_TAG, parts.tagged == "participant")
    # A DM named by its participant reads like the reference's: the participant, then the
    # thread (`dm:<participant>:<thread>`); everywhere else the thread comes first.
    order: tuple[str | None, ...]
    if parts.chat_type == ChatType.DM and parts.chat_id is None:
        order = (participant, thread)
    else:
        order = (chat, thread, participant)
    out.extend(piece for piece in order if piece is not None)
    return ":".join(out)


def _component(value: str | None, tag: str, tagged: bool) -> str | None:
    if value is None:
        return None
    return (tag if tagged else "") + escape_component(value)


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
    """The tagged variant used when `parts` collides with a different conversation's key.

    The tag goes on the thread if there is one, else the participant, else the chat id; a key
    with no component at all (the shared DM sink) cannot collide with different components.
    A DM named by its participant tags the participant: it leads the key, and a tag there is
    what tells `dm:%p<participant>:<thread>` from a DM's chat id and thread.
    """
    if parts.chat_type == ChatType.DM and parts.chat_id is None and parts.participant_id:
        return replace(parts, tagged="participant")
    for name, value in (
        ("thread", parts.thread_id),
        ("participant", parts.participant_id),
        ("chat", parts.chat_id),
    ):
        if value is not None:
            return replace(parts, tagged=name)
    return parts


def parse_session_key(key: object) -> dict[str, Any]:
    """The inverse of `build_session_key`: `format_session_key(parts)` of the result is `key`.

    Positions are read as the default configuration builds them (a lone component after a
    non-DM chat id is the participant); tagged components say what they are. Raises
    `InvalidSessionKeyError` (a `ValueError`) for anything that is not a session key.
    """
    if not isinstance(key, str) or not key:
        raise _invalid(key)
    base, _, last = key.rpartition(":")
    if last.startswith(FORK_TAG):
        # A fork's key is its parent's key plus a fork id (see `fork_key`).
        if not _FORK_ID.fullmatch(last[2:]):
            raise _invalid(key)
        result = parse_session_key(base)
        result["fork_id"] = last[2:]
        return result
    pieces = key.split(":")
    if len(pieces) < 4 or ":".join(pieces[:2]) != NAMESPACE or len(pieces) > 7:
        raise _invalid(key)
    platform, chat_type, rest = pieces[2], pieces[3], pieces[4:]
    if not platform.isidentifier() or chat_type not in _CHAT_TYPES:
        raise _invalid(key)
    tags = [_TAGS.get(piece[:2]) for piece in rest]
    values = [
        unescape_component(piece[2:] if tag else piece)
        for piece, tag in zip(rest, tags, strict=True)
    ]
    names = _positions(chat_type, tags)
    tagged = [tag for tag in tags if tag]
    # A tag must name the component at its position, and at most one component is tagged.
    if (
        len(names) != len(values)
        or len(tagged) > 1
        or any(tag not in (None, name) for tag, name in zip(tags, names, strict=True))
    ):
        raise _invalid(key)
    found = dict(zip(names, values, strict=True))
    parts = KeyParts(
        platform,
        chat_type,
        found.get("chat"),
        found.get("thread"),
        found.get("participant"),
        NAMESPACE,
        tagged[0] if tagged else None,
    )
    # Catches every non-canonical spelling (lower-case or needless escapes) in one check.
    if format_session_key(parts) != key:
        raise _invalid(key)
    result = parts.as_dict()
    result["components"] = values
    result["tagged"] = parts.tagged
    result["fork_id"] = None
    return result


def check_key_text(key: str) -> str:
    """`key` if a stored key could be it, else `InvalidSessionKeyError`: 1 to `MAX_KEY_CHARS`
    characters and no raw control character (the builder escapes them; raw, `\x85` and friends
    make a key pass for another one in listings). Keys imported from a legacy store need not
    parse, so this checks only what no key can hold."""
    if not key or len(key) > MAX_KEY_CHARS:
        raise InvalidSessionKeyError(
            f"invalid session key: a key is 1 to {MAX_KEY_CHARS} characters", session_key=key
        )
    if _RAW_CONTROL.search(key):
        raise InvalidSessionKeyError(
            f"invalid session key {key[:200]!r}: it holds a raw control character",
            session_key=key,
        )
    return key


def fork_key(parent_key: str, fork_id: str) -> str:
    """The key of a fork of `parent_key`; no source can build it, so it never collides."""
    if not _FORK_ID.fullmatch(fork_id):
        raise ValueError(f"invalid fork id: {fork_id!r}")
    return f"{parent_key}:{FORK_TAG}{fork_id}"


def _invalid(key: object) -> InvalidSessionKeyError:
    return InvalidSessionKeyError(f"invalid session key: {key!r}", session_key=key)


def _positions(chat_type: str, tags: list[str | None]) -> tuple[str, ...]:
    """What each component after the chat type is, read the way the builder writes them."""
    count = len(tags)
    if chat_type == ChatType.DM:
        # Untagged, a DM's components read as chat id and thread; a tagged participant leads
        # (`dm:%pP[:T]`), and a tagged lone thread is a DM named by its thread alone.
        if count and tags[0] == "participant":
            return ("participant", "thread")[:count]
        if count == 1 and tags[0] == "thread":
            return ("thread",)
        return ("chat", "thread")[:count]
    if count == 2 and tags[1] == "thread":
        return ("chat", "thread")
    if count == 2:
        return ("chat", "participant")
    return ("chat", "thread", "participant")[:count]
