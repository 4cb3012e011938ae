"""Messages a client split: parts of one long paste merged back into one inbound turn.

A platform client splits a paste longer than its limit into several messages sent in quick
succession (Telegram's apps cut at 4,096 UTF-16 units): answered one by one, the agent would
reply to a fragment, then be interrupted by the rest. The kit holds a part that *looks split*
(its length, measured the platform's way, is at least `min_length`, by default 95% of the
platform's limit) for `window` seconds on the injected clock; the same sender's next messages in
the same chat and thread that arrive meanwhile join it, and the whole goes to the gateway as
one message. Each part that again looks split extends the window, never beyond
`MAX_HOLD_WINDOWS` windows after the first part, so a hold is always bounded.

Only plain text merges: never across senders, chats or threads, never a command, an edit, or a
message with attachments. A message that does not look split is never delayed. Albums are the
one exception: the items of one album (Telegram's `media_group_id`) are held the same way and
merged into one message with all their attachments. Nothing is
acknowledged to the platform while it is held: the `admit` call of every part returns only
once the merged message was durably accepted (or the hand-off failed, and every part's claim is
released for its redelivery).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from sessiongate.adapters.kit.events import Admission, PlatformEvent

__all__ = ["MAX_HOLD_WINDOWS", "Burst", "MergePolicy", "looks_split", "merge_key", "merged"]

# A hold ends at the latest this many windows after its first part (a client that keeps
# sending limit-sized parts cannot hold a chat for ever).
MAX_HOLD_WINDOWS = 4
# Commands are never merged: `/cmd` everywhere, `!cmd` where `/` is unavailable.
_COMMAND_PREFIXES = ("/", "!")
_COMMAND_KINDS = frozenset({"interaction", "slash_command"})


@dataclass(frozen=True, slots=True)
class MergePolicy:
    # 0 turns merging off.
    window: float = 1.0
    # None: 95% of the platform's message limit (set by the adapter from its rendering).
    min_length: int | None = None


def merge_key(event: PlatformEvent) -> str | None:
    """The (chat, thread, sender) a part may merge within; None for what never merges."""
    source, facts = event.source, event.facts
    if source is None or facts is None or not source.user_id:
        return None
    if facts.is_edit or facts.is_deletion or event.kind in _COMMAND_KINDS:
        return None
    if event.group_id is not None:
        return "\x00".join((source.chat_id, source.thread_id or "", source.user_id,
                             f"album:{event.group_id}"))  # fmt: skip
    if event.attachments:
        return None
    if not event.text.strip() or event.text.lstrip().startswith(_COMMAND_PREFIXES):
        return None
    return "\x00".join((source.chat_id, source.thread_id or "", source.user_id))


def looks_split(event: PlatformEvent, *, min_length: int, measure: Callable[[str], int]) -> bool:
    """A part more may follow: a full-length text, or any item of an album."""
    if merge_key(event) is None:
        return False
    return event.group_id is not None or measure(event.text) >= min_length


def merged(parts: list[PlatformEvent]) -> PlatformEvent:
    """The parts as one message: the first part's ids and anchor, the texts joined."""
    first = parts[0]
    if len(parts) == 1:
        return first
    text = "\n".join(p.text for p in parts if p.text)
    return replace(first, text=text, attachments=tuple(a for p in parts for a in p.attachments))


@dataclass(slots=True)
class Burst:
    """The parts held for one (chat, thread, sender) while its window runs."""

    key: str
    parts: list[PlatformEvent]
    deadline: float
    latest: float
    # The merged message's admission; every part's `admit` waits for it.
    done: asyncio.Future[Admission] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @classmethod
    def open(cls, key: str, first: PlatformEvent, *, now: float, window: float) -> Burst:
        burst = cls(key, [first], now + window, now + window * MAX_HOLD_WINDOWS)
        # A failed hand-off with no part joined from elsewhere has nobody awaiting it.
        burst.done.add_done_callback(lambda f: f.cancelled() or f.exception())
        return burst

    def add(self, part: PlatformEvent, *, now: float, window: float, split: bool) -> None:
        self.parts.append(part)
        if split:
            # Another full part: more may follow.
            self.deadline = min(self.latest, max(self.deadline, now + window))
