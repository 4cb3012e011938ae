"""`SessionSource`: a frozen record of where a message came from."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from sessiongate.core.platform import Platform

__all__ = ["ChatType", "SessionSource"]


class ChatType(enum.StrEnum):
    DM = "dm"
    GROUP = "group"
    CHANNEL = "channel"
    THREAD = "thread"

    @classmethod
    def parse(cls, value: object) -> ChatType:
        text = str(value).strip().lower() if value is not None else "dm"
        text = _CHAT_TYPE_ALIASES.get(text, text)
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"unknown chat type: {value!r}") from None


_CHAT_TYPE_ALIASES = {"direct": "dm", "private": "dm", "room": "group", "supergroup": "group"}

_OPTIONAL_TEXT = (
    "chat_name",
    "user_id",
    "user_name",
    "thread_id",
    "chat_topic",
    "user_id_alt",
    "chat_id_alt",
    "guild_id",
    "parent_chat_id",
    "message_id",
)


@dataclass(frozen=True, slots=True)
class SessionSource:
    platform: Platform
    chat_id: str
    chat_name: str | None = None
    chat_type: ChatType = ChatType.DM
    user_id: str | None = None
    user_name: str | None = None
    thread_id: str | None = None
    chat_topic: str | None = None
    user_id_alt: str | None = None
    chat_id_alt: str | None = None
    is_bot: bool = False
    guild_id: str | None = None
    parent_chat_id: str | None = None
    message_id: str | None = None
    role_authorized: bool = False

    def __post_init__(self) -> None:
        # Normalise once at the edge so every rule below can trust the types. Values that are
        # already normal (members, non-empty `str`) are left as they are: a source is built
        # for every inbound message, a new conversation's first among them.
        if self.platform.__class__ is not Platform:
            object.__setattr__(self, "platform", Platform(self.platform))
        if self.chat_type.__class__ is not ChatType:
            object.__setattr__(self, "chat_type", ChatType.parse(self.chat_type))
        if self.chat_id.__class__ is not str or not self.chat_id:
            object.__setattr__(self, "chat_id", _text(self.chat_id) or "")
        for name in _OPTIONAL_TEXT:
            value = getattr(self, name)
            if value is not None and (value.__class__ is not str or not value):
                object.__setattr__(self, name, _text(value))

    @property
    def participant_id(self) -> str | None:
        """The stable per-user id: `user_id_alt` wins over an ephemeral `user_id`."""
        return self.user_id_alt or self.user_id

    @property
    def description(self) -> str:
        if self.chat_type is ChatType.DM:
            who = self.user_name or self.user_id or self.chat_id or "unknown"
            text = f"DM with {who}"
        else:
            text = f"{self.chat_type.value}: {self.chat_name or self.chat_id}"
        if self.thread_id:
            text += f", thread: {self.thread_id}"
        return text

    def to_dict(self) -> dict[str, Any]:
        # Field names computed once (`dataclasses.fields` per call was a tenth of the cost of
        # creating a conversation); the enums are StrEnums, so `str()` is their value.
        out: dict[str, Any] = {}
        for name in _SOURCE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, (Platform, ChatType)):
                value = str(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionSource:
        if not isinstance(data, Mapping):
            raise ValueError("a session source must be an object")
        if "platform" not in data:
            raise ValueError("a session source needs a platform")
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known and v is not None}
        for flag in ("is_bot", "role_authorized"):
            if flag in kwargs and not isinstance(kwargs[flag], bool):
                raise ValueError(f"{flag} must be a boolean")
        kwargs.setdefault("chat_id", "")
        return cls(**kwargs)


_SOURCE_FIELDS = tuple(f.name for f in fields(SessionSource))


def _text(value: object) -> str | None:
    """Platform ids arrive as ints from some SDKs; keys and storage want text."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"expected text or an integer id, got {type(value).__name__}")
    text = str(value)
    return text if text != "" else None
