"""`MessageEvent`: one inbound message as an adapter hands it to the runner."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sessiongate.store.lanes import Inbound

if TYPE_CHECKING:
    from sessiongate.core.source import SessionSource

__all__ = ["MessageEvent", "MessageType"]


class MessageType(enum.StrEnum):
    TEXT = "text"
    PHOTO = "photo"
    VIDEO = "video"
    AUDIO = "audio"
    VOICE = "voice"
    DOCUMENT = "document"
    STICKER = "sticker"
    LOCATION = "location"
    SYSTEM = "system"


@dataclass(frozen=True, slots=True)
class MessageEvent:
    """An inbound message.

    `message_id` is the platform's id (the dedup key with platform and chat id); it falls back
    to `source.message_id`. `internal` marks events the gateway itself produced (they skip the
    allow list, so adapters must never set it from user input). `event_kind` marks system events
    (`heartbeat`, `cron`, `exec`, `system`): they never extend a session's freshness and never
    interrupt a running turn (each is its own queued turn). `session_key` addresses a lane
    directly (a fork, an incognito session): the message runs on that lane, never routed by its
    source; the lane's reset policy is evaluated for the lane's own origin.
    `visible_session_id` is a reconnecting client's one-shot claim on the session it shows: if
    a reset policy has made that session stale, this one send still goes to it.
    """

    source: SessionSource
    text: str
    media: tuple[str, ...] = field(default=())
    message_type: MessageType = MessageType.TEXT
    message_id: str | None = None
    reply_to: str | None = None
    internal: bool = False
    event_kind: str | None = None
    session_key: str | None = None
    visible_session_id: str | None = None

    def __post_init__(self) -> None:
        # Normalise once at the edge: lists become tuples, ids become text.
        object.__setattr__(self, "media", tuple(str(m) for m in self.media))
        object.__setattr__(self, "message_type", MessageType(self.message_type))
        message_id = self.message_id if self.message_id is not None else self.source.message_id
        object.__setattr__(
            self, "message_id", None if message_id in (None, "") else str(message_id)
        )
        if self.reply_to is not None:
            object.__setattr__(self, "reply_to", str(self.reply_to))

    def to_inbound(self) -> Inbound:
        return Inbound(
            source=self.source,
            text=self.text,
            media=self.media,
            message_id=self.message_id,
            message_type=str(self.message_type),
            reply_to=self.reply_to,
            event_kind=self.event_kind,
            internal=self.internal,
        )
