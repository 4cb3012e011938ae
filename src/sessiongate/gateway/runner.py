"""`GatewayRunner`: inbound messages → lanes → agent turns → replies, crash-safe.

Path of a message: authorise (allow list; an unknown sender leaves no trace) → slash command?
→ route (below) → durable accept (dedup + inbox row) → in `interrupt` mode a follow-up cancels
the running turn → the lane's worker claims rows one turn at a time (`lanes.py`) and the
executor runs them (`turns.py`) → reply committed, delivered.

Routing (`routing.py`): a message is routed in the transaction that accepts it; an archived
session refuses it, a busy lane's session is never rolled over under its running turn. When the
lane is free and the startup gate open, that same transaction also claims the turn (journal
`running`), so an idle lane's message costs one transaction before its turn and one for its
outcome.

The sync/async seam: store calls are short transactions and run inline on the event loop — no
thread hop per call. A lane's turn awaits only the agent and the adapter; every state change
happens between awaits, so cancellation can never split one. (If profiling ever shows the
store blocking the loop, the one place to change is here: a single writer thread fed by a
queue, as the style guide describes.)

One runner per home: `start()` takes `<home>/gateway.lock` (see `recovery.HomeLock`) before
recovery reads the journal, and `stop()` releases it after the clean-shutdown marker is written;
a second runner on a live home fails with `HomeInUseError` and touches nothing.

Several instances on one PostgreSQL database (`lane_leases.py`): each has its own home, any of
them accepts a message, and a lane's turns run only on the instance holding its lease, every
write of a turn fenced by it; start-up recovers nothing of the shared journal, each lane is
recovered by the worker that takes it over (`_recover_lane`), and a sweep plus LISTEN/NOTIFY
hints wake lanes whose work arrived elsewhere. On SQLite all of that is a no-op.

Every task has an owner: the runner's `TaskGroup` (lane workers, the recovery task, the
housekeeping watcher of spec §10 over the runner's agent cache), held by a
supervisor task that `stop()` awaits; each turn's agent call runs in a per-turn group owned by
its worker. Shutdown order: stop accepting, drain running turns under
`agent.restart_drain_timeout`, journal the rest for resume, stop adapters, close agents, write
`.clean_shutdown`. The store belongs to the caller and stays open.

Over the ~400-line budget: it is the runner's public surface plus the three sequences that
must be read side by side to see that they never overlap on a lane (start-up recovery, the lane
worker, the drain); routing, turns, commands, compaction, lanes and recovery rules live in
their own modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiongate.core.bindings import agent_for
from sessiongate.core.entry import ResumeReason
from sessiongate.core.keys import build_session_key
from sessiongate.errors import (
    LeaseLostError,
    SessionBusyError,
    SessionNotFoundError,
    StaleWriteError,
    StoreUnavailableError,
)
from sessiongate.gateway import recovery
from sessiongate.gateway.agent import AgentResources
from sessiongate.gateway.agent_cache import AgentCache
from sessiongate.gateway.approvals import Approvals
from sessiongate.gateway.commands import CommandRunner, parse_command
from sessiongate.gateway.compaction import Compactor
from sessiongate.gateway.delivery import DELIVERY_TIMEOUT_SECONDS, Delivery
from sessiongate.gateway.feed import EventFeed
from sessiongate.gateway.housekeeping import HousekeepingWatcher
from sessiongate.gateway.instances import InstancePresence
from sessiongate.gateway.lane_leases import LaneLeases
from sessiongate.gateway.lanes import CancelReason, Lane, LaneTable, LiveTurn
from sessiongate.gateway.leadership import Leadership
from sessiongate.gateway.prompts import SystemPrompts
from sessiongate.gateway.receipts import Receipt, ReceiptStatus, Waiters
from sessiongate.gateway.routing import Routed, Router
from sessiongate.gateway.scheduler import Scheduler
from sessiongate.gateway.tracing import key_attribute, traced
from sessiongate.gateway.turns import (
    STALE_NOTICE,
    STUCK_NOTICE,
    TurnCounters,
    TurnExecutor,
)
from sessiongate.gateway.webhooks import WebhookSender
from sessiongate.store.backends import open_wakeups
from sessiongate.store.deliveries import DeliveryStore
from sessiongate.store.lanes import AcceptStatus, InboxKind, LaneStore, TurnState
from sessiongate.store.outbox import OutboxStore, OutboxWriter

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.adapter import PlatformAdapter
    from sessiongate.gateway.agent import AgentFactory
    from sessiongate.gateway.events import MessageEvent
    from sessiongate.gateway.streams import TurnWatch
    from sessiongate.store.deliveries import DeliveryRecord
    from sessiongate.store.lanes import Acceptance, Claim, Inbound, SeenRecord
    from sessiongate.store.session_store import SessionStore

__all__ = ["ARCHIVED_NOTICE", "GatewayRunner", "RunnerStatistics"]

log = logging.getLogger(__name__)

# How often a caller waiting here for a turn another instance runs looks at the journal.
REMOTE_OUTCOME_POLL_SECONDS = 0.25
_REMOTE_OUTCOMES = {
    TurnState.REPLIED: ReceiptStatus.REPLIED,
    TurnState.DELIVERED: ReceiptStatus.REPLIED,
    TurnState.FAILED: ReceiptStatus.FAILED,
    TurnState.INTERRUPTED: ReceiptStatus.INTERRUPTED,
}
_SHUTTING_DOWN = "The gateway is shutting down; please send your message again shortly."
ARCHIVED_NOTICE = (
    "This conversation is archived and takes no new messages; it has to be unarchived "
    "before it can go on."
)


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


@dataclass(slots=True)
class _Counters:
    duplicates: int = 0
    unauthorized: int = 0
    queue_full: int = 0
    archived: int = 0
    lane_errors: int = 0


class GatewayRunner:
    def __init__(
        self,
        store: SessionStore,
        config: GatewayConfig,
        *,
        home: Path,
        agent_factory: AgentFactory,
        clock: Clock | None = None,
        adapters: Sequence[PlatformAdapter] = (),
    ) -> None:
        # First: a prompt file that cannot be read stops the start before anything is made.
        self.system_prompts = SystemPrompts.load(config)
        self.store = store
        self.config = config
        self.home = Path(home)
        self.clock: Clock = clock or store.clock
        self.lane_store = LaneStore(store)
        # The live feed (`feed.py`): fed by the store's commits from here until `stop()`.
        self.feed = EventFeed(config.feed, clock=self.clock)
        store.add_change_listener(self.feed.publish_changes)
        # Agents sit below the gateway: the caller chooses them (`sessiongate.agents.
        # build_agent_factory(config)` gives the echo agent or the configured OpenAI one).
        self._agent_factory = agent_factory
        # What the factory holds for all its agents (MCP servers): started and stopped here.
        factory: object = agent_factory
        self._agent_resources = factory if isinstance(factory, AgentResources) else None
        self._agents = AgentCache(config.agent.agent_cache, clock=self.clock)
        self.deliveries = DeliveryStore(store)
        # Outbound webhooks (`webhooks.py`): the outbox rows are written with the changes
        # they tell; the sender is a task of its own, so no receiver slows a turn.
        self.outbox = OutboxStore(store.database, self.clock)
        self.webhooks: WebhookSender | None = None
        if config.webhooks.outbound:
            store.database.before_commit = OutboxWriter(
                {hook.url: hook.events for hook in config.webhooks.outbound}, self.clock
            )
            self.webhooks = WebhookSender(self.outbox, config.webhooks, clock=self.clock)
            store.add_change_listener(self.webhooks.changes_committed)
        self._delivery = Delivery(
            adapters,
            self.lane_store,
            clock=self.clock,
            deliveries=self.deliveries,
            config=config.delivery,
        )
        # Tool calls waiting for a person's approval (`approvals.py`).
        self.approvals = Approvals(
            store,
            config,
            clock=self.clock,
            notify=self._delivery.send_approval,
            waiting=self._approval_waiting,
            settled=self._delivery.settle_approval,
        )
        self.housekeeping = HousekeepingWatcher(
            store=store,
            cache=self._agents,
            config=config,
            clock=self.clock,
            lanes=self.lane_store,
            redeliver=self._redeliver,
            expire_approvals=lambda: len(self.approvals.expire_due()),
        )
        self._housekeeping_stop = asyncio.Event()
        # Other instances on a shared database see this one through it (gateway/instances.py).
        self.presence = InstancePresence(store, config)
        # On a shared database a lane's turns run only under its lease (`lane_leases.py`).
        self.leases = LaneLeases(self.presence.ownership, config)
        self.presence.on_rejoin = self._rejoined
        # Scheduled jobs run as system turns through `handle_message` (`scheduler.py`).
        self.jobs = Scheduler(
            store,
            config,
            submit=self.handle_message,
            clock=self.clock,
            shared=self.leases.shared,
            feed=self.feed,
            delivers=lambda platform: self._delivery.adapter_for(platform) is not None,
        )
        self._delivery.quiet = self.jobs.quiet
        store.add_change_listener(self.jobs.on_changes)
        self._wakeups = open_wakeups(config, self._hint_from_thread) if self.leases.shared else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._home_lock = recovery.HomeLock(self.home)
        self._waiters = Waiters()
        self._turns = TurnCounters()
        self._counters = _Counters()
        self._lanes = LaneTable(self._spawn)
        self._router = Router(store=store, lane_store=self.lane_store, lanes=self._lanes)
        self._executor = TurnExecutor(
            store=store,
            lane_store=self.lane_store,
            config=config,
            agents=self._agents,
            agent_factory=self._agent_factory,
            delivery=self._delivery,
            waiters=self._waiters,
            counters=self._turns,
            counts_changed=self.write_restart_counts,
            drain_reason=lambda: self._drain_reason,
            host=self,
            fence=self.leases.fence,
            may_act=self.leases.may_act,
            feed=self.feed,
            prompts=self.system_prompts,
            approvals=self.approvals,
        )
        self._commands = CommandRunner(
            store=store,
            lane_store=self.lane_store,
            lanes=self._lanes,
            config=config,
            host=self,
            approvals=self.approvals,
        )
        self._compactor = Compactor(
            store=store,
            lane_store=self.lane_store,
            config=config,
            executor=self._executor,
            fence=self.leases.fence,
            holds=self.leases.holds,
        )
        self._ready = asyncio.Event()  # start() finished (or stop() ran first)
        self._deliveries_done = asyncio.Event()  # recovered replies sent: resumes may run
        self._resumes_done = asyncio.Event()
        self._gate = asyncio.Event()  # the startup gate: live work may be dispatched
        self._shutdown = asyncio.Event()
        self._stop_lock = asyncio.Lock()
        self._group: asyncio.TaskGroup | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._recovery_task: asyncio.Task[None] | None = None
        self._resumes_left = 0
        self._resuming: set[int] = set()  # resumed turns not yet counted as finished
        self._started = self._stopped = self._stopping = self._accepting = False
        # Until stop() says otherwise, a turn cut off without a drain resumes as a crash would.
        self._drain_reason = str(ResumeReason.RESTART_INTERRUPTED)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Take the home's lock, recover (see `recovery.py`), dispatch the resumes, then accept
        messages; the startup gate opens once the resumed turns have finished.

        Raises `HomeInUseError` (and starts nothing) while another runner is live on the home.
        """
        if self._stopped:
            raise RuntimeError("a stopped GatewayRunner cannot be started again")
        if self._started:
            return
        self._home_lock.acquire()
        self._started = True
        self._loop = asyncio.get_running_loop()
        group_ready = asyncio.Event()
        self._supervisor = asyncio.create_task(self._supervise(group_ready), name="sessiongate")
        await group_ready.wait()
        if self._agent_resources is not None:
            await self._agent_resources.start()  # before any turn, resumed ones included
        # Registered before any worker claims a lane under this instance's id.
        await self.presence.start()
        if self.leases.shared:
            # The journal is shared with live instances: nothing in it is this one's to
            # recover until it owns the lane, and each lane is recovered by the worker that
            # claims it (`_recover_lane`); the sweep finds the lanes with work.
            plan = recovery.RecoveryPlan(
                clean=True, pending_lanes=self.lane_store.lanes_with_pending()
            )
        else:
            plan = recovery.plan_recovery(
                home=self.home,
                store=self.store,
                lane_store=self.lane_store,
                config=self.config,
                now=self.clock.now(),
            )
        notices = self._settle(plan)
        # The database is the truth; the file mirrors it from here on.
        self.write_restart_counts()
        self._resumes_left = len(plan.resume)
        if not self._resumes_left:
            self._resumes_done.set()
        for turn in plan.resume:
            self._lanes.ensure(turn.session_key, self._lane_worker, resume_turn=turn.id)
        for key in plan.pending_lanes:
            self._lanes.ensure(key, self._lane_worker)
        self._recovery_task = self._spawn(self._finish_recovery(plan.deliver, notices))
        self._spawn(self.housekeeping.run(self._housekeeping_stop))
        self._spawn(self.presence.run(self._housekeeping_stop))
        self._spawn(self.jobs.run(self._housekeeping_stop))
        if self.webhooks is not None:
            sender = self.webhooks
            stop = self._housekeeping_stop
            if self.leases.shared:
                self._spawn(self._lead_webhooks(sender, stop))
            else:
                self._spawn(sender.run(stop))
        if self.leases.shared:
            self._spawn(self.leases.sweep(self._housekeeping_stop, self._wake_lane))
            self._spawn(self._follow_remote_outcomes(self._housekeeping_stop))
            if self._wakeups is not None and self.presence.ownership is not None:
                self._wakeups.listen(self.presence.ownership.instance_id)
        self._accepting = True
        self._ready.set()
        for adapter in self._delivery.adapters:
            await adapter.start(self)

    async def stop(self, *, restart: bool = False) -> None:
        """Drain and shut down; idempotent. Turns still running after
        `agent.restart_drain_timeout` are cancelled and journalled for resume, their sessions
        marked `restart_timeout` (restart) or `shutdown_timeout`; pending rows stay queued."""
        async with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
            self._accepting = False
            self._ready.set()
            if not self._started:
                return
            try:
                await self._drain(restart=restart)
            finally:
                # Held while any turn of this runner may still write. A drain cut short (a
                # forced exit) keeps it: the process's exit drops it once its turns are gone.
                if self._supervisor is None or self._supervisor.done():
                    self._home_lock.release()

    async def _drain(self, *, restart: bool) -> None:
        self._stopping = True
        self._drain_reason = str(
            ResumeReason.RESTART_TIMEOUT if restart else ResumeReason.SHUTDOWN_TIMEOUT
        )
        # Wake workers waiting for recovery or the gate: they see `_stopping` and leave.
        self._deliveries_done.set()
        self._gate.set()
        timeout = self.config.agent.restart_drain_timeout
        running = [lane.running.task for lane in self._lanes if lane.running and lane.running.task]
        if running and timeout > 0:
            await asyncio.wait(running, timeout=timeout)
        for lane in self._lanes:
            if lane.running is not None:
                lane.running.cancel(CancelReason.DRAIN)
        workers = self._lanes.tasks()
        if workers:
            _, late = await asyncio.wait(workers, timeout=DELIVERY_TIMEOUT_SECONDS)
            for task in late:  # stuck in delivery: the reply stays journalled `replied`
                task.cancel()
            if late:
                await asyncio.wait(late)
        self._waiters.resolve_all(ReceiptStatus.QUEUED)
        for adapter in self._delivery.adapters:
            try:
                await adapter.stop()
            except Exception:
                log.exception("adapter stop failed", extra={"platform": str(adapter.platform)})
        self._housekeeping_stop.set()
        if self._wakeups is not None:
            await asyncio.to_thread(self._wakeups.close)
        await self.presence.stop()
        await self._agents.aclose_all()
        if self._agent_resources is not None:
            await self._agent_resources.aclose()
        if self._recovery_task is not None:
            self._recovery_task.cancel()
        self._shutdown.set()
        assert self._supervisor is not None
        # A failure of the runner itself propagates from here, and without the marker the
        # next start recovers as after a crash.
        await self._supervisor
        # Counters reset meanwhile (`/new`, the reset route) must not come back at the next start.
        self.write_restart_counts()
        recovery.write_clean_shutdown(self.home, self.lane_store, self.clock.now())
        self.store.remove_change_listener(self.feed.publish_changes)
        self.store.remove_change_listener(self.jobs.on_changes)
        if self.webhooks is not None:
            # Events of changes made after the stop are still written (the writer stays),
            # and sent by the next start.
            self.store.remove_change_listener(self.webhooks.changes_committed)
        self.feed.close()
        log.info("gateway stopped", extra={"restart": restart})

    async def _supervise(self, ready: asyncio.Event) -> None:
        async with asyncio.TaskGroup() as group:
            self._group = group
            ready.set()
            await self._shutdown.wait()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        if self._group is None:
            coro.close()
            raise RuntimeError("the runner is not started")
        return self._group.create_task(coro)

    async def wait_idle(self) -> None:
        """Until the startup gate is open and no lane has work (tests, benchmarks)."""
        while True:
            await self._gate.wait()
            await self._lanes.wait_idle()
            if not len(self._lanes):
                return

    # ------------------------------------------------------------------ recovery

    def _settle(self, plan: recovery.RecoveryPlan) -> list[tuple[SessionSource, str, int]]:
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

    async def _finish_recovery(
        self, deliver: list[Any], notices: list[tuple[SessionSource, str, int]]
    ) -> None:
        try:
            await self._delivery.recover(deliver, now=self.clock.now())
            for source, text, turn_id in notices:
                await self._delivery.send(source, text, turn_id=turn_id)
        finally:
            self._deliveries_done.set()
        await self._resumes_done.wait()
        self._gate.set()
        log.info("startup gate open")

    def _approval_waiting(self, turn_id: int) -> None:
        """A resumed turn waits for a person's approval: it counts as finished for the
        startup gate, which would otherwise hold every lane's live work until the decision."""
        self._resume_finished(turn_id)

    def _resume_finished(self, turn_id: int) -> None:
        if turn_id not in self._resuming:
            return
        self._resuming.discard(turn_id)
        self._resumes_left -= 1
        if self._resumes_left <= 0:
            self._resumes_done.set()

    def write_restart_counts(self) -> None:
        """Rewrite `restart_counts.json` from the database, its source of truth. Called after
        every commit that changes a counter here, and by callers that reset one outside a turn
        (the HTTP reset route) after their commit; `stop()` calls it too."""
        path = self.home / recovery.RESTART_COUNTS_FILE
        recovery.write_restart_counts(path, self.lane_store.restart_counts())

    async def _redeliver(self) -> int:
        """Housekeeping's retry of replies whose delivery failed (`Delivery.redeliver`)."""
        # Not before start-up recovery has sent its own replies (the two would race), nor
        # while stopping: the next start sends what is left.
        if self._stopping or not self._deliveries_done.is_set():
            return 0
        replied = self.lane_store.turns_in_state(TurnState.REPLIED)
        if self.leases.shared:
            # Another instance's replies are its own to deliver (and a dead one's are its
            # successor's, at the lane's recovery).
            if not self.leases.may_act():
                return 0
            replied = [t for t in replied if self.leases.holds(t.session_key)]
            return await self._delivery.redeliver(
                replied,
                now=self.clock.now(),
                may_send=lambda key: key is None or self.leases.holds(key),
            )
        return await self._delivery.redeliver(replied, now=self.clock.now())

    async def _lead_webhooks(self, sender: WebhookSender, stop: asyncio.Event) -> None:
        """On a shared database, send webhook events only while leading the lease
        `webhooks:outbound` (two senders would break each session's order), until `stop`."""
        role = Leadership(self.presence.ownership, clock=self.clock).role("webhooks:outbound")
        leading = asyncio.ensure_future(role.run(lambda: sender.run(stop)))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({leading, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (leading, stopping):
                task.cancel()
            await asyncio.gather(leading, stopping, return_exceptions=True)

    async def retry_delivery_row(self, delivery_id: int) -> DeliveryRecord | None:
        """The operator's retry of one delivery of the dead-letter list (`Delivery.retry`):
        its row afterwards, or None when there is no such undelivered delivery."""
        if self._stopping:
            return None
        return await self._delivery.retry(delivery_id)

    def delivery_outcomes(self) -> dict[str, int]:
        """Tries since the start by outcome (`sent`, `failed`, `dead`)."""
        return dict(self._delivery.outcomes)

    async def retry_delivery(self, turn_id: int) -> bool:
        """Send one undelivered (`replied`) reply now, as the operator asks; False when it is
        not waiting for delivery or the send failed again (housekeeping keeps trying)."""
        turn = self.lane_store.get_turn(turn_id)
        if turn is None or turn.state is not TurnState.REPLIED or self._stopping:
            return False
        return await self._delivery.deliver_reply(
            turn.session_key, turn.id, turn.source, turn.reply or "", force=True
        )

    # ------------------------------------------------------------------ lanes

    async def _lane_worker(self, lane: Lane) -> None:
        try:
            if self.leases.shared and not await self._take_lane(lane):
                if lane.first is not None:
                    # Claimed by its accept just before the lease could no longer be acted
                    # on: the turn stays `running`, for the recovery of the lane's next
                    # worker here (or of its next owner).
                    lane.first = None
                    self.leases.settle(lane.key, settled=False)
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
                if self._stopping:
                    # Claimed just before the stop: journalled like a turn the drain cut off.
                    self.lane_store.requeue(first.turn.id, resume_reason=self._drain_reason)
                    return
                await self._executor.run(lane, first, resumed=False)
            while True:
                if lane.resume:
                    await self._deliveries_done.wait()
                    turn_id = lane.resume.popleft()
                    self._resuming.add(turn_id)
                    try:
                        await self._run_resume(lane, turn_id)
                    finally:
                        self._resume_finished(turn_id)
                    continue
                if not self._gate.is_set():
                    await self._gate.wait()
                    continue
                if self._stopping or self._lanes.is_held(lane.key):
                    return
                if not self.leases.may_act():
                    return  # the lease may be moving on: the sweep brings the lane back
                if self.leases.shared and not self.lane_store.has_pending(lane.key):
                    # One read, not a fenced transaction, at the end of every burst: a row
                    # accepted after it wakes this lane again (here at once; from another
                    # instance by its hint, or the sweep).
                    self.leases.idle(lane.key)
                    return
                with self.leases.fence(lane.key, lock_lane=True):
                    found = self._router.claim_next(
                        lane.key,
                        user_message=self._executor.claim_user_message,
                        pending=self.leases.shared,  # seen just above
                    )
                if found.entry is not None:
                    self.discard(found.entry, found.dropped)
                if found.refused is not None and found.entry is not None:
                    item = found.refused
                    self._waiters.resolve(item.id, ReceiptStatus.ARCHIVED, reply=ARCHIVED_NOTICE)
                    await self.refuse_archived(found.entry, item.source, event=item.event_kind)
                    continue
                if found.claim is None:
                    # Idle: the lease lingers for the lane's next message, then goes back.
                    self.leases.idle(lane.key)
                    return
                await self._executor.run(lane, found.claim, resumed=False)
        except LeaseLostError:
            # The lease moved on (the fence let it go here), or may have (past `may_act`):
            # whoever owns the lane next recovers the turn this worker left.
            self.leases.settle(lane.key, settled=False)
            log.warning("lane lease lost; the lane moves on", extra={"session_key": lane.key})
        except StoreUnavailableError as exc:
            # The database went away between turns (a restart): the rows wait in the inbox,
            # and the sweep (or the next message) brings the lane back once it returns.
            self.leases.settle(lane.key, settled=False)
            log.warning(
                "lane paused: the database is away",
                extra={"session_key": lane.key, "error": str(exc)},
            )
        except Exception:
            self.leases.settle(lane.key, settled=False)
            # Logged and counted; the lane's rows stay in the inbox for the next dispatch.
            self._counters.lane_errors += 1
            log.exception("lane worker failed", extra={"session_key": lane.key})
        finally:
            self._lanes.release(lane)

    async def _take_lane(self, lane: Lane) -> bool:
        """Hold the lane's lease before its worker does anything (shared database); True
        once held, after recovering what an earlier owner left on it."""
        try:
            taken = self.leases.acquire(lane.key)
            if taken is None:
                return False
            self.leases.busy(lane.key)
            if taken or self.leases.unsettled(lane.key):
                # A turn claimed here under the lane's earlier lease is one of those recovered
                # (resumed, or settled): it must not also run as claimed.
                lane.first = None
                await self._recover_lane(lane)
                self.leases.settle(lane.key)
        except StoreUnavailableError:
            log.warning("lane not taken: the database is away", extra={"session_key": lane.key})
            return False
        return True

    async def _recover_lane(self, lane: Lane) -> None:
        """The lane's unfinished turns, as a crash recovery would settle them (`recovery.py`
        steps 3-5), for one lane this instance owns now: a `running` turn was cut off (its
        owner died, paused past its lease, or this instance lost the database), so it goes
        back to `accepted`; an accepted turn is stale, stuck or resumed; a `replied` one is
        delivered. Every write commits under the lane's lease."""
        key = lane.key
        for turn_id in self.leases.in_flight(key):
            turn = self.lane_store.get_turn(turn_id)
            if turn is None:
                continue
            if turn.state is TurnState.REPLIED:
                if self.leases.may_act():
                    # Never late: one older than `delivery.max_age_seconds` is reported dead.
                    await self._delivery.recover([turn], now=self.clock.now())
                continue
            if turn.state is TurnState.RUNNING:
                with self.leases.fence(key):
                    self.lane_store.requeue(
                        turn.id, resume_reason=str(ResumeReason.RESTART_INTERRUPTED)
                    )
                log.info("took over a cut-off turn", extra={"session_key": key, "turn_id": turn_id})
            claim = self.lane_store.get_claim(turn_id)
            if claim is None:
                continue
            verdict = recovery.classify(
                claim.turn,
                self.lane_store.restart_count(key),
                self.config,
                self.clock.now(),
                awaiting_approval=turn_id in self.approvals.pending_turns(),
            )
            if verdict == "resume":
                await self._run_resume(lane, turn_id)
                continue
            plan = recovery.RecoveryPlan(clean=False)
            (plan.stale if verdict == "stale" else plan.stuck).append(claim)
            for source, text, notice_turn in self._settle(plan):
                if self.leases.may_act():
                    await self._delivery.send(source, text, turn_id=notice_turn)

    def _wake_lane(self, key: str) -> None:
        """The sweep or a hint found work on `key`: a worker tries to take it."""
        if not self._stopping and self._accepting and key not in self._lanes:
            self._lanes.ensure(key, self._lane_worker)

    def _hint_from_thread(self, key: str) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake_lane, key)

    def _rejoined(self, instance_id: str) -> None:
        """Declared dead by the others (a long pause): this instance is back under a new id,
        and nothing it held is its own any more."""
        self.leases.forget_all()
        if self._wakeups is not None:
            self._wakeups.listen(instance_id)

    async def _run_resume(self, lane: Lane, turn_id: int) -> None:
        if self._stopping:
            return  # still `accepted`: it resumes at the next start
        try:
            with self.leases.fence(lane.key):
                claim, count = self.lane_store.claim_resume(turn_id)
        except (StaleWriteError, LookupError):
            log.exception("resume could not be claimed", extra={"turn_id": turn_id})
            return
        self.write_restart_counts()
        self._turns.resumed += 1
        log.info(
            "resuming turn",
            extra={"session_key": lane.key, "turn_id": turn_id, "restart_count": count},
        )
        await self._executor.run(lane, claim, resumed=True)

    # ------------------------------------------------------------------ inbound

    @traced(
        lambda self, event, **_: f"inbound {event.source.platform}",
        start=lambda self, event, **_: {
            "messaging.system": str(event.source.platform),
            "messaging.message.id": event.message_id,
            "sessiongate.chat_type": str(event.source.chat_type),
        },
        finish=lambda receipt, *_, **__: {
            "sessiongate.session_key": key_attribute(receipt.session_key),
            "sessiongate.session_id": receipt.session_id,
            "sessiongate.turn_id": receipt.turn_id,
            "sessiongate.receipt": str(receipt.status),
        },
    )
    async def handle_message(
        self, event: MessageEvent, *, wait: bool = True, watch: TurnWatch | None = None
    ) -> Receipt:
        """Route one inbound message; with `wait`, return once its turn has an outcome.

        Called before `start()` finishes, it waits for it; after `stop()`, it answers
        `unavailable` (nothing is written, so the platform's redelivery or the client's retry is
        safe). A message accepted without waiting answers `queued` with the id of the turn
        that will answer it (`GET /v1/turns/{id}`). With `watch`, the accepted message's turn
        streams into it (deltas, messages as stored, then the receipt); a message that was not
        accepted leaves it untouched.
        """
        await self._ready.wait()
        event = self._normalise(event)
        source = event.source
        if not self._accepting:
            # Nothing was written: a retry after the restart is safe (HTTP answers 503).
            return Receipt(
                self._key_of(event), None, ReceiptStatus.UNAVAILABLE, _SHUTTING_DOWN, None
            )
        if not event.internal and not self._is_authorized(source):
            self._counters.unauthorized += 1
            log.info(
                "unauthorized sender",
                extra={"platform": str(source.platform), "user_id": source.user_id},
            )
            return Receipt(self._key_of(event), None, ReceiptStatus.UNAUTHORIZED, None, None)
        command = (
            None
            if event.event_kind
            else parse_command(
                event.text,
                reset_triggers=self.config.reset_triggers,
                agent_commands=self.config.agent_commands,
            )
        )
        if command is not None:
            return await self._commands.run(command, event, wait=wait)
        # System events never interrupt and never merge: each is its own queued turn.
        kind = InboxKind.QUEUED if event.event_kind else InboxKind.SLOT
        inbound = event.to_inbound()
        key = self._key_of(event)
        # On a shared database a turn is claimed in its accepting transaction only on a lane
        # this instance holds (its lease lingering after its last turn), under the fence;
        # elsewhere the lane's worker claims the lease first.
        held = (
            self.leases.shared
            and self.leases.holds(key)
            and not self.leases.unsettled(key)
            and self._lanes.is_free(key)
            and self.leases.may_act()
        )
        try:
            routed, acceptance, claim = self._accept_routed(event, inbound, kind, key, held)
        except LeaseLostError:
            routed, acceptance, claim = self._accept_routed(event, inbound, kind, key, False)
        except StoreUnavailableError:
            if held:
                # The connection died with the commit's answer (a restart): the claim may have
                # committed a running turn no worker here runs. Claimed here next, the lane's
                # later rows would overtake it; its next worker recovers it first.
                self.leases.settle(key, settled=False)
            raise
        entry = routed.entry
        if (
            watch is not None
            and acceptance is not None
            and acceptance.status in (AcceptStatus.ACCEPTED, AcceptStatus.MERGED)
            and acceptance.inbox_id is not None
        ):
            # Before any await: the turn cannot have produced anything yet.
            self._waiters.watch(acceptance.inbox_id, entry.session_key, watch)
        self.discard(entry, routed.dropped)
        if acceptance is None:
            return await self.refuse_archived(entry, source, event=event.event_kind)
        if claim is None:
            return await self.dispatch(
                entry, source, acceptance, wait=wait, interrupt=kind is InboxKind.SLOT
            )
        # The lane was free and nothing awaited since: its worker starts with this turn. Its
        # lingering lease is no longer idle, so the sweep cannot give it back under the turn
        # before the worker runs.
        self.leases.busy(entry.session_key)
        future = (
            self._waiters.add(claim.item.id, entry.session_key, entry.session_id) if wait else None
        )
        self._lanes.ensure(entry.session_key, self._lane_worker, first=claim)
        if future is None:
            return Receipt(
                entry.session_key, entry.session_id, ReceiptStatus.QUEUED, None, claim.turn.id
            )
        return await future

    def _accept_routed(
        self, event: MessageEvent, inbound: Inbound, kind: InboxKind, key: str, held: bool
    ) -> tuple[Routed, Acceptance | None, Claim | None]:
        """Route and accept one message in one transaction, claiming its turn at once when
        the lane is free (and, on a shared database, `held` here: then under the fence, and
        `LeaseLostError` means nothing was written)."""
        shared = self.leases.shared
        fence = self.leases.fence(key, lock_lane=True) if held else contextlib.nullcontext()
        # No call inside is caught and gone on from: the calls need no savepoints.
        with fence, self.lane_store.atomic(savepoints=False):
            if shared and not held:
                # The lane's writer lock before the route's row lock, in the order a claim
                # takes them, so an accept (a merge into the waiting slot) and the owner's
                # claim of that slot never interleave, and never deadlock.
                self.lane_store.lock_lane(key)
            routed = self.route(
                event.source,
                event_kind=event.event_kind,
                session_key=event.session_key,
                visible_session_id=event.visible_session_id,
            )
            entry = routed.entry
            startable = (
                not routed.busy
                and self._gate.is_set()
                and not self._stopping
                and (not shared or (held and entry.session_key == key))
            )
            if routed.archived:
                return routed, None, None  # refused by the caller; nothing is written
            if startable:
                acceptance, claim = self.lane_store.accept_and_claim(
                    inbound,
                    entry=entry,
                    kind=kind,
                    cap=self.config.queue_cap,
                    user_message=self._executor.claim_user_message,
                )
                return routed, acceptance, claim
            return routed, self.accept(entry, inbound, kind), None

    def _normalise(self, event: MessageEvent) -> MessageEvent:
        adapter = self._delivery.adapter_for(event.source.platform)
        if adapter is None:
            return event
        chat_id = adapter.chat_id_key(event.source.chat_id)
        if chat_id == event.source.chat_id:
            return event
        return replace(event, source=replace(event.source, chat_id=chat_id))

    def _is_authorized(self, source: SessionSource) -> bool:
        adapter = self._delivery.adapter_for(source.platform)
        if adapter is not None and getattr(adapter, "authorizes_senders", False):
            # A kit adapter admitted the message by its own, stricter policy (users and chats,
            # pairing; fail closed) before handing it over.
            return True
        platform = self.config.platforms.get(str(source.platform))
        if platform is None or platform.allow_from is None:
            return True
        allowed = set(platform.allow_from)
        return "*" in allowed or any(
            uid in allowed for uid in (source.user_id, source.user_id_alt) if uid
        )

    def _key_of(self, event: MessageEvent) -> str:
        # Computed, never stored: an unauthorised sender must leave no row behind.
        if event.session_key is not None:
            return event.session_key
        return build_session_key(
            event.source,
            group_sessions_per_user=self.config.group_sessions_per_user,
            thread_sessions_per_user=self.config.thread_sessions_per_user,
            agent_id=agent_for(event.source, self.config.bindings),
        )

    # ------------------------------------------------------------------ CommandHost

    def route(
        self,
        source: SessionSource,
        *,
        event_kind: str | None = None,
        session_key: str | None = None,
        visible_session_id: str | None = None,
    ) -> Routed:
        return self._router.route(
            source,
            event_kind=event_kind,
            session_key=session_key,
            visible_session_id=visible_session_id,
        )

    async def refuse_archived(
        self, entry: SessionEntry, source: SessionSource, *, event: str | None = None
    ) -> Receipt:
        """Answer a message to an archived session; a system event (`event`, its kind) gets
        the receipt only: the notice is for people."""
        self._counters.archived += 1
        log.info(
            "message to an archived session refused",
            extra={"session_key": entry.session_key, "event_kind": event},
        )
        if event is None:
            await self.notify(source, ARCHIVED_NOTICE)
        return Receipt(
            entry.session_key, entry.session_id, ReceiptStatus.ARCHIVED, ARCHIVED_NOTICE, None
        )

    def accept(self, entry: SessionEntry, inbound: Inbound, kind: InboxKind) -> Acceptance:
        return self.lane_store.accept(
            inbound,
            session_key=entry.session_key,
            session_id=entry.session_id,
            kind=kind,
            cap=self.config.queue_cap,
        )

    async def dispatch(
        self,
        entry: SessionEntry,
        source: SessionSource,
        acceptance: Acceptance,
        *,
        wait: bool,
        interrupt: bool,
    ) -> Receipt:
        key = entry.session_key
        if acceptance.status is AcceptStatus.DUPLICATE:
            assert acceptance.seen is not None
            return await self._duplicate(acceptance.seen, wait=wait)
        if acceptance.status is AcceptStatus.FULL:
            self._counters.queue_full += 1
            notice = (
                f"{acceptance.depth} messages are already waiting here, so this one was not "
                "taken. Please send it again after the current replies."
            )
            log.warning("queue full", extra={"session_key": key, "depth": acceptance.depth})
            await self.notify(source, notice)
            return Receipt(key, entry.session_id, ReceiptStatus.QUEUE_FULL, notice, None)
        assert acceptance.inbox_id is not None
        # A queued message already knows the turn that will answer it (`Acceptance.turn_id`).
        turn_id = acceptance.turn_id()
        if self._stopping:
            # Accepted while the runner drains: the row is durable and runs after the restart.
            return Receipt(key, entry.session_id, ReceiptStatus.QUEUED, None, turn_id)
        lane = self._lanes.get(key)
        if (
            interrupt
            and self.config.busy_input_mode == "interrupt"
            and self._gate.is_set()
            and lane is not None
            and lane.running is not None
            and lane.running.cancel(CancelReason.INTERRUPT)
        ):
            log.info(
                "follow-up interrupts the running turn",
                extra={"session_key": key, "turn_id": lane.running.turn_id},
            )
        future = self._waiters.add(acceptance.inbox_id, key, entry.session_id) if wait else None
        self._lanes.ensure(key, self._lane_worker)
        if future is None:
            return Receipt(key, entry.session_id, ReceiptStatus.QUEUED, None, turn_id)
        return await future

    async def _follow_remote_outcomes(self, stop: asyncio.Event) -> None:
        """On a shared database a message accepted here may run on the instance owning its
        lane: its waiting caller is answered from the journal once that turn has ended."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), REMOTE_OUTCOME_POLL_SECONDS)
            except TimeoutError:
                pass
            else:
                return
            for inbox_id, key in self._waiters.rows().items():
                # A lane held here is answered by its own turn, with the richer receipt: no
                # read of the journal for it (it would be a round trip in the lane's way).
                if self.leases.holds(key):
                    continue
                try:
                    turn = self.lane_store.get_turn(inbox_id)
                except StoreUnavailableError:
                    break
                if turn is None or turn.inbox_id != inbox_id:
                    continue
                status = _REMOTE_OUTCOMES.get(turn.state)
                if status is not None:
                    self._waiters.resolve(
                        inbox_id,
                        status,
                        reply=turn.reply,
                        turn_id=turn.id,
                        session_id=turn.session_id,
                    )

    async def _duplicate(self, seen: SeenRecord, *, wait: bool) -> Receipt:
        self._counters.duplicates += 1
        if wait and seen.pending and seen.inbox_id is not None:
            first = await self._waiters.add(seen.inbox_id, seen.session_key, seen.session_id)
            return replace(first, status=ReceiptStatus.DUPLICATE)
        return Receipt(
            seen.session_key, seen.session_id, ReceiptStatus.DUPLICATE, seen.reply, seen.turn_id
        )

    async def notify(self, source: SessionSource, text: str) -> None:
        await self._delivery.send(source, text, turn_id=None)

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
        await self._ready.wait()
        if self._stopping or not self._accepting:
            raise SessionBusyError("the gateway is shutting down", session_key=session_key)
        if not self._lanes.is_free(session_key):
            raise SessionBusyError(
                "a turn is running or waiting on this session; compact after it",
                session_key=session_key,
            )
        if self.store.get_session(session_key) is None:
            raise SessionNotFoundError(
                f"no session with key {session_key!r}", session_key=session_key
            )
        if self.leases.shared and self.leases.acquire(session_key) is None:
            raise SessionBusyError(
                "another gateway instance runs this session's turns; compact it there",
                session_key=session_key,
            )
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

        self._lanes.ensure(session_key, self._lane_worker, job=job)
        # Shielded: a caller that gives up does not cut the compaction off half-way.
        return await asyncio.shield(outcome)

    def discard(self, entry: SessionEntry, inbox_ids: Sequence[int]) -> None:
        for inbox_id in inbox_ids:
            self._waiters.resolve(inbox_id, ReceiptStatus.INTERRUPTED, session_id=entry.session_id)

    def wake(self, session_key: str) -> None:
        if not self._stopping and self.lane_store.queue_depth(session_key):
            self._lanes.ensure(session_key, self._lane_worker)

    # ------------------------------------------------------------------ introspection

    def is_busy(self, session_key: str) -> bool:
        """A worker holds the lane: a turn is running or about to."""
        return session_key in self._lanes

    def queue_depth(self, session_key: str) -> int:
        return self.lane_store.queue_depth(session_key)

    def live_turn(self, session_key: str, turn_id: int) -> LiveTurn | None:
        """How turn `turn_id` stands while this process runs it (None otherwise)."""
        lane = self._lanes.get(session_key)
        running = lane.running if lane is not None else None
        if running is None or running.turn_id != turn_id or running.progress is None:
            return None
        return LiveTurn(partial="".join(running.progress.partial), retries=running.progress.retries)

    @property
    def adapters(self) -> list[PlatformAdapter]:
        """The platform adapters this runner delivers through."""
        return self._delivery.adapters

    def statistics(self) -> RunnerStatistics:
        cache = self._agents.statistics()
        return RunnerStatistics(
            running_turns=self._lanes.running_turns(),
            queued=self.lane_store.total_queued(),
            lanes=len(self._lanes),
            turns_completed=self._turns.completed,
            turns_failed=self._turns.failed,
            turns_interrupted=self._turns.interrupted,
            turns_resumed=self._turns.resumed,
            agent_cache_size=cache.size,
            evictions=cache.evictions_total,
            duplicates=self._counters.duplicates,
            unauthorized=self._counters.unauthorized,
            queue_full=self._counters.queue_full,
            archived=self._counters.archived,
            rollovers=self._router.rollovers,
            deliveries_failed=self._delivery.failures,
            deliveries_sent=self._delivery.outcomes.get("sent", 0),
            deliveries_dead=self._delivery.outcomes.get("dead", 0),
            lane_errors=self._counters.lane_errors,
            waiters=len(self._waiters),
            startup_gate_open=self._gate.is_set(),
            accepting=self._accepting,
            **self.presence.statistics(),
        )
