"""Conversation trees on the store: branches, leaf switching, rewind to an entry, forks and the
model context (detached views included).

`TreeOps` is mixed into `SessionStore`; it only uses the store's database, clock and config.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.core.entry import SessionEntry
from sessiongate.core.fork_policy import may_fork
from sessiongate.core.freshness import next_reset_at as _next_reset_at, resolve_rule
from sessiongate.core.ids import new_session_id
from sessiongate.core.keys import fork_key
from sessiongate.core.transcript import ModelContext, build_model_context, estimate_tokens
from sessiongate.errors import (
    EntryNotFoundError,
    ForkTooLargeError,
    InvalidEntryError,
    SessionBusyError,
    SessionNotFoundError,
)
from sessiongate.store.changes import Change, ChangeKind
from sessiongate.store.kept_contexts import (
    INLINE_CONTEXT_ENTRIES,
    Kept,
    KeptContexts,
    context_copy,
    extended,
)
from sessiongate.store.records import EntryRecord, iso_from_us, to_us

if TYPE_CHECKING:
    from collections.abc import Sequence
    from datetime import datetime
    from pathlib import Path

    from sessiongate.core.clock import Clock
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.keys import KeyParts
    from sessiongate.core.source import SessionSource
    from sessiongate.store.placement import Placement
    from sessiongate.store.protocol import Backend, Tx
    from sessiongate.store.records import EntryRow, SessionRow

__all__ = ["INLINE_CONTEXT_ENTRIES", "ContextView", "TreeOps"]

# Headlines look this far up a tip's path for the user message that names the branch.
_HEADLINE_LOOKUP = 32
_MAX_LABEL = 512


@dataclass(frozen=True, slots=True)
class ContextView:
    """A model context read at one moment, with what is needed to tell if it still holds."""

    session_id: str
    context: ModelContext
    generation: int
    leaf_id: int | None
    admission_entry_id: int | None


class TreeOps:
    _db: Backend
    _placement: Placement
    _contexts: KeptContexts
    clock: Clock
    config: GatewayConfig
    sessions_dir: Path

    if TYPE_CHECKING:  # provided by SessionStore

        def _mirror_dirty(self) -> None: ...
        def _route_for(
            self, conn: Tx, source: SessionSource
        ) -> tuple[KeyParts, str, SessionEntry | None]: ...
        def _append_records(
            self, conn: Tx, row: SessionRow, records: Sequence[EntryRecord]
        ) -> list[int | None]: ...

    # ------------------------------------------------------------------ branches

    def list_branches(self, session_id: str) -> list[dict[str, Any]]:
        """Every tip (and the active leaf) with headline, message count, time, active flag;
        exactly one is active: with nothing on the active path, the empty start (its
        `leaf_entry_id` None).

        Counts come from each entry's stored `mdepth`, so no tip's path is walked; headlines
        come from one recursive query that looks at most `_HEADLINE_LOOKUP` entries up a tip.
        """
        with self._placement.for_session(session_id).read() as conn:
            row = conn.get_session_row(session_id)
            if row is None:
                return []
            tip_ids = conn.list_tips(row.sid)
            if row.leaf_id is not None and row.leaf_id not in tip_ids:
                tip_ids.append(row.leaf_id)
            found = conn.tips_with_headlines(tip_ids, _HEADLINE_LOOKUP)
        branches = [
            {
                "leaf_entry_id": tip_id,
                "headline": _entry_text(source)[:120],
                "message_count": entry.mdepth,
                "updated_at": iso_from_us(entry.ts),
                "active": tip_id == row.leaf_id,
            }
            for tip_id, (entry, source) in found.items()
        ]
        if row.leaf_id is None:
            # Nothing on the active path (everything rewound, or no message yet): the active
            # position is the empty start, where the next message goes. It is listed, so one
            # position is always the active one.
            branches.append(
                {
                    "leaf_entry_id": None,
                    "headline": "",
                    "message_count": 0,
                    "updated_at": None,
                    "active": True,
                }
            )
        branches.sort(key=lambda b: (not b["active"], b["updated_at"] or ""))
        return branches

    def switch_branch(self, session_id: str, leaf_entry_id: int) -> str:
        """Make a tip the active leaf: `switched`, `missing`, `not_a_tip` or `already_active`."""
        with self._placement.for_session(session_id).transaction() as conn:
            row = conn.get_session_row(session_id)
            entry = conn.entry_row(leaf_entry_id) if row is not None else None
            if row is None or entry is None or entry.sid != row.sid:
                return "missing"
            if leaf_entry_id == row.leaf_id:
                return "already_active"
            if leaf_entry_id not in conn.list_tips(row.sid):
                return "not_a_tip"
            conn.move_leaf(row, leaf_entry_id)
            _leaf_moved(conn, row)
            return "switched"

    def rewind_to(self, session_id: str, entry_id: int) -> dict[str, Any]:
        """Move the leaf to the parent of a user message on the active path.

        Statuses: `rewound`, `missing`, `not_user_message`, `off_active_path`. The message text
        comes back for editing; the old branch stays as a tip and gives up its idempotency keys.
        A message before the latest `reset` on the path is refused (`InvalidEntryError`):
        rewinding there would bring back the context the reset closed.
        """
        with self._placement.for_session(session_id).transaction() as conn:
            row = conn.get_session_row(session_id)
            entry = conn.entry_row(entry_id) if row is not None else None
            if row is None or entry is None or entry.sid != row.sid:
                return {"status": "missing", "editor_text": "", "rewound_count": 0}
            # Checked in the order a fork checks its entry, so both refuse one mistake alike.
            if not entry.on_path:
                return {"status": "off_active_path", "editor_text": "", "rewound_count": 0}
            if entry.type != "message" or entry.role != "user":
                return {"status": "not_user_message", "editor_text": "", "rewound_count": 0}
            if entry.depth < conn.latest_reset_depth(row.sid):
                raise InvalidEntryError(
                    f"entry {entry_id} is before the latest reset; a rewind cannot cross a reset"
                )
            rewound = row.leaf_mdepth - entry.mdepth + 1
            conn.move_leaf(row, entry.parent_id, release_keys=True)
            _leaf_moved(conn, row)
        return {"status": "rewound", "editor_text": _entry_text(entry), "rewound_count": rewound}

    # ------------------------------------------------------------------ forks

    def fork_session(
        self,
        session_key: str,
        *,
        entry_id: int | None = None,
        fork_from: str | None = None,
        busy: bool = False,
        automatic: bool = False,
        max_tokens: int | None = None,
        into: SessionSource | None = None,
    ) -> tuple[SessionEntry, str]:
        """Fork a lane into a new key; the source is untouched.

        - `entry_id`: a message fork, holding the active-path prefix strictly before that user
          message (whose text comes back for editing).
        - `fork_from="active"` (default) copies the whole active branch; `"last-completed"`
          cuts before the first message after the last completed assistant message (one that
          asks for no tool; entries between, such as a compaction, are kept), and is the only
          fork allowed while `busy`.
        - The prefix is admitted against `max_tokens` (default: the configured context window):
          an operator fork over it is refused; an `automatic` (thread) fork starts isolated
          but is still marked `forked_from_parent`, so it is not retried.
        - `into`: the child is the lane of that source (a new thread under the parent chat)
          instead of a fresh fork key; if that lane exists by the time the fork commits, it is
          returned untouched (two first messages of one thread fork once). When the child's
          readers could not all read the parent (`core.fork_policy.may_fork`: a shared thread
          under one person's lane), nothing is copied: the child starts isolated, holding
          only the thread's parent message (the parent's user message whose platform id is the
          thread's id, which the platform shows everyone), and is marked `fork_refused`.
          A fork into a fresh fork key keeps the parent's readers, so it is always allowed.
        """
        mode = fork_from or "active"
        if mode not in ("active", "last-completed"):
            raise InvalidEntryError(f"fork_from must be 'active' or 'last-completed', not {mode!r}")
        if busy and entry_id is None and mode != "last-completed":
            raise SessionBusyError(
                "the session is running a turn; fork with fork_from='last-completed'",
                session_key=session_key,
            )
        limit = (
            max_tokens if max_tokens is not None else self.config.context_window_for(session_key)
        )
        db = self._placement.for_key(session_key)
        with db.transaction() as conn:
            parent = conn.get_route(session_key)
            if parent is None:
                raise SessionNotFoundError(
                    f"no session with key {session_key!r}", session_key=session_key
                )
            child_parts: KeyParts | None = None
            refused = False
            if into is not None:
                child_parts, child_key, existing = self._route_for(conn, into)
                if existing is not None:
                    return existing, ""
                refused = not may_fork(conn.get_route_parts(session_key), child_parts)
            src = conn.get_session_row(parent.session_id)
            if src is None:
                raise SessionNotFoundError(f"no transcript for {session_key!r}")
            editor_text = ""
            if entry_id is not None:
                entry = conn.entry_row(entry_id)
                if entry is None or entry.sid != src.sid or not entry.on_path:
                    raise EntryNotFoundError(
                        f"entry {entry_id} is not on the active path", entry_id=entry_id
                    )
                if entry.type != "message" or entry.role != "user":
                    raise InvalidEntryError(f"entry {entry_id} is not a user message")
                upto = entry.depth - 1
                editor_text = _entry_text(entry)
            elif mode == "last-completed":
                upto = conn.last_completed_depth(src.sid, src.leaf_depth)
            else:
                upto = src.leaf_depth
            # Admit what the child's model would see, not the raw path: after a compaction the
            # path is far larger than its context. The path holds one entry per depth from 1,
            # so its first `upto` entries are the prefix the child gets.
            prefix = conn.load_context_events(src.sid)[:upto]
            tokens = estimate_tokens(build_model_context(prefix).messages)
            isolated = refused
            if tokens > limit and not refused:
                if not automatic:
                    raise ForkTooLargeError(
                        f"the fork holds about {tokens} tokens, over the limit of {limit}",
                        tokens=tokens,
                        limit=limit,
                    )
                isolated = True
            now = self.clock.now()
            if into is None:
                child_key = fork_key(session_key, secrets.token_hex(4))
            child_id = conn.unused_session_id(lambda: new_session_id(self.clock))
            child_row = conn.create_session_row(
                session_id=child_id,
                session_key=child_key,
                parent_session_id=parent.session_id,
                started_at=to_us(now),
                header={
                    "type": "session",
                    "version": 1,
                    "id": child_id,
                    "timestamp": now.isoformat(),
                    "parent_session": parent.session_id,
                },
            )
            if not isolated:
                conn.copy_path(src, child_row, upto)
            elif refused and into is not None and into.thread_id:
                seed = _thread_parent_message(prefix, into.thread_id, to_us(now))
                if seed is not None:
                    self._append_records(conn, child_row, [seed])
            child = SessionEntry(
                session_key=child_key,
                session_id=child_id,
                created_at=now,
                updated_at=now,
                origin=parent.origin,
                display_name=parent.display_name,
                platform=parent.platform,
                chat_type=parent.chat_type,
                session_started_at=now,
                last_interaction_at=now,
                thinking_level=parent.thinking_level,
                verbose_level=parent.verbose_level,
                reasoning_level=parent.reasoning_level,
                elevated_level=parent.elevated_level,
                send_policy=parent.send_policy,
                provider_override=parent.provider_override,
                model_override=parent.model_override,
                auth_profile_override=parent.auth_profile_override,
                incognito=parent.incognito,
                forked_from_parent=True,
                parent_session_key=session_key,
                extra=(
                    {"fork_isolated": True, **({"fork_refused": True} if refused else {})}
                    if isolated
                    else {}
                ),
            )
            if into is not None:
                child = child.evolve(
                    origin=into,
                    chat_type=into.chat_type,
                    display_name=into.chat_name or parent.display_name,
                )
            conn.upsert_route(
                child,
                child_parts if child_parts is not None else conn.get_route_parts(session_key),
            )
            conn.note(Change(ChangeKind.SESSION_CREATED, child_key, child_id))
        # An incognito parent keeps its storage class: the child lives in memory too.
        self._placement.placed(db, child_key, child_id)
        self._mirror_dirty()
        return child, editor_text

    # ------------------------------------------------------------------ model context

    def model_context(self, session_id: str) -> ModelContext:
        """The context the next turn would get, from one consistent read of the active path."""
        with self._placement.for_session(session_id).read() as conn:
            found = conn.session_context_events(session_id)
        return ModelContext() if found is None else build_model_context(found[1], owned=True)

    def short_model_context(self, session_id: str, max_entries: int) -> ModelContext | None:
        """`model_context` when the active path holds at most `max_entries` entries, else None
        (read it off the loop with `read_model_context`); one read either way (none of its own
        on PostgreSQL right after a claim, which sends it with its commit).

        The context is kept between calls (`kept_contexts.py`): the next read asks only for
        the entries below the kept one, as long as that entry is still on the active path."""
        kept = self._contexts.get(session_id)
        with self._placement.for_session(session_id).read() as conn:
            if kept is None:
                found = conn.session_context_events(session_id, max_entries)
                tail = None if found is None else (found[0], found[1], False)
            else:
                tail = conn.session_context_tail(session_id, max_entries, kept.leaf_id, kept.depth)
        if tail is None:
            self._contexts.drop(session_id)
            return ModelContext()
        depth, events, continued = tail
        if depth > max_entries or not (continued or events):
            self._contexts.drop(session_id)
            return None if depth > max_entries else ModelContext()
        if continued:
            assert kept is not None
            context = extended(kept, events)
            events = [*kept.events, *events] if events else kept.events
        else:
            context = build_model_context(events, owned=True)
        self._contexts.put(session_id, Kept(events[-1]["id"], depth, events, context))
        return context_copy(context)

    def kept_context_at(self, session_id: str) -> tuple[int, int] | None:
        """(entry id, depth) of the session's kept context: where a read of its context can
        start (`Tx.prefetch_context`)."""
        kept = self._contexts.get(session_id)
        return None if kept is None else (kept.leaf_id, kept.depth)

    def read_model_context(
        self, session_id: str, *, admission_entry_id: int | None = None
    ) -> ContextView:
        """A detached, non-persisting view of the model context, from one snapshot.

        Safe to call from a worker thread (its own read connection, so the event loop's store
        calls are not held up). With `admission_entry_id` (the turn's admitted user message) the
        view stops before that entry; `is_view_current` tells whether it still holds.
        """
        with self._placement.for_session(session_id).snapshot() as conn:
            row = conn.get_session_row(session_id)
            if row is None:
                raise SessionNotFoundError(f"no session with id {session_id!r}")
            events = conn.load_context_events(row.sid)
        if admission_entry_id is not None:
            cut = next((i for i, e in enumerate(events) if e["id"] == admission_entry_id), None)
            if cut is None:
                raise EntryNotFoundError(
                    f"entry {admission_entry_id} is not on the active path",
                    entry_id=admission_entry_id,
                )
            events = events[:cut]
        return ContextView(
            session_id=session_id,
            context=build_model_context(events, owned=True),
            generation=row.generation,
            leaf_id=row.leaf_id,
            admission_entry_id=admission_entry_id,
        )

    def is_view_current(self, view: ContextView) -> bool:
        """False once the transcript was rewritten (rewind, switch, rewrite) or, for a view
        without admission, appended to; admitted views survive later appends."""
        with self._placement.for_session(view.session_id).read() as conn:
            row = conn.get_session_row(view.session_id)
            if row is None or row.generation != view.generation:
                return False
            if view.admission_entry_id is None:
                return row.leaf_id == view.leaf_id
            entry = conn.entry_row(view.admission_entry_id)
            return entry is not None and bool(entry.on_path)

    def transcript_generation(self, session_id: str) -> tuple[int, int | None]:
        """(generation, leaf id): a detached view taken at these values is stale when the
        generation moved (rewrite, rewind, switch) or the leaf moved past its admission."""
        with self._placement.for_session(session_id).read() as conn:
            row = conn.get_session_row(session_id)
        if row is None:
            raise SessionNotFoundError(f"no session with id {session_id!r}")
        return row.generation, row.leaf_id

    def next_reset_at(self, entry: SessionEntry) -> datetime | None:
        policy = self.config.reset_policy
        if entry.origin is None:
            return None
        rule = resolve_rule(
            policy,
            platform=str(entry.origin.platform),
            chat_type=entry.origin.chat_type,
            is_thread=bool(entry.origin.thread_id),
        )
        return _next_reset_at(
            rule,
            timezone=policy.timezone,
            session_started_at=entry.session_started_at or entry.created_at,
            last_interaction_at=entry.last_interaction_at or entry.session_started_at,
        )


def _leaf_moved(conn: Tx, row: SessionRow) -> None:
    # The active path changed other than by an append: followers reload the transcript.
    conn.note(Change(ChangeKind.SESSION_UPDATED, row.session_key, row.session_id))


def _entry_text(entry: EntryRow) -> str:
    if isinstance(entry.content, str):
        return entry.content
    if entry.payload:
        content = json.loads(entry.payload).get("content")
        if isinstance(content, list):
            return "\n".join(
                p.get("text", "")
                for p in content
                if isinstance(p, dict) and p.get("type") == "text"
            )
    return ""


def _thread_parent_message(
    path: list[dict[str, Any]], thread_id: str, now_us: int
) -> EntryRecord | None:
    """The thread's parent message on a parent lane's path, as the record that seeds an
    isolated thread: the user message that is exactly the platform message `thread_id` (never
    one merged with others, which would carry more than everyone saw)."""
    for event in reversed(path):
        if event.get("type") != "message" or event.get("role") != "user":
            continue
        metadata = event.get("metadata")
        if not isinstance(metadata, dict) or metadata.get("message_ids") != [thread_id]:
            continue
        content = event.get("content")
        if not isinstance(content, str):
            return None
        return EntryRecord(
            "message", "user", content, {"metadata": {"thread_parent": True}}, now_us
        )
    return None
