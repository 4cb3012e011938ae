"""The values at the gateway's edge and the one seam adapters see.

`MessageEvent` is one inbound message as an adapter hands it over; `Receipt` is what the
gateway answers for it; `Inbox` is what an adapter (and an agent's tools) is given to hand
messages to: `handle_message`, and the store the adapter keeps its platform state in.
`GatewayRunner` is the one implementation; adapters never see more of it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from sessiongate.store.lanes import Inbound

if TYPE_CHECKING:
    from sessiongate.core.source import SessionSource
    from sessiongate.store.session_store import SessionStore

__all__ = ["Inbox", "MessageEvent", "MessageType", "Receipt", "ReceiptStatus"]


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


class ReceiptStatus(enum.StrEnum):
    REPLIED = "replied"  # the turn that consumed the message replied (`reply`)
    QUEUED = "queued"  # accepted durably; the turn runs later (wait=False, or at shutdown)
    DUPLICATE = "duplicate"  # seen before: no second turn; `reply` is the first turn's, if any
    UNAUTHORIZED = "unauthorized"  # the sender is not on the platform's allow list
    QUEUE_FULL = "queue_full"  # the lane's queue is at its cap; nothing was written
    COMMAND = "command"  # a slash command ran; `reply` is its answer
    FAILED = "failed"  # the turn failed (agent error or timeout); `reply` is the notice
    INTERRUPTED = "interrupted"  # the turn was interrupted (follow-up, /stop, /new, stale)
    ARCHIVED = "archived"  # the session is archived and takes no new work; nothing was written
    # An operator has taken the lane over: the message is stored in the transcript, and no
    # turn runs for it (the operator answers; the agent sees it at its next turn).
    HELD = "held"
    # The disk refused the turn's outcome: the message stays accepted and the gateway keeps
    # retrying; the lane takes no further turn meanwhile, so order is kept. Also the answer
    # to a message that arrives while the runner stops: nothing was written, retry later.
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True, slots=True)
class Receipt:
    session_key: str
    session_id: str | None
    status: str
    reply: str | None
    turn_id: int | None


class Inbox(Protocol):
    """Where inbound messages go: what an adapter's `start` and an agent's tools are given.

    `handle_message` is the seam: route, authorise, accept durably and (with `wait`) return
    once the message's turn has an outcome. `store` is the session store, for what an adapter
    keeps of its platform (pairing codes, identity aliases) and what tools read of sessions.
    """

    store: SessionStore

    async def handle_message(self, event: MessageEvent, *, wait: bool = True) -> Receipt:
        """Hand one inbound message over; see `GatewayRunner.handle_message`."""
        ...
