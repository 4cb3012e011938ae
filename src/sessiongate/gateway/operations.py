"""What an operator does to a session, written once for the slash commands, the HTTP API and
the CLI: reset, compact with the deterministic summary, fork, branch switch, and the
restart-counter file every reset rewrites.

Each function is the rule itself, not the refusal around it: whether the lane is quiet enough
is the caller's to say (the running gateway knows its lanes; the CLI, with no gateway, reads
the journal), and each caller words its own refusal. What is shared is what happens to the
store, so a reset from `/new`, from `POST /v1/sessions/{key}/reset` and from `sessiongate
sessions reset` is one reset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.core.transcript import deterministic_summary, estimate_tokens
from sessiongate.errors import SessionArchivedError
from sessiongate.gateway.compaction import (
    context_after,
    keep_tokens,
    plan_compaction,
    unchanged,
    write_compaction,
)
from sessiongate.gateway.recovery import RESTART_COUNTS_FILE, write_restart_counts

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.core.entry import SessionEntry
    from sessiongate.store.lanes import LaneStore
    from sessiongate.store.session_store import SessionStore

__all__ = [
    "compact_deterministically",
    "fork",
    "reset",
    "rewrite_restart_counts",
    "switch_branch",
]


def reset(
    store: SessionStore,
    lane_store: LaneStore,
    session_key: str,
    *,
    mode: str | None = None,
    keep_tail: bool = False,
    reason: str = "reset",
) -> tuple[SessionEntry | None, bool]:
    """End the conversation of `session_key` and zero its stuck-loop counter, in one commit
    (the caller's transaction when one is open). Returns the new entry (None: no such
    session, nothing written) and whether a counter was zeroed: then the caller rewrites the
    restart-counts file (`rewrite_restart_counts`) after its commit."""
    with lane_store.atomic():
        entry = store.reset_session(session_key, mode=mode, keep_tail=keep_tail, reason=reason)
        if entry is None:
            return None, False
        return entry, lane_store.reset_restart_count(session_key)


def rewrite_restart_counts(home: Path, lane_store: LaneStore) -> None:
    """Rewrite `<home>/restart_counts.json` from the database, its source of truth: recovery
    merges the file's counters for keys the database lacks, so a stale file would bring a
    zeroed counter back."""
    write_restart_counts(home / RESTART_COUNTS_FILE, lane_store.restart_counts())


def compact_deterministically(store: SessionStore, entry: SessionEntry) -> dict[str, Any]:
    """An explicit compaction with the deterministic summary (no model): what `Compactor.run`
    does with the agent's. Run it inside the caller's write transaction, so nothing moves
    between the plan and the commit. `{compacted, tokens_before, tokens_after, reason}`."""
    if entry.archived:
        raise SessionArchivedError(
            "the session is archived; unarchive it to compact it", session_key=entry.session_key
        )
    events = store.load_events(entry.session_id)
    plan = plan_compaction(
        events, keep=keep_tokens(store.config.context_window_for(entry.session_key)), explicit=True
    )
    if not plan.fresh:
        return unchanged(plan.tokens_before, "nothing_to_compact")
    summary = deterministic_summary(plan.summarize)
    # Asked for, so written even when the summary is no shorter (see gateway.compaction).
    after = estimate_tokens(context_after(events, summary, plan.first_kept_entry_id).messages)
    return write_compaction(store, entry, plan, summary, after)


def fork(
    store: SessionStore,
    session_key: str,
    *,
    entry_id: int | None = None,
    fork_from: str = "active",
    busy: bool = False,
) -> tuple[SessionEntry, str | None]:
    """Copy the conversation into a new session key: up to just before user message
    `entry_id` (the caller has checked that no turn runs), or the `fork_from` part of the
    active path (the store refuses a busy fork unless it is `last-completed`). Returns the
    child's entry and the text to edit, if any."""
    if entry_id is not None:
        return store.fork_session(session_key, entry_id=entry_id)
    return store.fork_session(session_key, fork_from=fork_from, busy=busy)


def switch_branch(store: SessionStore, entry: SessionEntry, leaf_entry_id: int) -> str:
    """Make the branch tip `leaf_entry_id` the active leaf (the caller has checked that no
    turn runs); the outcome: `switched`, `already_active`, `missing`, `not_a_tip`."""
    return str(store.switch_branch(entry.session_id, leaf_entry_id))
