"""`KitSettings`: what the kit's policies take from `platforms.<name>` of the config."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sessiongate.adapters.kit.access import AccessPolicy
from sessiongate.adapters.kit.bursts import MergePolicy
from sessiongate.adapters.kit.gating import GatePolicy, compile_patterns
from sessiongate.adapters.kit.loop_guard import LoopGuardPolicy

if TYPE_CHECKING:
    from sessiongate.core.config import PlatformConfig

__all__ = ["KitSettings", "ReplyToMode"]

ReplyToMode = Literal["off", "first", "all"]


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
