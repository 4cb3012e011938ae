"""Running one claimed turn: model context, the streamed agent call, and the outcome commit.

The agent runs in its own task inside a per-turn `TaskGroup`, so an interrupt (a follow-up,
`/stop`, `/new`) or the drain cancels only the agent, and the lane's worker, which owns the
group, journals what happened. The turn is a stream of events (`streams.agent_events`), and
its progress is durable as it happens (DESIGN decision 11): the user message is stored by the
claim's transaction, and each message the agent completes (an assistant message with or
without tool calls, a tool result) in its own short transaction keyed by (turn, number). The
outcome stores what is left (the final reply) and settles the journal, the inbox row, the
counters and the flags in one transaction. Outcomes:

| agent                          | journal     | transcript (besides what was stored) | user gets |
|--------------------------------|-------------|--------------------------------------|-----------|
| replied                        | replied     | the reply                            | the reply |
| raised / gateway_timeout       | failed      | notice (excluded from model)         | a notice  |
| interrupted (follow-up, /stop) | interrupted | the partial text seen, marked        | nothing   |
| cancelled by the drain         | accepted    | nothing (the turn resumes later)     | later     |

A resumed turn reads what it stored before the restart (`turn_progress.resume_progress`): the
agent sees those calls and results, and a call with no result gets a synthetic one saying it
was interrupted. Past the ~400-line budget: the outcome paths (replied, failed, interrupted,
retried while the disk refuses) share their commit rules and stay together.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sessiongate.core.bindings import agent_of_key
from sessiongate.core.clock import isoformat
from sessiongate.core.context import (
    build_session_context,
    build_session_context_prompt,
    format_sender_prefix,
)
from sessiongate.core.keys import is_shared_multi_user_session
from sessiongate.core.pricing import turn_cost
from sessiongate.core.transcript import ModelContext, build_model_context, validate_message
from sessiongate.core.turn_events import (
    MessageCompleted,
    StreamRetry,
    TextDelta,
    ToolResult,
    TurnEnd,
    UsageReport,
)
from sessiongate.errors import (
    AgentTurnError,
    InvalidEntryError,
    LeaseLostError,
    RouteChangedError,
    SessionNotFoundError,
    StoreCorruptError,
    StoreUnavailableError,
)
from sessiongate.gateway.agent import TurnRequest
from sessiongate.gateway.lanes import CancelReason, Lane, RunningTurn
from sessiongate.gateway.messages import ReceiptStatus
from sessiongate.gateway.prompts import SystemPrompts, compose_system_prompt
from sessiongate.gateway.store_calls import InlineCalls, in_thread
from sessiongate.gateway.streams import StreamedMessage, agent_events
from sessiongate.gateway.tracing import key_attribute, set_attributes, traced
from sessiongate.gateway.turn_progress import (
    RESUME_NOTE,
    StoredProgress,
    TurnProgress,
    resume_note,
    resume_progress,
    tool_message,
)
from sessiongate.store.tree import INLINE_CONTEXT_ENTRIES

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable
    from contextlib import AbstractContextManager

    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.turn_events import TurnEvent
    from sessiongate.gateway.agent import Agent, AgentFactory, AgentHost
    from sessiongate.gateway.agent_cache import AgentCache
    from sessiongate.gateway.approvals import Approvals
    from sessiongate.gateway.delivery import Delivery
    from sessiongate.gateway.feed import EventFeed
    from sessiongate.gateway.receipts import Waiters
    from sessiongate.gateway.store_calls import StoreCalls
    from sessiongate.store.lanes import Claim, InboxItem, LaneStore, ReplyStored
    from sessiongate.store.session_store import SessionStore

__all__ = [
    "RESUME_NOTE",
    "STALE_NOTICE",
    "STUCK_NOTICE",
    "TurnCounters",
    "TurnExecutor",
    "build_user_message",
    "failure_notice",
]

log = logging.getLogger(__name__)

STALE_NOTICE = (
    "Your message could not be answered: it was interrupted by a restart, and it is too old "
    "to continue automatically. Please send it again if it still matters."
)
STUCK_NOTICE = (
    "This conversation kept getting interrupted by restarts, so it was set aside; your next "
    "message starts a fresh session."
)


STORAGE_NOTICE = (
    "The reply could not be saved yet (the gateway's storage refused the write). Your message "
    "is kept; the gateway retries and answers it once storage recovers."
)


# Backoff of the outcome retries while the disk refuses writes (seconds).
# The store sends this read with the claim's commit when the limits agree (`LaneStore`).
_INLINE_CONTEXT_ENTRIES = INLINE_CONTEXT_ENTRIES
_STORE_RETRY_FIRST = 0.05
_STORE_RETRY_MAX = 5.0
# A turn's request is read again this often (backoff capped at `_CONTEXT_RETRY_MAX`: about 20
# seconds in all) while the store is away: a PostgreSQL restart takes seconds, a crash
# recovery a few more.
_CONTEXT_READ_ATTEMPTS = 24
_CONTEXT_RETRY_MAX = 1.0


def failure_notice(*, timed_out: bool, timeout: int) -> str:
    """The short reply a user gets for a failed turn; the error itself stays in the log and
    the journal (it may hold internals)."""
    if timed_out:
        return f"Sorry, no reply: the agent took longer than {timeout} seconds and was stopped."
    return "Sorry, something went wrong while answering. Please try again."


@dataclass(slots=True)
class TurnCounters:
    completed: int = 0
    failed: int = 0
    interrupted: int = 0
    resumed: int = 0


@dataclass(frozen=True, slots=True)
class _AgentDone:
    end: TurnEnd | None
    error: str | None = None
    timed_out: bool = False
    notice: str | None = None  # the agent's own word for the user, when it gave one
    # The store stayed away until the lease could have moved on, before the agent ran: the
    # turn stays `running`, for the lane's next worker (here or on its next owner).
    left: bool = False


def _conversation(session_id: str, entry: SessionEntry | None) -> str:
    """What names one conversation of a key: its session id, and when its window began (a
    soft `/reset` keeps the id and starts a new window)."""
    started = entry.session_started_at if entry is not None else None
    return f"{session_id}@{isoformat(started) if started is not None else ''}"


def _turn_attributes(claim: Claim, resumed: bool) -> dict[str, Any]:
    turn = claim.turn
    return {
        "sessiongate.session_key": key_attribute(turn.session_key),
        "sessiongate.session_id": turn.session_id,
        "sessiongate.turn_id": turn.id,
        "sessiongate.turn.attempt": turn.attempt,
        "sessiongate.turn.resumed": resumed,
    }


def build_user_message(
    item: InboxItem, *, turn_id: int, shared: bool, redact_pii: bool, pii_safe: bool | None = None
) -> dict[str, Any]:
    """The stored user message of a turn: merged parts joined with newlines, each prefixed with
    its own sender in a shared multi-user session, media listed as attachment lines."""
    lines: list[str] = []
    # In a shared session, who wrote each part (and its length in the stored text): what an
    # erasure request for one of them finds and takes out (`core/erasure.py`).
    senders: list[dict[str, Any]] = []
    for part in item.parts:
        text = str(part.get("text") or "")
        if shared and not part.get("verbatim"):
            sender = replace(
                item.source, user_id=part.get("user_id"), user_name=part.get("user_name")
            )
            text = format_sender_prefix(
                text, sender, shared=True, redact_pii=redact_pii, pii_safe=pii_safe
            )
        if shared:
            senders.append({"user_id": str(part.get("user_id") or ""), "chars": len(text)})
        lines.append(text)
    lines.extend(f"[attachment: {media}]" for media in item.media)
    metadata: dict[str, Any] = {"turn_id": turn_id}
    if senders:
        metadata["senders"] = senders
    if item.message_ids:
        metadata["message_ids"] = list(item.message_ids)
    if item.media:
        metadata["media"] = list(item.media)
    if item.reply_to:
        metadata["reply_to"] = item.reply_to
    if item.event_kind:
        metadata["event_kind"] = item.event_kind
    return {
        "role": "user",
        "content": "\n".join(lines),
        "timestamp": isoformat(item.accepted_at),
        "metadata": metadata,
    }


class TurnExecutor:
    """Runs claimed turns for the runner's lane workers."""

    def __init__(
        self,
        *,
        store: SessionStore,
        lane_store: LaneStore,
        config: GatewayConfig,
        agents: AgentCache,
        agent_factory: AgentFactory,
        delivery: Delivery,
        waiters: Waiters,
        counters: TurnCounters,
        counts_changed: Callable[[], None],
        drain_reason: Callable[[], str],
        host: AgentHost | None = None,
        fence: Callable[[str], AbstractContextManager[None]] | None = None,
        may_act: Callable[[], bool] | None = None,
        feed: EventFeed | None = None,
        prompts: SystemPrompts | None = None,
        approvals: Approvals | None = None,
        calls: StoreCalls | None = None,
    ) -> None:
        self._store = store
        # How the store is called: on the loop (SQLite) or off it (PostgreSQL).
        self._calls: StoreCalls = calls or InlineCalls()
        # Tool calls that wait for a person (`approvals.py`); None: no call ever waits.
        self._approvals = approvals
        # Each agent's (or binding's) instructions, placed before the session context block.
        self._prompts = prompts if prompts is not None else SystemPrompts(config)
        self._lane_store = lane_store
        self._config = config
        self._agents = agents
        self._agent_factory = agent_factory
        self._delivery = delivery
        self._waiters = waiters
        self._counters = counters
        self._counts_changed = counts_changed
        self._drain_reason = drain_reason
        self._host = host
        # The live feed: a stream retry is no store change, so the executor tells it itself.
        self._feed = feed
        # Many instances on one database (`lane_leases.py`): each write of a turn commits
        # under its lane's lease, and nothing starts (an agent call, a send) once the lease
        # may have moved on. On SQLite neither does anything.
        self._fence = fence or (lambda _key: contextlib.nullcontext())
        self._may_act = may_act or (lambda: True)
        self._release_due = False

    # ------------------------------------------------------------------ running

    @traced("turn", start=lambda self, lane, claim, *, resumed: _turn_attributes(claim, resumed))
    async def run(self, lane: Lane, claim: Claim, *, resumed: bool) -> None:
        turn = claim.turn
        extra = {"session_key": turn.session_key, "turn_id": turn.id}
        running = RunningTurn(turn.id)
        lane.running = running
        user_message = self.user_message(claim)
        progress = TurnProgress(user_message, stored=0 if claim.user_entry_id is None else 1)
        if not self._may_act():
            # Its lease may be another instance's by now: the turn stays `running` for
            # whoever owns the lane next (this instance again once its lease renews).
            lane.running = None
            self._answer(claim, ReceiptStatus.QUEUED, None)
            raise LeaseLostError(f"not starting turn {turn.id}: the lease may have moved on")
        running.progress = progress
        try:
            log.info("turn started", extra={**extra, "attempt": turn.attempt, "resumed": resumed})
            done = await self._call_agent(claim, running, progress, resumed=resumed)
        finally:
            lane.running = None
        if done is not None and done.left:
            self._answer(claim, ReceiptStatus.QUEUED, None)
            raise LeaseLostError(f"turn {turn.id} left: the store was away past the lease")
        # The outcome's commit tells whether the lane has more rows (`lane.pending`); work
        # handed to the lane from here on marks it `woken` (lanes.py).
        lane.woken = False
        lane.pending = await self._outcome(claim, progress, running, done)
        if self._release_due:
            self._release_due = False
            # Agents the cache evicted during this turn: commit and close them now, outside
            # any cancellation-sensitive section.
            await self._agents.drain_released()

    async def _outcome(
        self, claim: Claim, progress: TurnProgress, running: RunningTurn, done: _AgentDone | None
    ) -> bool | None:
        """Commit the turn's outcome; whether its lane has a row waiting, as it committed
        (None: not known)."""
        turn = claim.turn
        extra = {"session_key": turn.session_key, "turn_id": turn.id}
        if done is None:
            reason = running.cancel_reason or CancelReason.DRAIN
            if reason is CancelReason.DRAIN:
                await self._until_stored(claim, lambda: self._requeue(claim))
                log.info("turn left for resume after restart", extra=extra)
                return None
            if self._approvals is not None:
                # Nobody is waiting for these calls any more (a follow-up, `/stop`, `/new`).
                self._approvals.cancel(turn.session_key, by=str(reason))
            return await self._until_stored(
                claim, lambda: self.interrupt(claim, progress, reason=str(reason))
            )
        if done.end is not None and done.end.error is None:
            end = done.end
            return await self._until_stored(claim, lambda: self._replied(claim, progress, end))
        if done.end is not None:
            # The agent ended the turn itself with a reason (misconfigured, a tool loop past
            # its cap, ...): the user is told its text, the journal gets the reason.
            notice = done.end.text or failure_notice(timed_out=False, timeout=0)
            error = f"{done.end.error}: {done.end.detail or ''}".rstrip(": ")[:500]
        else:
            timeout = self._config.agent.gateway_timeout
            notice = done.notice or failure_notice(timed_out=done.timed_out, timeout=timeout)
            error = done.error or "error"
        return await self._until_stored(
            claim, lambda: self.fail(claim, progress, error=error, notice=notice)
        )

    def user_message(self, claim: Claim) -> dict[str, Any]:
        return self.claim_user_message(claim.item, claim.turn.id)

    def claim_user_message(self, item: InboxItem, turn_id: int) -> dict[str, Any]:
        """The stored user message of row `item`'s turn `turn_id` (the claim's transaction
        appends it)."""
        shared = is_shared_multi_user_session(
            item.source,
            group_sessions_per_user=self._config.group_sessions_per_user,
            thread_sessions_per_user=self._config.thread_sessions_per_user,
        )
        return build_user_message(
            item,
            turn_id=turn_id,
            shared=shared,
            redact_pii=self._config.redact_pii,
            pii_safe=self._pii_safe(item.source.platform),
        )

    def _pii_safe(self, platform: str) -> bool | None:
        """The connected adapter's `pii_safe` trait for `platform`; None without an adapter
        (the platform registry decides)."""
        adapter = self._delivery.adapter_for(platform)
        return None if adapter is None else adapter.pii_safe

    async def _request_retried(
        self, claim: Claim, progress: TurnProgress, *, resumed: bool
    ) -> tuple[TurnRequest, SessionEntry | None]:
        """`_request`, read again while the store is unavailable: the first statement on a
        connection the server dropped (a restart, an operator's `pg_terminate_backend`)
        fails, and the statements after it fail until the server is back. Its writes are
        keyed, so a retry doubles nothing. Past `may_act` (the outage outlasted what the
        lease allows) it raises `LeaseLostError`: the turn is not this worker's to fail."""
        delay = _STORE_RETRY_FIRST
        for _ in range(_CONTEXT_READ_ATTEMPTS - 1):
            try:
                return await self._request(claim, progress, resumed=resumed)
            except StoreUnavailableError:
                await asyncio.sleep(delay)
                delay = min(delay * 2, _CONTEXT_RETRY_MAX)
            if not self._may_act():
                raise LeaseLostError(f"turn {claim.turn.id}: the store is away past the lease")
        return await self._request(claim, progress, resumed=resumed)

    async def _request(
        self, claim: Claim, progress: TurnProgress, *, resumed: bool
    ) -> tuple[TurnRequest, SessionEntry | None]:
        """The agent's request, and the entry it was built from."""
        # Store calls go through `self._calls`: off the loop on PostgreSQL (store_calls.py).
        turn = claim.turn
        # The entry as routed when the turn was claimed (saves a read; a field changed since,
        # such as a `/title` sent meanwhile, shows from the next turn).
        entry = claim.entry or await self._calls.run(self._store.get_session, turn.session_key)
        note = None
        gate = (
            None
            if self._approvals is None
            else self._approvals.for_turn(
                turn_id=turn.id, session_key=turn.session_key, source=claim.item.source
            )
        )
        awaiting = None
        if resumed:
            stored = resume_progress(await self._calls.run(self._lane_store.turn_messages, turn))
            progress.resume_from(stored.messages)
            open_ids = [str(r["tool_call_id"]) for r in stored.interrupted_results]
            if gate is not None and open_ids and gate.has_open_calls(open_ids):
                # The calls waited for approval and none of them started: the agent takes
                # them up again (waiting on, or acting on, the same approvals), so they get
                # their real results instead of "interrupted".
                awaiting = next(
                    m for m in reversed(stored.messages) if m.get("role") == "assistant"
                )
                stored = StoredProgress(stored.messages, [])
            for synthetic in stored.interrupted_results:
                await self._complete(claim, progress, synthetic)
            note = resume_note(turn.attempt, stored)
        if claim.user_entry_id is None:
            await self._store_user_message(claim, progress)
        context = await self._read_context(turn.session_id)
        source = claim.item.source
        prompt = compose_system_prompt(
            self._prompts.instructions_for(turn.session_key, source),
            build_session_context_prompt(
                build_session_context(
                    source, self._config, entry, pii_safe=self._pii_safe(source.platform)
                )
            ),
        )
        messages = context.messages
        if progress.stored == 0:
            # The transcript refused the user message (it is stored with the outcome): the
            # agent gets it anyway.
            messages = [*messages, {"role": "user", "content": progress.user_message["content"]}]
        request = TurnRequest(
            session_key=turn.session_key,
            session_id=turn.session_id,
            system_prompt=prompt,
            messages=messages,
            # The last change entry on the active path; the entry's override when the path
            # has none (a reset starts a transcript without the change entries).
            model=context.model or (entry.model_override if entry else None),
            provider=context.provider or (entry.provider_override if entry else None),
            thinking_level=context.thinking_level or (entry.thinking_level if entry else None),
            resume_note=note,
            turn_id=turn.id,
            host=self._host,
            approvals=gate,
            awaiting=awaiting,
        )
        return request, entry

    async def _read_context(self, session_id: str) -> ModelContext:
        """The session's model context: as a store call when the transcript is short (on the
        loop on SQLite), else from a snapshot on a worker thread.

        A long one read on the loop blocks every lane (~16 ms for 10,000 entries); a short one
        reads faster than the hop to a thread costs (the hop and the snapshot were a quarter of
        a short turn's overhead). The threaded view comes from one snapshot; if the transcript
        moved before it could be used it is read once more, and if it moved again it is read
        in one store call, which the lane's own writes cannot overtake.
        """
        short = await self._calls.run(
            self._store.short_model_context, session_id, _INLINE_CONTEXT_ENTRIES
        )
        if short is not None:
            return short
        for _ in range(2):
            try:
                view = await in_thread(self._store.read_model_context, session_id)
            except SessionNotFoundError:
                return ModelContext()  # as `load_events` of a missing session gives
            if await self._calls.run(self._store.is_view_current, view):
                return view.context
        return build_model_context(await self._calls.run(self._store.load_events, session_id))

    async def _call_agent(
        self, claim: Claim, running: RunningTurn, progress: TurnProgress, *, resumed: bool
    ) -> _AgentDone | None:
        """The agent's outcome, or None when its task was cancelled (interrupt, stop, drain)."""
        key = claim.turn.session_key
        self._agents.mark_busy(key)
        try:
            async with asyncio.TaskGroup() as group:
                task = group.create_task(self._invoke(claim, progress, resumed=resumed))
                running.attach(task)
        except BaseException:
            # The worker itself is being cancelled (the runner is torn down without a drain):
            # leave the turn to be resumed, then let the cancellation go on.
            with contextlib.suppress(LeaseLostError), self._fence(key):
                self._lane_store.requeue(claim.turn.id, resume_reason=self._drain_reason())
            raise
        finally:
            if self._agents.mark_idle(key):
                self._release_due = True
        return None if task.cancelled() else task.result()

    @traced(
        lambda self, claim, *_, **__: f"invoke_agent {agent_of_key(claim.turn.session_key)}",
        start=lambda self, claim, *_, **__: {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent_of_key(claim.turn.session_key),
            "gen_ai.conversation.id": claim.turn.session_id,
        },
        finish=lambda done, self, claim, progress, **_: {
            "gen_ai.usage.input_tokens": progress.input_tokens,
            "gen_ai.usage.output_tokens": progress.output_tokens,
            "error.type": done.error,
        },
    )
    async def _invoke(self, claim: Claim, progress: TurnProgress, *, resumed: bool) -> _AgentDone:
        extra = {"session_key": claim.turn.session_key, "turn_id": claim.turn.id}
        timeout = asyncio.timeout(self._config.agent.gateway_timeout)
        try:
            self._publish_user(claim, progress)
            try:
                request, entry = await self._request_retried(claim, progress, resumed=resumed)
            except LeaseLostError:
                return _AgentDone(None, left=True)
            conversation = _conversation(claim.turn.session_id, entry)
            agent = self._agent_for(claim.turn.session_key, conversation)
            if request.approvals is not None:
                request.approvals.deadline = timeout  # held while a call waits for a person
            async with timeout:
                end = await self._consume(claim, progress, agent_events(agent, request))
            progress.cost_usd = self._cost(request, progress)
        except TimeoutError:
            if timeout.expired():
                log.warning("agent timed out", extra=extra)
                return _AgentDone(None, "gateway_timeout", timed_out=True)
            log.exception("agent raised TimeoutError", extra=extra)
            return _AgentDone(None, "TimeoutError")
        except AgentTurnError as exc:
            # The agent logged the cause (one warning line, no traceback); the outcome's
            # "turn failed" line carries the code.
            return _AgentDone(None, f"{exc.code}: {exc.message}"[:500], notice=exc.notice)
        except Exception as exc:
            log.exception("agent failed", extra=extra)
            return _AgentDone(None, f"{type(exc).__name__}: {exc}"[:500])
        if end is None:
            log.warning("agent stream ended without a TurnEnd", extra=extra)
            return _AgentDone(None, "agent stream ended without a TurnEnd")
        return _AgentDone(end)

    # ------------------------------------------------------------------ the stream

    async def _consume(
        self, claim: Claim, progress: TurnProgress, events: AsyncIterator[TurnEvent]
    ) -> TurnEnd | None:
        """Follow the agent's events until its `TurnEnd`: deltas go to the turn's watchers
        and the platform's streamed reply, each completed message is stored at once."""
        inbox_id = claim.item.id
        publish = self._waiters.publish
        reply = progress.reply_stream = self._delivery.open_stream(claim.item.source, claim.turn.id)
        try:
            async for event in events:
                if isinstance(event, TextDelta):
                    progress.partial.append(event.text)
                    publish(inbox_id, event)
                    if reply is not None:
                        await reply.update(progress.partial)
                elif isinstance(event, MessageCompleted):
                    await self._complete(claim, progress, event.message)
                elif isinstance(event, ToolResult):
                    await self._complete(claim, progress, tool_message(event))
                elif isinstance(event, TurnEnd):
                    return event
                elif isinstance(event, UsageReport):
                    progress.add_usage(event)
                elif isinstance(event, StreamRetry):
                    # The message being generated starts over: what was shown of it is void,
                    # for the watchers, the platform's streamed message and an interrupt's
                    # stored partial alike.
                    progress.restart()
                    publish(inbox_id, event)
                    self._publish_retry(claim, event)
                    if reply is not None:
                        await reply.restart(event.attempt)
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
        return None

    async def _complete(
        self, claim: Claim, progress: TurnProgress, message: dict[str, Any]
    ) -> None:
        """A message the turn completed: stored now in its own short transaction (decision
        11), then shown to the turn's watchers. When the store refuses it (or one before it),
        it waits for the outcome commit, which stores it in order with the rest. A message
        the transcript refuses as malformed fails the turn (`InvalidEntryError`)."""
        number = progress.add(message)
        entry_id = None
        try:
            if progress.stored == number:
                entry_id = (await self._calls.run(self._append, claim, message, number))[0]
                progress.stored = number + 1
            else:
                validate_message(message)  # it waits for the outcome: checked now all the same
        except InvalidEntryError:
            # Not a chat message the transcript can hold: the agent's bug fails the turn (as a
            # raise would), and the message is kept out of the outcome.
            progress.messages.pop()
            raise
        except (StoreUnavailableError, StoreCorruptError, SessionNotFoundError) as exc:
            log.warning(
                "turn message not stored yet; the outcome stores it",
                extra={
                    "session_key": claim.turn.session_key,
                    "turn_id": claim.turn.id,
                    "error": str(exc),
                },
            )
        if self._waiters.is_watched(claim.item.id):
            self._waiters.publish(claim.item.id, StreamedMessage({**message, "id": entry_id}))

    def _append(self, claim: Claim, message: dict[str, Any], number: int) -> list[int | None]:
        with self._fence(claim.turn.session_key):
            return self._lane_store.append_turn_messages(claim.turn, [message], first_index=number)

    async def _store_user_message(self, claim: Claim, progress: TurnProgress) -> None:
        """Store the user message (number 0) when the claim did not: a resumed turn (a no-op
        when its first attempt stored it), or a claim whose append was refused."""
        try:
            await self._calls.run(
                self._lane_store.append_turn_messages,
                claim.turn,
                [progress.user_message],
                first_index=0,
            )
        except (StoreUnavailableError, StoreCorruptError, InvalidEntryError, SessionNotFoundError):
            progress.stored = 0
        else:
            progress.stored = max(progress.stored, 1)

    def _stored_progress(self, claim: Claim, user_message: dict[str, Any]) -> TurnProgress:
        """The progress of a turn settled without running (recovery's stale and stuck turns):
        what its earlier attempts stored, so the outcome appends after it."""
        progress = TurnProgress(user_message)
        stored = self._lane_store.turn_messages(claim.turn)
        if stored and stored[0][0] == 0:
            progress.resume_from(resume_progress(stored).messages)
        return progress

    def _publish_retry(self, claim: Claim, retry: StreamRetry) -> None:
        """`turn.retry` on the live feed; left out for incognito sessions, like their store
        changes."""
        turn = claim.turn
        if self._feed is None or self._store.is_incognito(turn.session_key):
            return
        self._feed.publish(
            "turn.retry",
            {
                "session_key": turn.session_key,
                "session_id": turn.session_id,
                "turn_id": turn.id,
                "attempt": retry.attempt,
                "reason": retry.reason,
            },
        )

    def _publish_user(self, claim: Claim, progress: TurnProgress) -> None:
        if self._waiters.is_watched(claim.item.id):
            message = {**progress.user_message, "id": claim.user_entry_id}
            self._waiters.publish(claim.item.id, StreamedMessage(message))

    def _cost(self, request: TurnRequest, progress: TurnProgress) -> float | None:
        """Priced here from the usage and the model in use (`core.pricing`), not by agents."""
        return turn_cost(
            self._config,
            request.session_key,
            request.model,
            input_tokens=progress.input_tokens,
            output_tokens=progress.output_tokens,
            cache_read_tokens=progress.cache_read_tokens,
            cache_write_tokens=progress.cache_write_tokens,
            reported=progress.cost_usd,
        )

    @contextlib.asynccontextmanager
    async def borrow_agent(self, key: str) -> AsyncIterator[Agent]:
        """The session's agent, marked busy (no cache rule evicts it) while the caller uses it
        outside a turn (a compaction's summary)."""
        entry = self._store.get_session(key)
        conversation = None if entry is None else _conversation(entry.session_id, entry)
        agent = self._agent_for(key, conversation)
        self._agents.mark_busy(key)
        try:
            yield agent
        finally:
            if self._agents.mark_idle(key):
                self._release_due = True
        if self._release_due:
            self._release_due = False
            await self._agents.drain_released()

    def _agent_for(self, key: str, conversation: str | None = None) -> Agent:
        # An agent that served an earlier conversation of this key (before a `/new`, a
        # `/reset`, a `/resume`, a delete) is torn down, never carried over (spec §11).
        if conversation is not None and self._agents.release_stale(key, conversation=conversation):
            self._release_due = True
        agent = self._agents.get(key)
        if agent is None:
            agent = self._agent_factory(key)
            # The new agent is not busy yet, so mark it before the cap can pick it.
            if self._agents.put(key, agent, conversation=conversation):
                self._release_due = True
            self._agents.mark_busy(key)
        return agent

    # ------------------------------------------------------------------ outcomes

    def _answer(self, claim: Claim, status: ReceiptStatus, reply: str | None) -> None:
        """Tell whoever waits for this message how its turn ended."""
        turn = claim.turn
        self._waiters.resolve(
            claim.item.id, status, reply=reply, turn_id=turn.id, session_id=turn.session_id
        )

    async def _requeue(self, claim: Claim) -> None:
        set_attributes({"sessiongate.turn.outcome": "left_for_resume"})
        await self._calls.run(self._requeue_fenced, claim, self._drain_reason())
        return None

    def _requeue_fenced(self, claim: Claim, reason: str) -> None:
        with self._fence(claim.turn.session_key):
            self._lane_store.requeue(claim.turn.id, resume_reason=reason)

    async def _until_stored(
        self, claim: Claim, commit: Callable[[], Awaitable[bool | None]]
    ) -> bool | None:
        """Commit a turn's outcome, retrying while the disk refuses (full, read-only).

        Each attempt is one transaction, and the transcript rows carry the turn's idempotency
        keys, so a retry never doubles anything. The waiting client is told at once; the lane
        stays on this turn, so no later message overtakes it. If the gateway stops meanwhile,
        the journal still says `running` and recovery resumes the turn.
        """
        delay = _STORE_RETRY_FIRST
        told = False
        while True:
            try:
                return await commit()
            except LeaseLostError:
                # Fenced: nothing of the outcome committed, and the lane's next owner runs or
                # recovers the turn; whoever waits here hears it is still queued.
                self._answer(claim, ReceiptStatus.QUEUED, None)
                raise
            except (StoreUnavailableError, StoreCorruptError) as exc:
                if not told:
                    told = True
                    log.error(
                        "turn outcome not stored; retrying",
                        extra={
                            "session_key": claim.turn.session_key,
                            "turn_id": claim.turn.id,
                            "error": str(exc),
                        },
                    )
                    self._answer(claim, ReceiptStatus.UNAVAILABLE, STORAGE_NOTICE)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _STORE_RETRY_MAX)

    async def _replied(self, claim: Claim, progress: TurnProgress, end: TurnEnd) -> bool:
        """Commit and deliver the reply; whether the lane has a row waiting (`fail`)."""
        set_attributes({"sessiongate.turn.outcome": "replied"})
        turn = claim.turn
        final = progress.final_message(end)
        messages, first = progress.unstored([] if final is None else [final])
        try:
            try:
                # Over the route as the claim wrote it, unread; if it changed meanwhile, the
                # commit is refused whole and made again with the route read.
                stored = await self._calls.run(
                    self._commit_reply, claim, progress, end, messages, first, claim.entry
                )
            except RouteChangedError:
                stored = await self._calls.run(
                    self._commit_reply, claim, progress, end, messages, first, None
                )
        except (InvalidEntryError, SessionNotFoundError) as exc:
            log.warning(
                "reply could not be stored",
                extra={"session_key": turn.session_key, "turn_id": turn.id, "error": str(exc)},
            )
            notice = failure_notice(timed_out=False, timeout=0)
            return await self.fail(claim, progress, error=f"unstorable reply: {exc}", notice=notice)
        if stored.counter_reset():
            self._counts_changed()
        self._counters.completed += 1
        log.info("turn replied", extra={"session_key": turn.session_key, "turn_id": turn.id})
        if final is not None and self._waiters.is_watched(claim.item.id):
            appended = stored.entry_ids()
            final_id = appended[-1] if appended else None
            self._waiters.publish(claim.item.id, StreamedMessage({**final, "id": final_id}))
        if not self._receipt_only(claim) and self._may_act():
            # Past `may_act` the reply stays `replied`: the lane's next owner delivers it.
            await self._delivery.deliver_reply(
                turn.session_key, turn.id, claim.item.source, end.text, stream=progress.reply_stream
            )
        self._answer(claim, ReceiptStatus.REPLIED, end.text)
        return stored.pending()

    def _commit_reply(
        self,
        claim: Claim,
        progress: TurnProgress,
        end: TurnEnd,
        messages: list[dict[str, Any]],
        first: int,
        route_seen: SessionEntry | None,
    ) -> ReplyStored:
        with self._fence(claim.turn.session_key):
            return self._lane_store.commit_reply(
                claim,
                messages,
                reply=end.text,
                input_tokens=progress.input_tokens,
                output_tokens=progress.output_tokens,
                cache_read_tokens=progress.cache_read_tokens,
                cache_write_tokens=progress.cache_write_tokens,
                cost_usd=progress.cost_usd,
                delivered=self._receipt_only(claim),
                first_index=first,
                route_seen=route_seen,
            )

    def _receipt_only(self, claim: Claim) -> bool:
        # No adapter for the platform (the HTTP `api` channel): the receipt is the delivery.
        return self._delivery.adapter_for(claim.item.source.platform) is None

    async def fail(
        self,
        claim: Claim,
        progress: TurnProgress | dict[str, Any],
        *,
        error: str,
        notice: str,
        suspend: bool = False,
    ) -> bool:
        """Commit the failed outcome and tell the user; whether the lane has a row waiting."""
        set_attributes({"sessiongate.turn.outcome": "failed", "error.type": error[:100]})
        pending = await self._calls.run(
            self._store_failure, claim, progress, error=error, notice=notice, suspend=suspend
        )
        self._failed(claim, error)
        if self._may_act():
            await self._delivery.send(claim.item.source, notice, turn_id=claim.turn.id)
        self._answer(claim, ReceiptStatus.FAILED, notice)
        return pending()

    def commit_failure(
        self,
        claim: Claim,
        progress: TurnProgress | dict[str, Any],
        *,
        error: str,
        notice: str,
        suspend: bool = False,
    ) -> None:
        """The failed outcome; `progress` is the turn's, or just its user message for a turn
        that never ran (recovery's stale and stuck turns)."""
        self._store_failure(claim, progress, error=error, notice=notice, suspend=suspend)
        self._failed(claim, error)

    def _store_failure(
        self,
        claim: Claim,
        progress: TurnProgress | dict[str, Any],
        *,
        error: str,
        notice: str,
        suspend: bool,
    ) -> Callable[[], bool]:
        if isinstance(progress, dict):
            progress = self._stored_progress(claim, progress)
        notice_message = {
            "role": "assistant",
            "content": notice,
            "metadata": {"exclude_from_context": True, "gateway_notice": "failed"},
        }
        messages, first = progress.unstored([notice_message])
        with self._fence(claim.turn.session_key):
            return self._lane_store.commit_failure(
                claim,
                error=error,
                notice=notice,
                messages=messages,
                suspend=suspend,
                first_index=first,
            )

    def _failed(self, claim: Claim, error: str) -> None:
        self._counters.failed += 1
        log.warning(
            "turn failed",
            extra={"session_key": claim.turn.session_key, "turn_id": claim.turn.id, "error": error},
        )

    async def interrupt(
        self,
        claim: Claim,
        progress: TurnProgress | dict[str, Any],
        *,
        reason: str,
        notice: str | None = None,
    ) -> bool:
        """Commit the interrupted outcome (and tell the user `notice`); whether the lane has a
        row waiting."""
        set_attributes({"sessiongate.turn.outcome": "interrupted", "sessiongate.reason": reason})
        pending = await self._calls.run(
            self._store_interrupted, claim, progress, reason=reason, notice=notice
        )
        self._interrupted(claim, reason)
        if notice is not None and self._may_act():
            await self._delivery.send(claim.item.source, notice, turn_id=claim.turn.id)
        self._answer(claim, ReceiptStatus.INTERRUPTED, notice)
        return pending()

    def commit_interrupted(
        self,
        claim: Claim,
        progress: TurnProgress | dict[str, Any],
        *,
        reason: str,
        notice: str | None,
    ) -> None:
        """The interrupted outcome: what was stored stays, and the text the user already saw
        of the message being generated is stored as an assistant message marked interrupted
        (`metadata.interrupted`: the reason), so the transcript shows what the user saw."""
        self._store_interrupted(claim, progress, reason=reason, notice=notice)
        self._interrupted(claim, reason)

    def _store_interrupted(
        self,
        claim: Claim,
        progress: TurnProgress | dict[str, Any],
        *,
        reason: str,
        notice: str | None,
    ) -> Callable[[], bool]:
        if isinstance(progress, dict):
            progress = self._stored_progress(claim, progress)
        messages, first = progress.unstored(progress.interrupted_tail(reason))
        with self._fence(claim.turn.session_key):
            return self._lane_store.commit_interrupted(
                claim, reason=reason, messages=messages, notice=notice, first_index=first
            )

    def _interrupted(self, claim: Claim, reason: str) -> None:
        self._counters.interrupted += 1
        log.info(
            "turn interrupted",
            extra={
                "session_key": claim.turn.session_key,
                "turn_id": claim.turn.id,
                "reason": reason,
            },
        )
