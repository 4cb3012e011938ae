"""Exponential backoff with jitter and a cap, then a fatal-but-retryable end.

The jitter spreads reconnects of many gateways (or many chats) that lost the platform at the
same moment, so they do not come back in lockstep and trip the platform's flood control.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    base: float = 1.0
    factor: float = 2.0
    cap: float = 60.0
    # +/- this fraction of each delay, drawn from `rng`.
    jitter: float = 0.2
    # After this many failed attempts the caller gives up (and a supervisor may restart it).
    max_attempts: int = 10
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def delay(self, attempt: int) -> float:
        """The wait before retry number `attempt` (1-based), never above `cap`."""
        raw = min(self.cap, self.base * self.factor ** max(0, attempt - 1))
        spread = raw * self.jitter
        return max(0.0, min(self.cap, raw + self.rng.uniform(-spread, spread)))

    def delays(self) -> list[float]:
        return [self.delay(n) for n in range(1, self.max_attempts + 1)]
