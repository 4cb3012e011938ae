"""`GatewayRunner`: composes the gateway, starts it, stops it, and counts what it did.

It wires the collaborators and delegates to them: `intake.py` takes an inbound message to its
lane (authorise, command, route, accept durably, dispatch), `worker.py` runs a lane (its turns
through `turns.py`, resumes, lease take-over, compaction jobs), `delivery.py` sends replies,
`recovery.py` decides what a restart does with the journal. `RunState` (`run_state.py`) is
the life they share: ready, the startup gate, accepting, stopping.

One runner per home: `start()` takes `<home>/gateway.lock` (see `recovery.HomeLock`) before
recovery reads the journal, and `stop()` releases it after the clean-shutdown marker is written;
a second runner on a live home fails with `HomeInUseError` and touches nothing.

Whose lanes are whose is chosen once, here (`lane_leases.py`): every lane on a database of its
own (`SoloOwnership`); on a PostgreSQL database shared by several instances, each with its own
home, a lane's turns only on the instance holding its lease (`LeasedOwnership`).

The sync/async seam (`store_calls.py`, chosen once here): a lane's store calls are awaited,
and run inline on the event loop on SQLite and on the store's threads on PostgreSQL, so the loop
never waits on the network. A store call once started always finishes, so cancellation can
never split one from the bookkeeping after it, and what a commit tells the change listeners
reaches them on the loop.

Every task has an owner: the runner's `TaskGroup` (lane workers, the recovery task, the
housekeeping watcher of spec §10 over the runner's agent cache), held by a supervisor task
that `stop()` awaits; each turn's agent call runs in a per-turn group owned by its worker.
Shutdown order: stop accepting, drain running turns under `agent.restart_drain_timeout`,
journal the rest for resume, stop adapters, close agents, write `.clean_shutdown`. The store
belongs to the caller and stays open.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiongate.core.entry import ResumeReason
from sessiongate.gateway import operations, recovery
from sessiongate.gateway.agent import AgentResources
from sessiongate.gateway.agent_cache import AgentCache
from sessiongate.gateway.approvals import Approvals
from sessiongate.gateway.compaction import Compactor
from sessiongate.gateway.delivery import DELIVERY_TIMEOUT_SECONDS, Delivery
from sessiongate.gateway.feed import EventFeed
from sessiongate.gateway.housekeeping import HousekeepingWatcher
from sessiongate.gateway.inbound_hooks import InboundHooks
from sessiongate.gateway.instances import InstancePresence
from sessiongate.gateway.intake import Intake
from sessiongate.gateway.lane_leases import open_lane_ownership
from sessiongate.gateway.lanes import CancelReason, LaneTable, LiveTurn
from sessiongate.gateway.messages import Receipt, ReceiptStatus
from sessiongate.gateway.prompts import SystemPrompts
from sessiongate.gateway.receipts import Waiters
from sessiongate.gateway.routing import Router
from sessiongate.gateway.run_state import IntakeCounters, RunnerStatistics, RunState
from sessiongate.gateway.scheduler import Scheduler
from sessiongate.gateway.store_calls import store_calls
from sessiongate.gateway.turns import (
    TurnCounters,
    TurnExecutor,
)
from sessiongate.gateway.webhooks import WebhookSender
from sessiongate.gateway.worker import ARCHIVED_NOTICE, LaneWorker
from sessiongate.store.deliveries import DeliveryStore
from sessiongate.store.lanes import LaneStore
from sessiongate.store.outbox import OutboxStore

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.gateway.adapter import PlatformAdapter
    from sessiongate.gateway.agent import AgentFactory
    from sessiongate.gateway.messages import MessageEvent
    from sessiongate.gateway.streams import TurnWatch
    from sessiongate.store.changes import Change
    from sessiongate.store.deliveries import DeliveryRecord
    from sessiongate.store.session_store import SessionStore

__all__ = ["ARCHIVED_NOTICE", "GatewayRunner", "RunnerStatistics"]

log = logging.getLogger(__name__)


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
        # How the gateway calls the store, chosen once: on the loop, or off it (decision 15).
        self.calls = store_calls(store.remote, threads=config.store.connections)
        # The store's change listeners, told on the loop; added here, removed by `stop()`.
        self._listeners: list[Callable[[list[Change]], None]] = []
        # The live feed (`feed.py`): fed by the store's commits from here until `stop()`.
        self.feed = EventFeed(config.feed, clock=self.clock)
        self._listen(self.feed.publish_changes)
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
        self.outbox = OutboxStore(store, self.clock)
        self.webhooks: WebhookSender | None = None
        if config.webhooks.outbound:
            self.outbox.subscribe({hook.url: hook.events for hook in config.webhooks.outbound})
            self.webhooks = WebhookSender(
                self.outbox, config.webhooks, clock=self.clock, calls=self.calls
            )
            self._listen(self.webhooks.changes_committed)
        self._delivery = Delivery(
            adapters,
            self.lane_store,
            clock=self.clock,
            deliveries=self.deliveries,
            config=config.delivery,
            calls=self.calls,
        )
        # Tool calls waiting for a person's approval (`approvals.py`).
        self.approvals = Approvals(
            store,
            config,
            clock=self.clock,
            notify=self._delivery.send_approval,
            waiting=lambda turn_id: self.worker.approval_waiting(turn_id),
            settled=self._delivery.settle_approval,
        )
        self.housekeeping = HousekeepingWatcher(
            store=store,
            cache=self._agents,
            config=config,
            clock=self.clock,
            lanes=self.lane_store,
            redeliver=lambda: self.worker.redeliver(),
            expire_approvals=lambda: len(self.approvals.expire_due()),
            prune_hook_receipts=lambda: self.inbound_hooks.purge(),
            calls=self.calls,
        )
        self._housekeeping_stop = asyncio.Event()
        # Other instances on a shared database see this one through it (gateway/instances.py).
        self.presence = InstancePresence(store, config)
        # Whose lanes are whose (`lane_leases.py`), chosen once: every lane on a database of
        # its own, a lane's turns only under its lease on a shared one.
        self.leases = open_lane_ownership(self.presence.ownership, config)
        self.presence.on_rejoin = self.leases.rejoined
        # Scheduled jobs run as system turns through `handle_message` (`scheduler.py`).
        self.jobs = Scheduler(
            store,
            config,
            submit=self.handle_message,
            clock=self.clock,
            shared=self.presence.ownership is not None,
            feed=self.feed,
            delivers=lambda platform: self._delivery.adapter_for(platform) is not None,
            calls=self.calls,
        )
        self._delivery.quiet = self.jobs.quiet
        # Inbound webhooks (`POST /hooks/in/<name>`) run as system turns the same way.
        self.inbound_hooks = InboundHooks(
            store, config, submit=self.handle_message, clock=self.clock, feed=self.feed
        )
        self._listen(self.jobs.on_changes)
        self._home_lock = recovery.HomeLock(self.home)
        self._state = RunState()
        self._waiters = Waiters()
        self._turns = TurnCounters()
        self._counters = IntakeCounters()
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
            drain_reason=lambda: self._state.drain_reason,
            host=self,
            fence=self.leases.fence,
            may_act=self.leases.may_act,
            feed=self.feed,
            prompts=self.system_prompts,
            approvals=self.approvals,
            calls=self.calls,
        )
        compactor = Compactor(
            store=store,
            lane_store=self.lane_store,
            config=config,
            executor=self._executor,
            fence=self.leases.fence,
            holds=self.leases.holds,
        )
        # The lane loop, resumes, lease take-over and compaction jobs (`worker.py`), and the
        # path of an inbound message up to its lane (`intake.py`, the commands' host).
        self.worker = LaneWorker(
            store=store,
            lane_store=self.lane_store,
            config=config,
            clock=self.clock,
            state=self._state,
            lanes=self._lanes,
            router=self._router,
            executor=self._executor,
            compactor=compactor,
            leases=self.leases,
            delivery=self._delivery,
            waiters=self._waiters,
            approvals=self.approvals,
            turns=self._turns,
            counters=self._counters,
            counts_changed=self.write_restart_counts,
            refuse_archived=lambda *args, **kw: self.intake.refuse_archived(*args, **kw),
            calls=self.calls,
        )
        self.intake = Intake(
            store=store,
            lane_store=self.lane_store,
            config=config,
            state=self._state,
            lanes=self._lanes,
            router=self._router,
            executor=self._executor,
            worker=self.worker,
            leases=self.leases,
            delivery=self._delivery,
            waiters=self._waiters,
            approvals=self.approvals,
            counters=self._counters,
            counts_changed=self.write_restart_counts,
            clock=self.clock,
            calls=self.calls,
        )
        # Lanes an operator took over from the agent (`takeover.py`), held at intake.
        self.takeovers = self.intake.takeovers
        self._shutdown = asyncio.Event()
        self._stop_lock = asyncio.Lock()
        self._group: asyncio.TaskGroup | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._recovery_task: asyncio.Task[None] | None = None
        self._started = self._stopped = False

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
        self.calls.start()
        group_ready = asyncio.Event()
        self._supervisor = asyncio.create_task(self._supervise(group_ready), name="sessiongate")
        await group_ready.wait()
        if self._agent_resources is not None:
            await self._agent_resources.start()  # before any turn, resumed ones included
        # Registered before any worker claims a lane under this instance's id.
        await self.presence.start()
        plan = self.leases.recovery_plan(
            home=self.home,
            store=self.store,
            lane_store=self.lane_store,
            config=self.config,
            now=self.clock.now(),
        )
        notices = self.worker.settle(plan)
        self.takeovers.load()  # before any worker: a lane taken over stays held
        # The database is the truth; the file mirrors it from here on.
        self.write_restart_counts()
        self.worker.expect_resumes(len(plan.resume))
        for turn in plan.resume:
            self.worker.ensure(turn.session_key, resume_turn=turn.id)
        for key in plan.pending_lanes:
            self.worker.ensure(key)
        self._recovery_task = self._spawn(self.worker.finish_recovery(plan.deliver, notices))
        own, stop = self.presence.ownership, self._housekeeping_stop
        for run in (self.housekeeping.run, self.presence.run, self.jobs.run, self.takeovers.run):
            self._spawn(run(stop))
        if self.webhooks is not None:
            # On a shared database one sender at a time, its leader.
            sender = self.webhooks
            self._spawn(sender.run(stop) if own is None else sender.run_while_leading(own, stop))
        for task in self.leases.background(
            stop, wake=self.worker.wake_lane, follow_remote=self.intake.follow_remote_outcomes
        ):
            self._spawn(task)
        self._state.accepting = True
        self._state.ready.set()
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
            self._state.accepting = False
            self._state.ready.set()
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
        state = self._state
        state.stopping = True
        state.drain_reason = str(
            ResumeReason.RESTART_TIMEOUT if restart else ResumeReason.SHUTDOWN_TIMEOUT
        )
        # Wake workers waiting for recovery or the gate: they see `stopping` and leave.
        state.deliveries_done.set()
        state.gate.set()
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
        await self.leases.close()
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
        # Events of changes made after the stop are still written (the outbox's writer stays),
        # and sent by the next start.
        for listener in self._listeners:
            self.store.remove_change_listener(listener)
        self.calls.close()
        self.feed.close()
        log.info("gateway stopped", extra={"restart": restart})

    async def _supervise(self, ready: asyncio.Event) -> None:
        async with asyncio.TaskGroup() as group:
            self._group = group
            ready.set()
            await self._shutdown.wait()

    def _listen(self, listener: Callable[[list[Change]], None]) -> None:
        told = self.calls.on_loop(listener)
        self._listeners.append(told)
        self.store.add_change_listener(told)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        if self._group is None:
            coro.close()
            raise RuntimeError("the runner is not started")
        return self._group.create_task(coro)

    async def wait_idle(self) -> None:
        """Until the startup gate is open and no lane has work (tests, benchmarks)."""
        while True:
            await self._state.gate.wait()
            await self._lanes.wait_idle()
            if not len(self._lanes):
                return

    # ------------------------------------------------------------------ recovery

    def write_restart_counts(self) -> None:
        """Rewrite `restart_counts.json` from the database, its source of truth. Called after
        every commit that changes a counter here, and by callers that reset one outside a turn
        (the HTTP reset route) after their commit; `stop()` calls it too."""
        operations.rewrite_restart_counts(self.home, self.lane_store)

    async def retry_delivery_row(self, delivery_id: int) -> DeliveryRecord | None:
        """The operator's retry of one delivery of the dead-letter list (`Delivery.retry`):
        its row afterwards, or None when there is no such undelivered delivery."""
        if self._state.stopping:
            return None
        return await self._delivery.retry(delivery_id)

    def delivery_outcomes(self) -> dict[str, int]:
        """Tries since the start by outcome (`sent`, `failed`, `dead`)."""
        return dict(self._delivery.outcomes)

    async def retry_delivery(self, turn_id: int) -> bool:
        """Send one undelivered (`replied`) reply now, as the operator asks; False when it is
        not waiting for delivery or the send failed again (housekeeping keeps trying)."""
        if self._state.stopping:
            return False
        return await self._delivery.retry_reply(turn_id)

    # ------------------------------------------------------------------ lanes

    async def handle_message(
        self, event: MessageEvent, *, wait: bool = True, watch: TurnWatch | None = None
    ) -> Receipt:
        """Route one inbound message; with `wait`, return once its turn has an outcome
        (`intake.py`).

        Called before `start()` finishes, it waits for it; after `stop()`, it answers
        `unavailable` (nothing is written, so the platform's redelivery or the client's retry is
        safe). A message accepted without waiting answers `queued` with the id of the turn
        that will answer it (`GET /v1/turns/{id}`). With `watch`, the accepted message's turn
        streams into it (deltas, messages as stored, then the receipt); a message that was not
        accepted leaves it untouched.
        """
        return await self.intake.handle_message(event, wait=wait, watch=watch)

    async def compact(
        self, session_key: str, *, record: Callable[[dict[str, Any]], None] | None = None
    ) -> dict[str, Any]:
        """Summarise the older part of the session into a `compaction` entry (`compaction.py`):
        `{compacted, tokens_before, tokens_after, reason}`; run on the lane as a turn is, with
        the refusals of `LaneWorker.compact`. `record(result)` runs inside the commit."""
        return await self.worker.compact(session_key, record=record)

    def wake(self, session_key: str) -> None:
        """Start the lane's worker when rows wait on it (after an operator's change)."""
        self.intake.wake(session_key)

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
            startup_gate_open=self._state.gate.is_set(),
            accepting=self._state.accepting,
            **self.presence.statistics(),
        )
