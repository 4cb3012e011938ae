"""The kit's plain data: what a platform maps its events to, what `admit` answers, the
commands a platform registers, and the adapter's statistics (its settings: `settings.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sessiongate.gateway.messages import MessageType

if TYPE_CHECKING:
    from sessiongate.adapters.kit.gating import MessageFacts
    from sessiongate.adapters.kit.media import Attachment
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.messages import Receipt

__all__ = [
    "AdapterStatistics",
    "Admission",
    "PlatformCommand",
    "PlatformEvent",
    "gateway_commands",
]


@dataclass(frozen=True, slots=True)
class PlatformEvent:
    """One inbound platform event, as a platform's `payloads.py` maps it.

    `source` is None for events the kit ignores (kinds it does not handle). `parent` is the
    parent chat's source when the message is in a thread or topic: the thread's first message
    forks its session from the parent's.
    """

    event_id: str
    source: SessionSource | None
    facts: MessageFacts | None = None
    text: str = ""
    attachments: tuple[Attachment, ...] = ()
    message_type: MessageType = MessageType.TEXT
    message_id: str | None = None
    reply_to: str | None = None
    parent: SessionSource | None = None
    kind: str = "message"
    # When the platform says the message was sent (epoch seconds), for the backlog policy.
    sent_at: float | None = None
    # The album a message is one item of (Telegram's `media_group_id`): merged into one.
    group_id: str | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    """What `admit` did: `status` is one of duplicate, dropped, pairing, too_large, accepted."""

    status: str
    reason: str | None = None
    receipt: Receipt | None = None


@dataclass(frozen=True, slots=True)
class PlatformCommand:
    name: str
    description: str


@dataclass(frozen=True, slots=True)
class AdapterStatistics:
    connected: bool
    receiving: bool
    events: int
    accepted: int
    duplicates: int
    dropped: int
    pairing_codes: int
    sent: int
    refused: int
    unconfirmed: int
    plain_resends: int
    rate_limited: int
    reconnects: int
    stalls: int
    merged: int = 0
    files: int = 0
    # Receiving has failed `Backoff.max_attempts` times in a row: still retrying (with the
    # capped backoff), but the platform is reported unhealthy until a receive succeeds.
    degraded: bool = False
    receive_failures: int = 0


def gateway_commands() -> list[PlatformCommand]:
    """The gateway's slash commands, as platforms register them."""
    from sessiongate.gateway.commands import COMMANDS

    return [PlatformCommand(spec.name, spec.summary) for spec in COMMANDS.values()]
