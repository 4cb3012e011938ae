"""Whether an inbound platform message should start a turn at all (before access checks).

A platform's `payloads.py` reduces its event to `MessageFacts`; `decide_gate` is one pure rule
over them, so every adapter gates the same way and the contract suite checks it once:

- never the bot's own messages, nor other bots' (a loop guard; `allow_bots` opts in);
- edits and deletions start no turn unless `answer_edits` (checklist 9);
- in DMs everything passes; in groups and channels, with `require_mention` (the default), only
  an @mention, a reply to the bot, a command addressed `/cmd@bot`, a configured pattern, or a
  message in a thread the bot already takes part in; a command addressed to another bot
  (`/cmd@other`) never passes.
"""

from __future__ import annotations

import enum
import logging
import re
from dataclasses import dataclass

from sessiongate.core.source import ChatType

__all__ = ["GatePolicy", "GateReason", "MessageFacts", "compile_patterns", "decide_gate", "passes"]

log = logging.getLogger(__name__)


class GateReason(enum.StrEnum):
    """Why a message passes or not (logged at debug with the chat id, checklist 31)."""

    DM = "dm"
    MENTIONED = "mentioned"
    REPLY_TO_BOT = "reply_to_bot"
    COMMAND_TO_BOT = "command_to_bot"
    PATTERN = "pattern"
    THREAD_JOINED = "thread_joined"
    OPEN_GROUP = "open_group"
    OWN_MESSAGE = "own_message"
    OTHER_BOT = "other_bot"
    EDIT = "edit"
    DELETION = "deletion"
    COMMAND_TO_OTHER = "command_to_other_bot"
    NOT_ADDRESSED = "not_addressed"
    EMPTY = "empty"


_PASSING = frozenset(
    {
        GateReason.DM,
        GateReason.MENTIONED,
        GateReason.REPLY_TO_BOT,
        GateReason.COMMAND_TO_BOT,
        GateReason.PATTERN,
        GateReason.THREAD_JOINED,
        GateReason.OPEN_GROUP,
    }
)


@dataclass(frozen=True, slots=True)
class MessageFacts:
    """What the gate needs to know about one inbound event, platform-neutral."""

    chat_type: ChatType
    text: str = ""
    has_media: bool = False
    is_own: bool = False
    is_bot: bool = False
    is_edit: bool = False
    is_deletion: bool = False
    mentions_bot: bool = False
    reply_to_bot: bool = False
    # `/cmd@this_bot`; `/cmd@other_bot` is `command_to_other`.
    command_to_bot: bool = False
    command_to_other: bool = False
    in_joined_thread: bool = False


@dataclass(frozen=True, slots=True)
class GatePolicy:
    require_mention: bool = True
    answer_edits: bool = False
    allow_bots: bool = False
    patterns: tuple[re.Pattern[str], ...] = ()


def compile_patterns(patterns: list[str] | tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """Case-insensitive wake patterns; a bad one is logged and skipped, never fatal."""
    compiled: list[re.Pattern[str]] = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except re.error as exc:
            log.warning("mention pattern ignored", extra={"pattern": pattern, "error": str(exc)})
    return tuple(compiled)


def passes(reason: GateReason) -> bool:
    return reason in _PASSING


def decide_gate(facts: MessageFacts, policy: GatePolicy) -> GateReason:
    """The reason the message passes (`passes(reason)`) or is dropped."""
    if facts.is_own:
        return GateReason.OWN_MESSAGE
    if facts.is_bot and not policy.allow_bots:
        return GateReason.OTHER_BOT
    if facts.is_deletion:
        return GateReason.DELETION
    if facts.is_edit and not policy.answer_edits:
        return GateReason.EDIT
    if not facts.text.strip() and not facts.has_media:
        return GateReason.EMPTY
    if facts.command_to_other:
        return GateReason.COMMAND_TO_OTHER
    if facts.chat_type is ChatType.DM:
        return GateReason.DM
    if facts.command_to_bot:
        return GateReason.COMMAND_TO_BOT
    if facts.mentions_bot:
        return GateReason.MENTIONED
    if facts.reply_to_bot:
        return GateReason.REPLY_TO_BOT
    if facts.in_joined_thread:
        return GateReason.THREAD_JOINED
    if any(p.search(facts.text) for p in policy.patterns):
        return GateReason.PATTERN
    if not policy.require_mention:
        return GateReason.OPEN_GROUP
    return GateReason.NOT_ADDRESSED
