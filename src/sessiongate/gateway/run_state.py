"""`RunState`: where the runner is in its life, read by intake and the lane worker alike, and
the counters of what intake refused and the workers lost."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from sessiongate.core.entry import ResumeReason

__all__ = ["IntakeCounters", "RunState"]


@dataclass(slots=True)
class RunState:
    """Set by the runner (`start`, `stop`); intake and the workers only read it.

    `ready`: `start()` finished (or `stop()` ran first); messages wait for it. `gate`: the
    startup gate, open once the resumed turns have finished; no live work is dispatched
    before. `deliveries_done`: replies recovered at start-up were sent, so resumes may run.
    `resumes_done`: every resumed turn finished (or waits for an approval). `accepting`: new
    messages are taken; `stopping`: the drain runs. `drain_reason`: why a turn cut off now
    resumes at the next start (until `stop()` says otherwise, as after a crash)."""

    ready: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    deliveries_done: asyncio.Event = field(default_factory=asyncio.Event)
    resumes_done: asyncio.Event = field(default_factory=asyncio.Event)
    accepting: bool = False
    stopping: bool = False
    drain_reason: str = str(ResumeReason.RESTART_INTERRUPTED)


@dataclass(slots=True)
class IntakeCounters:
    duplicates: int = 0
    unauthorized: int = 0
    queue_full: int = 0
    archived: int = 0
    lane_errors: int = 0
