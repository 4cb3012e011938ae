"""`RunState`: where the runner is in its life, read by intake and the lane worker alike; the
counters of what intake refused and the workers lost; `RunnerStatistics`, the runner's
account of it all (`GatewayRunner.statistics`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from sessiongate.core.entry import ResumeReason

__all__ = ["IntakeCounters", "RunState", "RunnerStatistics"]


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


@dataclass(frozen=True, slots=True)
class RunnerStatistics:
    running_turns: int
    queued: int  # pending inbox rows over all lanes
    lanes: int  # lanes with a worker
    turns_completed: int
    turns_failed: int
    turns_interrupted: int
    turns_resumed: int
    agent_cache_size: int
    evictions: int
    duplicates: int
    unauthorized: int
    queue_full: int
    archived: int  # messages refused because their session is archived
    rollovers: int  # sessions rolled over by a reset policy (or a suspension) at a message
    deliveries_failed: int
    lane_errors: int
    waiters: int
    startup_gate_open: bool
    accepting: bool
    # Many instances on one database (zero / true on SQLite): heartbeats sent and failed,
    # whether the database answers, and outcomes refused because a lease moved on.
    instance_heartbeats: int = 0
    instance_heartbeat_failures: int = 0
    database_connected: bool = True
    fenced_commits: int = 0
    # Messages the platform confirmed, and deliveries given up (`dead`: out of tries or
    # stale) since the start; `deliveries_failed` counts refused sends.
    deliveries_sent: int = 0
    deliveries_dead: int = 0
