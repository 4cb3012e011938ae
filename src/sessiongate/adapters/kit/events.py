"""The kit's plain data: what a platform maps its events to, what `admit` answers, the
settings drawn from `platforms.<name>`, and the adapter's statistics."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sessiongate.adapters.kit.access import AccessPolicy
from sessiongate.adapters.kit.bursts import MergePolicy
from sessiongate.adapters.kit.gating import GatePolicy, MessageFacts, compile_patterns
from sessiongate.adapters.kit.loop_guard import LoopGuardPolicy
from sessiongate.gateway.events import MessageType

if TYPE_CHECKING:
    from sessiongate.adapters.kit.media import Attachment
    from sessiongate.core.config import PlatformConfig
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.receipts import Receipt

ReplyToMode = Literal["off", "first", "all"]

__all__ = [
    "AdapterStatistics",
    "Admission",
    "KitSettings",
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
class KitSettings:
    gate: GatePolicy = field(default_factory=GatePolicy)
    access: AccessPolicy = field(default_factory=AccessPolicy)
    home_channel: str | None = None
    max_media_bytes: int = 20 * 1_048_576
    pairing_ttl_seconds: int = 3600
    merge: MergePolicy = field(default_factory=MergePolicy)
    loop_guard: LoopGuardPolicy = field(default_factory=LoopGuardPolicy)
    reply_to_mode: ReplyToMode = "first"
    # Folders replies may send files from (none: no files); None: the platform's upload limit.
    media_dirs: tuple[Path, ...] = ()
    max_upload_bytes: int | None = None
    # Messages older than this when they arrive (a backlog after an outage) start no turn.
    max_backlog_seconds: float | None = None

    @classmethod
    def from_config(cls, config: PlatformConfig) -> KitSettings:
        return cls(
            gate=GatePolicy(
                require_mention=config.require_mention,
                answer_edits=config.answer_edits,
                allow_bots=config.allow_bots,
                patterns=compile_patterns(config.mention_patterns),
            ),
            access=AccessPolicy.build(config.allow_from, config.dm_policy),
            home_channel=config.home_channel,
            max_media_bytes=int(config.max_media_mb * 1_048_576),
            pairing_ttl_seconds=config.pairing_ttl_seconds,
            merge=MergePolicy(
                window=config.merge_window_seconds, min_length=config.merge_min_length
            ),
            reply_to_mode=config.reply_to_mode,
            max_backlog_seconds=config.max_backlog_seconds,
            media_dirs=tuple(Path(d).expanduser().resolve() for d in config.media_dirs),
            max_upload_bytes=(
                int(config.max_upload_mb * 1_048_576) if config.max_upload_mb is not None else None
            ),
            loop_guard=LoopGuardPolicy(
                max_messages=config.bot_loop_max_messages,
                window=config.bot_loop_window_seconds,
                cooldown=config.bot_loop_cooldown_seconds,
            ),
        )


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
