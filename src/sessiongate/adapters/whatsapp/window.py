"""The 24-hour customer-service window: when a business may answer a WhatsApp user freely.

Meta lets a business send free-form messages to a user only within 24 hours of that user's
last message; after that only an approved template goes out (the Graph API refuses anything
else with error 131047). `ServiceWindow` remembers when each chat last wrote (the platform's
own timestamp, at admission) and says, before a reply is sent, whether it would be refused and
why, so the reply fails with that reason instead of being posted into a refusal. After a
restart a chat it has not seen yet is looked up once through `last_seen` (the session's last
interaction, kept in the store). Groups are not windowed here: the platform's answer decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from sessiongate.core.clock import Clock

__all__ = ["WINDOW_SECONDS", "ServiceWindow", "WindowClosed"]

# Meta's customer-service window: 24 hours from the user's last message.
WINDOW_SECONDS = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class WindowClosed:
    """Why a reply to `chat_id` cannot go out as free-form text."""

    chat_id: str
    hours_since: float | None  # None: the user never wrote (nothing to answer within)

    @property
    def reason(self) -> str:
        if self.hours_since is None:
            return (
                "outside WhatsApp's 24-hour customer-service window: this user has not "
                "written to the business number; only a template message can reach them"
            )
        return (
            "outside WhatsApp's 24-hour customer-service window: the user last wrote "
            f"{self.hours_since:.1f} hours ago; only a template message can reach them until "
            "they write again"
        )


class ServiceWindow:
    def __init__(
        self,
        *,
        clock: Clock,
        last_seen: Callable[[str], datetime | None] | None = None,
        seconds: float = WINDOW_SECONDS,
    ) -> None:
        self._clock = clock
        self._last_seen = last_seen
        self._seconds = seconds
        # chat id -> the epoch seconds of the user's last message.
        self._last: dict[str, float] = {}

    def saw(self, chat_id: str, at: float | None) -> None:
        """The user of `chat_id` wrote at `at` (epoch seconds; None: now)."""
        now = self._clock.now().timestamp()
        when = now if at is None else min(at, now)
        if when > self._last.get(chat_id, float("-inf")):
            self._last[chat_id] = when

    def check(self, chat_id: str) -> WindowClosed | None:
        """None while a free-form reply may go to `chat_id`, else why not."""
        last = self._last.get(chat_id)
        if last is None and self._last_seen is not None:
            seen = self._last_seen(chat_id)
            if seen is not None:
                last = self._last[chat_id] = seen.timestamp()
        if last is None:
            return WindowClosed(chat_id, None)
        age = self._clock.now().timestamp() - last
        if age <= self._seconds:
            return None
        return WindowClosed(chat_id, age / 3600.0)
