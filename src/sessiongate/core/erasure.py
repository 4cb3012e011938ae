"""The rules of a right-to-erasure request, as pure functions (the store applies them).

A *subject* is one person on one platform (`telegram:42`). A lane belongs to them when its key
says so: a DM with them (the chat or the participant is theirs) or a per-user lane of a group
or thread (the participant is theirs). Such lanes are deleted whole. In a shared lane their
stored messages are found by the senders recorded on each user message (`metadata.senders`,
one `{user_id, chars}` per merged part); a message that is all theirs becomes a tombstone, and
so does what the agent wrote in answer to it in the same turn; a merged message keeps the
other senders' parts.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.core.identity import normalize_whatsapp_identifier

if TYPE_CHECKING:
    from collections.abc import Collection

    from sessiongate.core.keys import KeyParts

__all__ = [
    "TOMBSTONE_TEXT",
    "Redaction",
    "Subject",
    "lane_belongs_to",
    "parse_subject",
    "redact_user_message",
    "subject_hash",
]

# What a tombstoned message says in its place (the model and every reader see it).
TOMBSTONE_TEXT = "[message erased at the sender's request]"

_PLATFORM = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_MAX_ID = 512


@dataclass(frozen=True, slots=True)
class Subject:
    """One person to erase: a platform and the ids they are known by there."""

    platform: str
    user_id: str

    @property
    def text(self) -> str:
        return f"{self.platform}:{self.user_id}"

    def ids(self) -> set[str]:
        """The spellings of the id a lane key or a sender record may hold (aliases are
        added by the store, which knows them)."""
        found = {self.user_id}
        if self.platform == "whatsapp":
            normal = normalize_whatsapp_identifier(self.user_id)
            if normal:
                found.add(normal)
        return found


def parse_subject(text: object) -> Subject:
    """`<platform>:<user_id>` as a `Subject`; `ValueError` naming the problem otherwise."""
    if not isinstance(text, str):
        raise ValueError("the user is a string, <platform>:<user_id>")
    platform, colon, user_id = text.strip().partition(":")
    if not colon or not user_id.strip():
        raise ValueError(f"{text[:80]!r} is not <platform>:<user_id> (e.g. telegram:42)")
    platform = platform.strip().lower()
    if not _PLATFORM.fullmatch(platform):
        raise ValueError(f"{platform[:40]!r} is not a platform name")
    user_id = user_id.strip()
    if len(user_id) > _MAX_ID or any(ord(ch) < 32 for ch in user_id):
        raise ValueError("the user id is 1 to 512 printable characters")
    return Subject(platform, user_id)


def subject_hash(subject: Subject, salt: bytes) -> str:
    """What the audit record keeps of the subject: an HMAC-SHA256 under the home's own salt,
    so a receipt can be matched to a later request for the same person without naming them."""
    return hmac.new(salt, subject.text.encode("utf-8"), hashlib.sha256).hexdigest()


def lane_belongs_to(parts: KeyParts, platform: str, ids: Collection[str]) -> bool:
    """Whether the lane with these key components is the person's own: a DM with them, or a
    per-user lane (their participant component) of a group, channel or thread."""
    if parts.platform != platform:
        return False
    if parts.participant_id is not None and parts.participant_id in ids:
        return True
    return parts.chat_type == "dm" and parts.chat_id is not None and parts.chat_id in ids


@dataclass(frozen=True, slots=True)
class Redaction:
    """What becomes of one user message: `whole` (a tombstone, with the turn's answers) or
    the other senders' text and sender records."""

    whole: bool
    content: str
    payload: dict[str, Any]


def redact_user_message(
    content: str, payload: dict[str, Any] | None, ids: Collection[str]
) -> Redaction | None:
    """The message without the person's parts, or None when none of it is theirs.

    Parts are located by the lengths recorded with them (joined by newlines, in order);
    attachment lines after the parts belong to the message as a whole and go with a
    tombstone. A record whose lengths do not add up is treated as all the person's when any
    part is theirs: an erasure never keeps text it cannot attribute."""
    meta = (payload or {}).get("metadata")
    senders = meta.get("senders") if isinstance(meta, dict) else None
    if not isinstance(senders, list) or not senders:
        return None
    theirs = [isinstance(s, dict) and str(s.get("user_id")) in ids for s in senders]
    if not any(theirs):
        return None
    if all(theirs):
        return _tombstone(payload)
    kept: list[str] = []
    kept_senders: list[dict[str, Any]] = []
    at = 0
    for sender, mine in zip(senders, theirs, strict=True):
        chars = sender.get("chars") if isinstance(sender, dict) else None
        if not isinstance(chars, int) or chars < 0 or at + chars > len(content):
            return _tombstone(payload)
        if not mine:
            kept.append(content[at : at + chars])
            kept_senders.append(sender)
        at += chars + 1  # the newline that joined the parts
    new_payload = dict(payload or {})
    new_meta = dict(meta) if isinstance(meta, dict) else {}
    new_meta["senders"] = kept_senders
    new_meta["erased_parts"] = len(senders) - len(kept_senders)
    new_meta.pop("media", None)
    new_payload["metadata"] = new_meta
    return Redaction(False, "\n".join(kept), new_payload)


def _tombstone(payload: dict[str, Any] | None) -> Redaction:
    meta = (payload or {}).get("metadata")
    kept: dict[str, Any] = {"erased": True}
    if isinstance(meta, dict) and isinstance(meta.get("turn_id"), int):
        kept["turn_id"] = meta["turn_id"]
    return Redaction(True, TOMBSTONE_TEXT, {"metadata": kept})
