"""Lanes: exactly one worker, hence one turn, per session key at a time.

A lane is claimed by `LaneTable.ensure` *synchronously*: the lane is registered and its worker
task created before the caller reaches any `await`, so two coroutines (a live message and a
restart resume, two redeliveries) can never both see the key idle and start two agents on it.
Live messages, restart resumes and compactions go through this same method. No wakeup is lost:
`ensure` on a lane that has a worker marks it `woken`, and the worker, which clears the mark
before it reads the lane's rows (a read that may run on a store thread while other coroutines
go on), reads again if it was woken meanwhile; it releases the lane in the same synchronous step
in which it finds no more work and no mark, so a message accepted after that finds the lane
free and starts a new one.

A message being accepted keeps its lane (`reserve`, then `start` or `release`): while its accept
runs off the loop, nothing else can start a worker there, and a claim made in that accept has a
lane to run on.

A lane can start with work already in hand: the turn its first message claimed in the same
transaction that accepted it (`first`), or a job such as a compaction (`job`) that holds the
lane like a turn does, so messages arriving meanwhile queue behind it.
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Iterator

    from sessiongate.gateway.turn_progress import TurnProgress
    from sessiongate.store.lanes import Claim

__all__ = ["CancelReason", "Lane", "LaneTable", "LiveTurn", "RunningTurn"]


class CancelReason(enum.StrEnum):
    INTERRUPT = "interrupt"  # a follow-up in `interrupt` mode, or `/new` while busy
    STOP = "stop"  # `/stop`
    DRAIN = "drain"  # shutdown: the drain timeout ran out; the turn resumes after restart


class RunningTurn:
    """The turn a lane is running; `cancel` records why before cancelling the agent's task."""

    __slots__ = ("cancel_reason", "progress", "task", "turn_id")

    def __init__(self, turn_id: int) -> None:
        self.turn_id = turn_id
        self.task: asyncio.Task[Any] | None = None
        self.cancel_reason: CancelReason | None = None
        # What the turn produced so far (read by `GET /v1/turns/{id}` while it runs).
        self.progress: TurnProgress | None = None

    def attach(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        if self.cancel_reason is not None:
            task.cancel()

    def cancel(self, reason: CancelReason) -> bool:
        """Ask the turn to stop; the first reason wins. False if it had already been asked."""
        if self.cancel_reason is not None:
            return False
        self.cancel_reason = reason
        if self.task is not None:
            self.task.cancel()
        return True


@dataclass(frozen=True, slots=True)
class LiveTurn:
    """A running turn as this process sees it: the text of the message being generated (not
    durable) and how many times it started over (`StreamRetry`)."""

    partial: str
    retries: int


@dataclass(eq=False)
class Lane:
    key: str
    task: asyncio.Task[None] | None = None
    running: RunningTurn | None = None
    # Turns to resume after a restart, run before any pending row of the lane.
    resume: deque[int] = field(default_factory=deque)
    released: asyncio.Event = field(default_factory=asyncio.Event)
    # Work the lane was created with; the worker takes it before anything else.
    first: Claim | None = None
    # Work was handed to the lane since its worker last looked for rows (`ensure`).
    woken: bool = False
    # Whether a row waits, as the last turn's outcome committed (None: not known), so the
    # worker need not look again.
    pending: bool | None = None
    job: Callable[[], Awaitable[None]] | None = None


class LaneTable:
    """The lanes that have a worker, and the keys held by a command (`/new`) meanwhile."""

    def __init__(self, spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]) -> None:
        self._spawn = spawn
        self._lanes: dict[str, Lane] = {}
        self._held: dict[str, int] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    def get(self, key: str) -> Lane | None:
        return self._lanes.get(key)

    def ensure(
        self,
        key: str,
        worker: Callable[[Lane], Coroutine[Any, Any, None]],
        *,
        resume_turn: int | None = None,
        first: Claim | None = None,
        job: Callable[[], Awaitable[None]] | None = None,
    ) -> Lane | None:
        """Claim the lane for `key` and start its worker, or hand the work to the existing one.

        Synchronous on purpose (see the module docstring). A held key gets no new worker for
        plain work (the holder starts one when it lets go); None is returned then. `first` and
        `job` need a free lane (`is_free`, checked with no await since): they raise
        `RuntimeError` otherwise, since the work they carry would have no one to run it.
        """
        lane = self._lanes.get(key)
        if (first is not None or job is not None) and not self.is_free(key):
            raise RuntimeError(f"lane {key!r} is not free")
        if lane is None:
            if resume_turn is None and key in self._held:
                return None
            lane = Lane(key, first=first, job=job)
            if resume_turn is not None:
                lane.resume.append(resume_turn)
            self._lanes[key] = lane
            self._idle.clear()
            lane.task = self._spawn(worker(lane))
        elif resume_turn is not None:
            lane.resume.append(resume_turn)
        else:
            lane.woken = True
        return lane

    def reserve(self, key: str) -> Lane | None:
        """Keep the free lane of `key` for a message being accepted: it is not free, and has
        no worker until `start` (None if it was not free). `ensure` meanwhile hands work to
        the reserved lane, for the worker `start` gives it; `release` gives it back."""
        if not self.is_free(key):
            return None
        lane = Lane(key)
        self._lanes[key] = lane
        self._idle.clear()
        return lane

    def start(
        self,
        lane: Lane,
        worker: Callable[[Lane], Coroutine[Any, Any, None]],
        *,
        first: Claim | None = None,
    ) -> None:
        """The reserved `lane`'s worker, with the turn its accept claimed (`first`)."""
        lane.first = first
        lane.task = self._spawn(worker(lane))

    def unreserve(self, lane: Lane, worker: Callable[[Lane], Coroutine[Any, Any, None]]) -> None:
        """Give back a reserved lane whose accept claimed nothing; if work was handed to it
        meanwhile (`ensure`: a resume, or rows), its worker starts instead."""
        if lane.resume or lane.woken:
            self.start(lane, worker)
        else:
            self.release(lane)

    def release(self, lane: Lane) -> None:
        if self._lanes.get(lane.key) is lane:
            del self._lanes[lane.key]
        lane.released.set()
        if not self._lanes:
            self._idle.set()

    def hold(self, key: str) -> None:
        self._held[key] = self._held.get(key, 0) + 1

    def unhold(self, key: str) -> None:
        left = self._held.get(key, 0) - 1
        if left > 0:
            self._held[key] = left
        else:
            self._held.pop(key, None)

    def is_held(self, key: str) -> bool:
        return key in self._held

    def is_free(self, key: str, *, reserved: Lane | None = None) -> bool:
        """No worker and no holder: work for `key` may start at once (the lane `reserved`
        for the caller's own work does not count)."""
        lane = self._lanes.get(key)
        return (lane is None or lane is reserved) and key not in self._held

    def running_turns(self) -> int:
        return sum(1 for lane in self._lanes.values() if lane.running is not None)

    def tasks(self) -> list[asyncio.Task[None]]:
        return [lane.task for lane in self._lanes.values() if lane.task is not None]

    async def wait_idle(self) -> None:
        await self._idle.wait()

    def __iter__(self) -> Iterator[Lane]:
        return iter(list(self._lanes.values()))

    def __len__(self) -> int:
        return len(self._lanes)

    def __contains__(self, key: object) -> bool:
        return key in self._lanes
