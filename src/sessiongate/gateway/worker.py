"""`LaneWorker`: what runs on a lane once intake has put work there.

A lane's worker (`run`) takes the lane's lease first on a shared database (`_take`, with the
recovery of what an earlier owner left: `recover`), then runs the job it was started with (a
compaction, `compact`), the turn claimed with the lane's first message, the lane's restart
resumes (after start-up recovery delivered its replies), and then the lane's rows one turn at
a time until none is left. Everything that runs a turn goes through `TurnExecutor.run`.

Start-up recovery decides (`recovery.py`); the worker carries the decisions out: `settle`
commits the stale and stuck turns, `resume` re-runs an interrupted one. `redeliver` is
housekeeping's retry of replies whose delivery failed.

The worker asks the runner's `LaneOwnership` (`lane_leases.py`), never which one it is: on a
database of its own (`SoloOwnership`) every lane is held and every check passes; on a shared
PostgreSQL database (`LeasedOwnership`) a lane's turns run only on the instance holding its
lease.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from sessiongate.core.entry import ResumeReason
from sessiongate.errors import (
    LeaseLostError,
    SessionBusyError,
    SessionNotFoundError,
    StaleWriteError,
    StoreUnavailableError,
)
from sessiongate.gateway import recovery
from sessiongate.gateway.messages import ReceiptStatus
from sessiongate.gateway.turns import STALE_NOTICE, STUCK_NOTICE
from sessiongate.store.lanes import TurnState

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.approvals import Approvals
    from sessiongate.gateway.compaction import Compactor
    from sessiongate.gateway.delivery import Delivery
    from sessiongate.gateway.lane_leases import LaneOwnership
    from sessiongate.gateway.lanes import Lane, LaneTable
    from sessiongate.gateway.messages import Receipt
    from sessiongate.gateway.receipts import Waiters
    from sessiongate.gateway.routing import NextTurn, Router
    from sessiongate.gateway.run_state import IntakeCounters, RunState
    from sessiongate.gateway.store_calls import StoreCalls
    from sessiongate.gateway.turns import TurnCounters, TurnExecutor
    from sessiongate.store.lanes import Claim, LaneStore, Turn
    from sessiongate.store.session_store import SessionStore

__all__ = ["ARCHIVED_NOTICE", "LaneWorker"]

log = logging.getLogger(__name__)

ARCHIVED_NOTICE = (
    "This conversation is archived and takes no new messages; it has to be unarchived "
    "before it can go on."
)


class LaneWorker:
    def __init__(
        self,
        *,
        store: SessionStore,
        lane_store: LaneStore,
        config: GatewayConfig,
        clock: Clock,
        state: RunState,
        lanes: LaneTable,
        router: Router,
        executor: TurnExecutor,
        compactor: Compactor,
        leases: LaneOwnership,
        delivery: Delivery,
        waiters: Waiters,
        approvals: Approvals,
        turns: TurnCounters,
        counters: IntakeCounters,
        counts_changed: Callable[[], None],
        refuse_archived: Callable[..., Awaitable[Receipt]],
        calls: StoreCalls,
    ) -> None:
        self._store = store
        self._calls = calls
        self._lane_store = lane_store
        self._config = config
        self._clock = clock
        self._state = state
        self._lanes = lanes
        self._router = router
        self._executor = executor
        self._compactor = compactor
        self._leases = leases
        self._delivery = delivery
        self._waiters = waiters
        self._approvals = approvals
        self._turns = turns
        self._counters = counters
        # The runner's rewrite of `restart_counts.json` after a counter changed.
        self._counts_changed = counts_changed
        # Intake's answer to a message whose session is archived (the notice, counted).
        self._refuse_archived = refuse_archived
        self._resumes_left = 0
        self._resuming: set[int] = set()  # resumed turns not yet counted as finished

    def expect_resumes(self, count: int) -> None:
        """Start-up found `count` turns to resume: the startup gate waits for them."""
        self._resumes_left = count
        if not count:
            self._state.resumes_done.set()

    def ensure(self, key: str, **work: Any) -> Lane | None:
        """`LaneTable.ensure` with this worker (`first`, `job`, `resume_turn` as it takes)."""
        return self._lanes.ensure(key, self.run, **work)

    def _discard(self, entry: SessionEntry, inbox_ids: Sequence[int]) -> None:
        for inbox_id in inbox_ids:
            self._waiters.resolve(inbox_id, ReceiptStatus.INTERRUPTED, session_id=entry.session_id)

    async def run(self, lane: Lane) -> None:
        """The lane's worker: its job, its first claimed turn, its resumes, then its rows one
        turn at a time until none is left (or the lane is held, or the runner stops)."""
        try:
            if not await self._take(lane):
                if lane.first is not None:
                    # Claimed by its accept just before the lease could no longer be acted
                    # on: the turn stays `running`, for the recovery of the lane's next
                    # worker here (or of its next owner).
                    lane.first = None
                    self._leases.settle(lane.key, settled=False)
                if lane.job is not None:
                    # `compact` took the lease just before and it is lost since: the job
                    # answers its caller (`Compactor.run` refuses a lane not held here).
                    job, lane.job = lane.job, None
                    await job()
                return
            if lane.job is not None:
                job, lane.job = lane.job, None
                await job()
            if lane.first is not None:
                first, lane.first = lane.first, None
                if self._state.stopping:
                    # Claimed just before the stop: journalled like a turn the drain cut off.
                    await self._calls.run(
                        self._lane_store.requeue,
                        first.turn.id,
                        resume_reason=self._state.drain_reason,
                    )
                    return
                await self._executor.run(lane, first, resumed=False)
            while True:
                if lane.resume:
                    await self._state.deliveries_done.wait()
                    turn_id = lane.resume.popleft()
                    self._resuming.add(turn_id)
                    try:
                        await self.resume(lane, turn_id)
                    finally:
                        self.resume_finished(turn_id)
                    continue
                if not self._state.gate.is_set():
                    await self._state.gate.wait()
                    continue
                if self._state.stopping or self._lanes.is_held(lane.key):
                    return
                if not self._leases.may_act():
                    return  # the lease may be moving on: the sweep brings the lane back
                pending, lane.pending = lane.pending, None
                if pending is None:
                    # Not told by the last outcome's commit: one read, not a fenced
                    # transaction.
                    lane.woken = False
                    pending = await self._calls.run(self._lane_store.has_pending, lane.key)
                if not pending:
                    # A row accepted after the look wakes this lane again: at once if the
                    # lane is gone, by `woken` if it came while the look ran, from another
                    # instance by its hint or the sweep. The lease lingers, then goes back.
                    if lane.woken:
                        continue
                    self._leases.idle(lane.key)
                    return
                found = await self._calls.run(self._claim_next, lane.key)
                if found.entry is not None:
                    self._discard(found.entry, found.dropped)
                if found.refused is not None and found.entry is not None:
                    item = found.refused
                    self._waiters.resolve(item.id, ReceiptStatus.ARCHIVED, reply=ARCHIVED_NOTICE)
                    await self._refuse_archived(found.entry, item.source, event=item.event_kind)
                    continue
                if found.claim is None:
                    if lane.woken:
                        continue
                    # Idle: the lease lingers for the lane's next message, then goes back.
                    self._leases.idle(lane.key)
                    return
                await self._executor.run(lane, found.claim, resumed=False)
        except LeaseLostError:
            # The lease moved on (the fence let it go here), or may have (past `may_act`):
            # whoever owns the lane next recovers the turn this worker left.
            self._leases.settle(lane.key, settled=False)
            log.warning("lane lease lost; the lane moves on", extra={"session_key": lane.key})
        except StoreUnavailableError as exc:
            # The database went away between turns (a restart): the rows wait in the inbox,
            # and the sweep (or the next message) brings the lane back once it returns.
            self._leases.settle(lane.key, settled=False)
            log.warning(
                "lane paused: the database is away",
                extra={"session_key": lane.key, "error": str(exc)},
            )
        except Exception:
            self._leases.settle(lane.key, settled=False)
            # Logged and counted; the lane's rows stay in the inbox for the next dispatch.
            self._counters.lane_errors += 1
            log.exception("lane worker failed", extra={"session_key": lane.key})
        finally:
            self._lanes.release(lane)

    def _claim_next(self, key: str) -> NextTurn:
        with self._leases.fence(key, lock_lane=True):
            return self._router.claim_next(
                key,
                user_message=self._executor.claim_user_message,
                pending=True,  # seen just before
            )

    async def _take(self, lane: Lane) -> bool:
        """Hold the lane's lease before its worker does anything; True once held, after
        recovering what an earlier owner left on it (on a database of its own every lane is
        held, and nothing is left)."""
        try:
            taken = await self._leases.acquire(lane.key)
            if taken is None:
                return False
            self._leases.busy(lane.key)
            if taken or self._leases.unsettled(lane.key):
                # A turn claimed here under the lane's earlier lease is one of those recovered
                # (resumed, or settled): it must not also run as claimed.
                lane.first = None
                await self.recover(lane)
                self._leases.settle(lane.key)
        except StoreUnavailableError:
            log.warning("lane not taken: the database is away", extra={"session_key": lane.key})
            return False
        return True

    async def recover(self, lane: Lane) -> None:
        """The lane's unfinished turns, as a crash recovery would settle them (`recovery.py`
        steps 3-5), for one lane this instance owns now: a `running` turn was cut off (its
        owner died, paused past its lease, or this instance lost the database), so it goes
        back to `accepted`; an accepted turn is stale, stuck or resumed; a `replied` one is
        delivered. Every write commits under the lane's lease."""
        key = lane.key
        for turn_id in await self._leases.in_flight(key):
            turn = self._lane_store.get_turn(turn_id)
            if turn is None:
                continue
            if turn.state is TurnState.REPLIED:
                if self._leases.may_act():
                    # Never late: one older than `delivery.max_age_seconds` is reported dead.
                    await self._delivery.recover([turn], now=self._clock.now())
                continue
            if turn.state is TurnState.RUNNING:
                with self._leases.fence(key):
                    self._lane_store.requeue(
                        turn.id, resume_reason=str(ResumeReason.RESTART_INTERRUPTED)
                    )
                log.info("took over a cut-off turn", extra={"session_key": key, "turn_id": turn_id})
            claim = self._lane_store.get_claim(turn_id)
            if claim is None:
                continue
            verdict = recovery.classify(
                claim.turn,
                self._lane_store.restart_count(key),
                self._config,
                self._clock.now(),
                awaiting_approval=turn_id in self._approvals.pending_turns(),
            )
            if verdict == "resume":
                await self.resume(lane, turn_id)
                continue
            plan = recovery.RecoveryPlan(clean=False)
            (plan.stale if verdict == "stale" else plan.stuck).append(claim)
            for source, text, notice_turn in self.settle(plan):
                if self._leases.may_act():
                    await self._delivery.send(source, text, turn_id=notice_turn)

    def wake_lane(self, key: str) -> None:
        """The sweep or a hint found work on `key`: a worker tries to take it."""
        if not self._state.stopping and self._state.accepting and key not in self._lanes:
            self._lanes.ensure(key, self.run)

    async def resume(self, lane: Lane, turn_id: int) -> None:
        if self._state.stopping:
            return  # still `accepted`: it resumes at the next start
        try:
            claim, count = await self._calls.run(self._claim_resume, lane.key, turn_id)
        except (StaleWriteError, LookupError):
            log.exception("resume could not be claimed", extra={"turn_id": turn_id})
            return
        self._counts_changed()
        self._turns.resumed += 1
        log.info(
            "resuming turn",
            extra={"session_key": lane.key, "turn_id": turn_id, "restart_count": count},
        )
        await self._executor.run(lane, claim, resumed=True)

    def _claim_resume(self, key: str, turn_id: int) -> tuple[Claim, int]:
        with self._leases.fence(key):
            return self._lane_store.claim_resume(turn_id)

    async def compact(
        self, session_key: str, *, record: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Summarise the older part of the session into a `compaction` entry (`compaction.py`):
        `{compacted, tokens_before, tokens_after, reason}`.

        It runs on the lane as a turn does: refused with `SessionBusyError` while the lane has
        a turn running or waiting (or the runner is stopping), and messages that arrive
        meanwhile queue behind it. `SessionNotFoundError` for an unknown key,
        `SessionArchivedError` for an archived session, `StaleWriteError` if the transcript
        moved while the summary was written (nothing is written then). `record(result)` runs
        inside the commit.
        """
        await self._state.ready.wait()
        if self._state.stopping or not self._state.accepting:
            raise SessionBusyError("the gateway is shutting down", session_key=session_key)
        busy = SessionBusyError(
            "a turn is running or waiting on this session; compact after it",
            session_key=session_key,
        )
        if not self._lanes.is_free(session_key):
            raise busy
        if await self._calls.run(self._store.get_session, session_key) is None:
            raise SessionNotFoundError(
                f"no session with key {session_key!r}", session_key=session_key
            )
        if await self._leases.acquire(session_key) is None:
            raise SessionBusyError(
                "another gateway instance runs this session's turns; compact it there",
                session_key=session_key,
            )
        if not self._lanes.is_free(session_key):
            raise busy  # a message came while the reads above ran
        outcome: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

        async def job() -> None:
            try:
                result = await self._compactor.run(session_key, record=record)
            except BaseException as exc:
                if not outcome.done():
                    outcome.set_exception(
                        exc
                        if isinstance(exc, Exception)
                        else SessionBusyError("compaction cut off by shutdown")
                    )
                if not isinstance(exc, Exception):
                    raise
                # Not the lane's failure: the caller gets it; the lane goes on with its rows.
            else:
                if not outcome.done():
                    outcome.set_result(result)

        self._lanes.ensure(session_key, self.run, job=job)
        # Shielded: a caller that gives up does not cut the compaction off half-way.
        return await asyncio.shield(outcome)

    def settle(self, plan: recovery.RecoveryPlan) -> list[tuple[SessionSource, str, int]]:
        """Commit the stale and stuck decisions; returns the notices to send."""
        notices: list[tuple[SessionSource, str, int]] = []
        for claim in plan.stale:
            message = self._executor.user_message(claim)
            self._executor.commit_interrupted(claim, message, reason="stale", notice=STALE_NOTICE)
            notices.append((claim.item.source, STALE_NOTICE, claim.turn.id))
        for claim in plan.stuck:
            message = self._executor.user_message(claim)
            self._executor.commit_failure(
                claim, message, error="stuck_loop", notice=STUCK_NOTICE, suspend=True
            )
            notices.append((claim.item.source, STUCK_NOTICE, claim.turn.id))
        return notices

    async def finish_recovery(
        self, deliver: list[Turn], notices: list[tuple[SessionSource, str, int]]
    ) -> None:
        """Start-up recovery's replies and notices are sent, then (once the resumed turns have
        finished) the startup gate opens."""
        try:
            await self._delivery.recover(deliver, now=self._clock.now())
            for source, text, turn_id in notices:
                await self._delivery.send(source, text, turn_id=turn_id)
        finally:
            self._state.deliveries_done.set()
        await self._state.resumes_done.wait()
        self._state.gate.set()
        log.info("startup gate open")

    def approval_waiting(self, turn_id: int) -> None:
        """A resumed turn waits for a person's approval: it counts as finished for the
        startup gate, which would otherwise hold every lane's live work until the decision."""
        self.resume_finished(turn_id)

    def resume_finished(self, turn_id: int) -> None:
        if turn_id not in self._resuming:
            return
        self._resuming.discard(turn_id)
        self._resumes_left -= 1
        if self._resumes_left <= 0:
            self._state.resumes_done.set()

    async def redeliver(self) -> int:
        """Housekeeping's retry of replies whose delivery failed (`Delivery.redeliver`)."""
        # Not before start-up recovery has sent its own replies (the two would race), nor
        # while stopping: the next start sends what is left.
        if self._state.stopping or not self._state.deliveries_done.is_set():
            return 0
        replied = self._lane_store.turns_in_state(TurnState.REPLIED)
        # Another instance's replies are its own to deliver (and a dead one's are its
        # successor's, at the lane's recovery).
        if not self._leases.may_act():
            return 0
        replied = [t for t in replied if self._leases.holds(t.session_key)]
        return await self._delivery.redeliver(
            replied,
            now=self._clock.now(),
            may_send=lambda key: key is None or self._leases.holds(key),
        )
