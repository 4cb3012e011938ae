"""Compaction: the older part of a conversation summarised into one `compaction` entry.

What is kept: the newest entries worth about a quarter of `agent.context_window`
(`KEEP_FRACTION`), cut by `choose_compaction_cut`, which never separates a tool call from its
results; everything before the cut (a previous summary included, so its points carry over) goes
to the session's agent to summarise (the echo agent's summary is deterministic). A quarter
leaves three quarters of the window for the summary, the system prompt and the turns to come
before the next compaction is due.

Compaction is a transaction around an await (LESSONS B9.13): a plan from one read of the active
path, the summary outside any lock, then the entry committed only if the session and its leaf
have not moved meanwhile (`StaleWriteError` otherwise), together with the entry's raised
`compaction_count`. The runner runs it on the lane as it runs a turn, so no turn runs alongside
and messages that arrive meanwhile queue behind it.

On a database several instances share, the lane's lease decides as it does for a turn's
outcome: no summary is asked for while this instance does not hold the lane
(`SessionBusyError`), and the entry commits inside the lane's fence, so an instance that paused
past its lease mid-summary writes nothing (`LeaseLostError`, a `StaleWriteError`) even when the
lane's new owner has not touched the transcript yet (the compare-and-set alone would let it
through while that owner, say, runs a turn on the context it read before).

An explicit compaction (`POST .../compact`, `sessions compact`, `/compress`) compacts: it keeps
only the newest turn (less if that alone is over the quarter) and summarises everything before
it, however small the context. The size threshold (nothing while the context fits the kept
quarter, nothing when the summary would not make it smaller) is for automatic compaction only.

Nothing is written when there is nothing to summarise (only the newest turn, or only a previous
summary, lies before the cut), when the agent fails to summarise (logged), or, for automatic
compaction, when the context fits or the summary would not shrink it; the answer then says
`compacted: false` and why (`reason`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.core.transcript import (
    EntryType,
    ModelContext,
    build_model_context,
    choose_compaction_cut,
    estimate_tokens,
    last_turn_start,
)
from sessiongate.errors import (
    AgentTurnError,
    SessionArchivedError,
    SessionBusyError,
    SessionNotFoundError,
    StaleWriteError,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from contextlib import AbstractContextManager

    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.gateway.turns import TurnExecutor
    from sessiongate.store.lanes import LaneStore
    from sessiongate.store.session_store import SessionStore

__all__ = [
    "KEEP_FRACTION",
    "CompactionPlan",
    "Compactor",
    "context_after",
    "keep_tokens",
    "plan_compaction",
    "unchanged",
    "write_compaction",
]

log = logging.getLogger(__name__)

# The kept part of a compacted context: 1/KEEP_FRACTION of the model's window (see above).
KEEP_FRACTION = 4


def keep_tokens(context_window: int) -> int:
    return context_window // KEEP_FRACTION


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    tokens_before: int  # the estimated tokens of the current model context
    first_kept_entry_id: int | None  # None: keep nothing but the summary
    summarize: list[dict[str, Any]]  # the context messages before the cut
    fresh: bool  # something other than a previous summary lies before the cut


def context_after(
    events: Sequence[Mapping[str, Any]], summary: str, first_kept_entry_id: int | None
) -> ModelContext:
    """The model context the next turn would get with this compaction at the leaf."""
    leaf = events[-1].get("id") if events else None
    ids = [e["id"] for e in events if isinstance(e.get("id"), int)]
    probe = {
        "type": str(EntryType.COMPACTION),
        "id": max(ids, default=0) + 1,
        "parent_id": leaf,
        "summary": summary,
        "first_kept_entry_id": first_kept_entry_id,
        "tokens_before": 0,
    }
    return build_model_context([*events, probe])


def plan_compaction(
    events: Sequence[Mapping[str, Any]], *, keep: int, explicit: bool = False
) -> CompactionPlan:
    """Where to cut the active path `events` to keep about `keep` tokens, and what to summarise.

    `explicit` (someone asked for it) also cuts at the newest turn, so whatever lies before that
    turn is summarised even when the whole context would fit in `keep`.

    The messages to summarise are found with the builder itself: the context with the cut
    applied is `[summary, *kept]`, and `kept` is a suffix of today's context (the cut never
    starts inside a tool exchange), so what precedes it is what the summary replaces.
    """
    context = build_model_context(events)
    messages = context.messages
    tokens_before = estimate_tokens(messages)
    cut = choose_compaction_cut(events, keep)
    if explicit:
        cut = _later_cut(events, cut, last_turn_start(events))
    kept = context_after(events, "", cut).messages[1:]
    if len(kept) > len(messages) or (kept and messages[len(messages) - len(kept) :] != kept):
        # Cannot happen with the builder's pairing rules; refuse rather than lose messages.
        log.error("compaction cut does not split the context; nothing compacted")
        return CompactionPlan(tokens_before, cut, [], fresh=False)
    head = messages[: len(messages) - len(kept)]
    boundary = context.boundary_entry_id
    summarised_before = boundary is not None and any(
        e.get("id") == boundary and e.get("type") == EntryType.COMPACTION for e in events
    )
    return CompactionPlan(tokens_before, cut, head, fresh=len(head) > int(summarised_before))


def _later_cut(
    events: Sequence[Mapping[str, Any]], cut: int | None, turn: int | None
) -> int | None:
    """The cut that keeps less: the later of two entry ids on the path (None keeps nothing)."""
    if cut is None or turn is None:
        return cut
    position = {e.get("id"): i for i, e in enumerate(events)}
    return turn if position.get(turn, -1) > position.get(cut, -1) else cut


class Compactor:
    """Runs one compaction for the runner, which holds the lane meanwhile."""

    def __init__(
        self,
        *,
        store: SessionStore,
        lane_store: LaneStore,
        config: GatewayConfig,
        executor: TurnExecutor,
        fence: Callable[[str], AbstractContextManager[None]] | None = None,
        holds: Callable[[str], bool] | None = None,
    ) -> None:
        self._store = store
        self._lane_store = lane_store
        self._config = config
        self._executor = executor
        # The lane's fence around the commit, and whether the lane is held here
        # (`LaneOwnership.fence`, `.holds`): on a database of its own neither does anything.
        self._fence = fence or (lambda _key: contextlib.nullcontext())
        self._holds = holds or (lambda _key: True)

    async def run(
        self,
        session_key: str,
        *,
        record: Callable[[dict[str, Any]], None] | None = None,
        explicit: bool = True,
    ) -> dict[str, Any]:
        """`{compacted, tokens_before, tokens_after, reason}`; `record(result)` runs inside
        the commit (a command remembers its message id with the effect). `explicit=False`
        is automatic compaction: the size threshold applies (see the module docstring)."""
        entry = self._store.get_session(session_key)
        if entry is None:
            raise SessionNotFoundError(
                f"no session with key {session_key!r}", session_key=session_key
            )
        if entry.archived:
            raise SessionArchivedError(
                "the session is archived; unarchive it to compact it", session_key=session_key
            )
        if not self._holds(session_key):
            raise SessionBusyError(
                "another gateway instance runs this session's turns; compact it there",
                session_key=session_key,
            )
        session_id = entry.session_id
        generation = self._store.transcript_generation(session_id)
        events = self._store.load_events(session_id)
        plan = plan_compaction(
            events,
            keep=keep_tokens(self._config.context_window_for(session_key)),
            explicit=explicit,
        )
        before = plan.tokens_before
        if not plan.fresh:
            return unchanged(before, "nothing_to_compact")
        extra = {"session_key": session_key, "session_id": session_id}
        try:
            async with (
                self._executor.borrow_agent(session_key) as agent,
                asyncio.timeout(self._config.agent.gateway_timeout),
            ):
                summary = await agent.summarize(plan.summarize)
        except AgentTurnError as exc:
            # The agent logged the upstream cause in one line; no traceback for it here.
            log.warning(
                "compaction summary failed; nothing compacted",
                extra={**extra, "error": exc.code},
            )
            return unchanged(before, "summary_failed")
        except Exception:
            log.exception("compaction summary failed; nothing compacted", extra=extra)
            return unchanged(before, "summary_failed")
        after = estimate_tokens(context_after(events, summary, plan.first_kept_entry_id).messages)
        if not explicit and after >= before:
            return unchanged(before, "no_gain")
        with self._fence(session_key), self._lane_store.atomic():
            current = self._store.get_session(session_key)
            if (
                current is None
                or current.session_id != session_id
                or self._store.transcript_generation(session_id) != generation
            ):
                raise StaleWriteError(
                    "the conversation changed while it was being summarised; compact again",
                    session_key=session_key,
                )
            result = write_compaction(self._store, current, plan, summary, after)
            if record is not None:
                record(result)
        log.info(
            "session compacted", extra={**extra, "tokens_before": before, "tokens_after": after}
        )
        return result


def write_compaction(
    store: SessionStore,
    entry: SessionEntry,
    plan: CompactionPlan,
    summary: str,
    tokens_after: int,
) -> dict[str, Any]:
    """Append the `compaction` entry of `plan` with `summary` at the leaf of `entry`'s session
    and raise its `compaction_count`, inside the caller's transaction; the answer."""
    store.append_entry(
        entry.session_id,
        {
            "type": "compaction",
            "summary": summary,
            "first_kept_entry_id": plan.first_kept_entry_id,
            "tokens_before": plan.tokens_before,
            "tokens_after": tokens_after,
        },
    )
    store.set_session_fields(entry.session_key, compaction_count=entry.compaction_count + 1)
    return {
        "compacted": True,
        "tokens_before": plan.tokens_before,
        "tokens_after": tokens_after,
        "reason": None,
    }


def unchanged(tokens: int, reason: str) -> dict[str, Any]:
    """The answer of a compaction that wrote nothing, and why."""
    return {"compacted": False, "tokens_before": tokens, "tokens_after": tokens, "reason": reason}
