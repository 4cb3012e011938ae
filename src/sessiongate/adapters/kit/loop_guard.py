"""A loop guard between bots: another bot's messages are answered at a bounded rate per chat.

Two bots that answer each other (both with `allow_bots`) reply back and forth for ever, and
each round costs a model call. With `allow_bots` on, a chat where more than `max_messages`
bot messages arrived within `window` seconds goes into a cooldown of `cooldown` seconds in
which bot messages there are dropped (logged at debug as `bot_loop_cooldown`). Human messages
are never counted and never dropped. Bots are ignored altogether by default (`allow_bots`
off), so this only bounds what an operator opted into. Time is the injected clock's.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessiongate.core.clock import Clock

__all__ = ["BotLoopGuard", "LoopGuardPolicy"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LoopGuardPolicy:
    max_messages: int = 5
    window: float = 60.0
    cooldown: float = 600.0


class BotLoopGuard:
    def __init__(self, policy: LoopGuardPolicy, *, clock: Clock) -> None:
        self.policy = policy
        self._clock = clock
        self._recent: dict[str, deque[float]] = {}
        self._cooling: dict[str, float] = {}
        self.cooldowns = 0

    def admit(self, chat: str) -> bool:
        """Whether a bot message in `chat` may start a turn now (and count it if so)."""
        now = self._clock.monotonic()
        until = self._cooling.get(chat)
        if until is not None:
            if now < until:
                return False
            del self._cooling[chat]
        recent = self._recent.setdefault(chat, deque())
        while recent and recent[0] <= now - self.policy.window:
            recent.popleft()
        if len(recent) >= self.policy.max_messages:
            self._cooling[chat] = now + self.policy.cooldown
            del self._recent[chat]
            self.cooldowns += 1
            log.warning(
                "bot messages in this chat too fast; ignoring bots here for a while",
                extra={"chat_id": chat.split("\x00", 1)[0], "cooldown": self.policy.cooldown},
            )
            return False
        recent.append(now)
        return True
