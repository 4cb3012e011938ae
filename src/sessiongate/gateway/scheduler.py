"""`Scheduler`: runs scheduled jobs as ordinary turns, exactly once per slot.

The runner builds one and starts `run()` beside housekeeping. Each `tick()`:
1. resumes the runs a crash left between their claim and their turn's acceptance;
2. claims every job's due slots (`JobStore.claim_due`: a row unique per job and slot,
   committed before anything else; on a shared PostgreSQL database the unique key is the
   fence, so of several instances exactly one holds a slot);
3. hands each claimed run to the runner's intake as a system event (`event_kind` `cron`, or
   `heartbeat` for a job with a `noop_token`) with the run's own message id
   `job:<id>:<slot µs>`: the run is an ordinary queued turn in its lane, never extends the
   session's freshness, and a second hand-off of the same run (after a crash between the
   acceptance and its record) is the runner's inbound duplicate, not a second turn.

A run goes `claimed` → `prepared` (an isolated run's fresh session exists) → `accepted`
(its turn id is recorded), or `failed` with the reason (its session is gone or archived).
Time is the injected clock's: a test moves a `FakeClock` and calls `tick()`; `run()` sleeps
until the next slot (at most a minute, so jobs another process added are seen).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING

from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.errors import QueueFullError, SessionNotFoundError
from sessiongate.gateway.messages import MessageEvent, ReceiptStatus
from sessiongate.gateway.store_calls import InlineCalls
from sessiongate.store.changes import ChangeKind
from sessiongate.store.jobs import JobNotFoundError, JobRun, JobStore
from sessiongate.store.records import to_us

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.jobs import JobSpec
    from sessiongate.gateway.feed import EventFeed
    from sessiongate.gateway.messages import Receipt
    from sessiongate.gateway.store_calls import StoreCalls
    from sessiongate.store.changes import Change
    from sessiongate.store.session_store import SessionStore

__all__ = ["Scheduler", "SchedulerStatistics"]

log = logging.getLogger(__name__)

# On a shared database a run still `claimed` this long after its claim was left by an
# instance that died between the claim and the hand-off (which takes milliseconds).
_STALE_CLAIM = timedelta(minutes=2)
_MAX_SLEEP_SECONDS = 60.0
# Due jobs claimed in one transaction: one commit for a burst of them, and a bounded time for
# which their rows stay locked against another instance's claim.
_CLAIM_BATCH = 256
# A reply longer than this is never a no-op token.
_TOKEN_MAX = 200


@dataclass(frozen=True, slots=True)
class SchedulerStatistics:
    ticks: int
    claimed: int
    accepted: int
    resumed: int
    failed: int


class Scheduler:
    def __init__(
        self,
        store: SessionStore,
        config: GatewayConfig,
        *,
        submit: Callable[..., Awaitable[Receipt]],
        clock: Clock,
        shared: bool = False,
        feed: EventFeed | None = None,
        delivers: Callable[[str], bool] | None = None,
        calls: StoreCalls | None = None,
    ) -> None:
        self.jobs = JobStore(store, clock=clock)
        # How the store is called from the loop: inline (SQLite) or off it (PostgreSQL).
        self._calls: StoreCalls = calls or InlineCalls()
        self._store = store
        self._config = config
        self._submit = submit
        self._clock = clock
        self._shared = shared
        self._feed = feed
        # Whether this runner has an adapter for a platform: a `deliver_to` run for a chat it
        # cannot reach stays claimed for a runner that can (`sessiongate chat` has none).
        self._delivers = delivers
        # Turns of runs handed off by this process, for `job.finished` (turn id -> run).
        self._live: dict[int, JobRun] = {}
        # This boot's name on its claims: a run claimed by an earlier boot is a crash's.
        self.owner = f"jobs-{uuid.uuid4().hex[:12]}"
        self._wake = asyncio.Event()
        # One tick at a time (the loop's, run-now's and a test's), so no run is resumed twice.
        self._lock = asyncio.Lock()
        # The configured jobs exist from here on (an `every` grid starts at its first sync).
        self.jobs.sync(config.jobs)
        self._ticks = self._claimed = self._accepted = self._resumed = self._failed = 0
        # How long the loop sleeps after a tick (the tick sets it from what it read).
        self._sleep = _MAX_SLEEP_SECONDS

    def statistics(self) -> SchedulerStatistics:
        return SchedulerStatistics(
            self._ticks, self._claimed, self._accepted, self._resumed, self._failed
        )

    def wake(self) -> None:
        """A job changed in this process: look at the schedule again now."""
        self._wake.set()

    # ------------------------------------------------------------------ the loop

    async def run(self, stop: asyncio.Event) -> None:
        """Tick at each slot until `stop` is set; a failing tick is logged and the loop goes
        on (its claims are durable: the next tick resumes them)."""
        while not stop.is_set():
            try:
                await self.tick()
            except Exception:
                log.exception("scheduler tick failed")
            self._wake.clear()
            waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(self._wake.wait())]
            try:
                await asyncio.wait(
                    waiters, timeout=self._sleep, return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                for waiter in waiters:
                    waiter.cancel()

    async def tick(self) -> list[JobRun]:
        """Resume what a crash left, then claim and hand off every due slot; the runs handed
        off (resumed ones first)."""
        async with self._lock:
            return await self._tick()

    async def _tick(self) -> list[JobRun]:
        # The time of the look: a slot that comes due while the store is read (off the loop
        # on PostgreSQL) is the next tick's.
        now = self._clock.now()
        done: list[JobRun] = []
        for run in await self._calls.run(self.jobs.unfinished):
            if self._may_resume(run):
                self._resumed += 1
                log.info("job run resumed", extra={"job": run.job_id, "run_id": run.run_id})
                done.append(await self._hand_off(run))
        jobs = await self._calls.run(self.jobs.all)
        due = [job.job_id for job in jobs if (at := job.next_at()) and at <= now]
        # Claimed a batch at a time (one commit each), then handed off: a crash between the
        # two leaves claimed runs, which the next tick resumes like any other.
        for start in range(0, len(due), _CLAIM_BATCH):
            batch = due[start : start + _CLAIM_BATCH]
            for run in await self._calls.run(self.jobs.claim_due_many, batch, owner=self.owner):
                self._claimed += 1
                done.append(await self._hand_off(run))
        if due:
            jobs = await self._calls.run(self.jobs.all)  # the claims moved their next slots
        # Until the next slot, counted from the look: the loop sleeps with nothing awaited
        # after the tick is counted.
        upcoming = [at for job in jobs if (at := job.next_at()) is not None]
        self._sleep = (
            min(_MAX_SLEEP_SECONDS, max(0.0, (min(upcoming) - now).total_seconds()))
            if upcoming
            else _MAX_SLEEP_SECONDS
        )
        self._ticks += 1
        return done

    async def run_now(self, job_id: str) -> JobRun:
        """Run a job once now, outside its schedule (also when paused)."""
        async with self._lock:
            run = await self._calls.run(self.jobs.claim_now, job_id, owner=self.owner)
            self._claimed += 1
            return await self._hand_off(run)

    def _may_resume(self, run: JobRun) -> bool:
        if run.owner == self.owner:
            return True
        if not self._shared:
            return True  # one runner per home: every other owner is a dead boot
        return self._clock.now() - run.claimed_at >= _STALE_CLAIM

    # ------------------------------------------------------------------ one run

    async def _hand_off(self, run: JobRun) -> JobRun:
        try:
            spec = (await self._calls.run(self.jobs.get, run.job_id)).spec
        except JobNotFoundError:
            return await self._fail(run, "the job was removed")
        target = spec.target()
        if target is not None and self._delivers is not None and not self._delivers(target[0]):
            return run
        try:
            event, run = await self._calls.run(self._event_for, run, spec)
        except SessionNotFoundError as exc:
            return await self._fail(run, str(exc))
        try:
            receipt = await self._submit(event, wait=False)
        except SessionNotFoundError as exc:
            return await self._fail(run, str(exc))
        except QueueFullError:
            return await self._fail(run, "the lane's queue is full")
        if receipt.status in (ReceiptStatus.QUEUED, ReceiptStatus.DUPLICATE, ReceiptStatus.REPLIED):
            # A duplicate is this run's own turn, accepted before a crash cut the record of
            # it short (its id is unknown while the turn waits to be claimed again).
            detail = "accepted before a restart" if receipt.status == "duplicate" else None
            self._accepted += 1
            marked = run
            run = replace(
                run, state="accepted", session_key=receipt.session_key, turn_id=receipt.turn_id
            )
            # Before the mark is awaited: the turn may finish while it is written.
            if receipt.turn_id is not None:
                self._live[receipt.turn_id] = run
            self._publish("job.started", run, turn_id=receipt.turn_id)
            await self._calls.run(
                self.jobs.mark,
                marked.run_id,
                "accepted",
                session_key=receipt.session_key,
                turn_id=receipt.turn_id,
                detail=detail,
            )
            log.info(
                "job run accepted",
                extra={"job": run.job_id, "run_id": run.run_id, "turn_id": receipt.turn_id},
            )
            return run
        if receipt.status == ReceiptStatus.UNAVAILABLE:
            return run  # stopping: the next start resumes it
        return await self._fail(run, f"the turn was not accepted: {receipt.status}")

    def _event_for(self, run: JobRun, spec: JobSpec) -> tuple[MessageEvent, JobRun]:
        kind = "heartbeat" if spec.noop_token else "cron"
        message_id = f"job:{run.job_id}:{to_us(run.slot_at)}"
        if spec.session_key is not None:
            entry = self._store.get_session(spec.session_key)
            if entry is None or entry.origin is None:
                raise SessionNotFoundError(
                    f"session {spec.session_key!r} does not exist", session_key=spec.session_key
                )
            source, key = entry.origin, spec.session_key
        else:
            target = spec.target()
            assert target is not None  # one of the two, by the spec's validation
            source = SessionSource(
                platform=Platform(target[0]),
                chat_id=target[1],
                chat_type=ChatType(spec.chat_type),
                user_id=f"job:{spec.id}",
            )
            key = None
            if spec.session == "isolated":
                key, run = self._prepare_isolated(run, spec, source)
        event = MessageEvent(
            source=source,
            text=spec.prompt,
            message_id=message_id,
            internal=True,
            event_kind=kind,
            session_key=key,
        )
        return event, run

    def _prepare_isolated(
        self, run: JobRun, spec: JobSpec, source: SessionSource
    ) -> tuple[str, JobRun]:
        """A lane of the job's own, with a fresh session for this run (made once: a resumed
        `prepared` run goes on in the session it already has)."""
        if run.state == "prepared" and run.session_key is not None:
            return run.session_key, run
        lane = replace(source, thread_id=f"job-{spec.id}")
        entry = self._store.get_or_create_session(lane, force_new=True, event_kind="cron")
        self.jobs.mark(run.run_id, "prepared", session_key=entry.session_key)
        return entry.session_key, replace(run, state="prepared", session_key=entry.session_key)

    async def _fail(self, run: JobRun, reason: str) -> JobRun:
        self._failed += 1
        log.warning(
            "job run failed", extra={"job": run.job_id, "run_id": run.run_id, "error": reason}
        )
        await self._calls.run(self.jobs.mark, run.run_id, "failed", detail=reason)
        self._publish("job.failed", run, error=reason)
        return replace(run, state="failed", detail=reason)

    # ------------------------------------------------------------------ the live feed

    def on_changes(self, changes: list[Change]) -> None:
        """A store change listener: `job.finished` when a run's turn finishes (for the runs
        this process handed off; a turn resumed after a restart finishes without it)."""
        for change in changes:
            if change.kind is ChangeKind.TURN_FINISHED and change.turn_id is not None:
                run = self._live.pop(change.turn_id, None)
                if run is not None:
                    self._publish("job.finished", run, turn_id=change.turn_id, status=change.status)

    def _publish(self, kind: str, run: JobRun, **data: object) -> None:
        if self._feed is None:
            return
        self._feed.publish(
            kind,
            {
                "session_key": run.session_key,
                "job_id": run.job_id,
                "run_id": run.run_id,
                "slot_at": run.slot_at.isoformat(),
                **data,
            },
        )

    # ------------------------------------------------------------------ no-op replies

    async def quiet(self, turn_id: int, text: str) -> bool:
        """True when `text` is the no-op token of the heartbeat job whose run is this turn:
        the reply is journaled delivered and sent nowhere. Only a short reply costs a store
        read (off the loop on PostgreSQL)."""
        token = text.strip()
        if not token or len(token) > _TOKEN_MAX:
            return False
        return await self._calls.run(self._is_noop, turn_id, token)

    def _is_noop(self, turn_id: int, token: str) -> bool:
        run = self.jobs.run_of_turn(turn_id)
        if run is None:
            return False
        try:
            spec = self.jobs.get(run.job_id).spec
        except JobNotFoundError:
            return False
        return spec.noop_token is not None and spec.noop_token.strip() == token
