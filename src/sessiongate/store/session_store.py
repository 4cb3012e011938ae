"""`SessionStore`: the public lifecycle API over one transactional truth (`state.db`).

Every public method is one transaction, so each state transition commits whole or not at all,
and the database lock makes the store thread-safe. Reads never create sessions.

This module holds the lane lifecycle: routing a source to its key, creating and rotating
incarnations by the reset policy, explicit reset and `/resume`, suspend and resume markers,
pruning, listings, and opening and closing the store. The rest is mixed in: transcripts
(`transcript_ops.py`), trees and forks (`tree.py`), row operations (`rows.py`), imports of
entries and `sessions.json` (`_imports.py`), identity aliases (`_identities.py`) and incognito
lanes (`_incognito.py`).

It is over the 400-line budget because the lifecycle is one state machine: every transition
goes through `_next_entry`, `_rotate` and `_put` under the precedence of spec §2, and splitting
it would put that precedence in two places. The SQL lives in the backends behind `protocol/`,
the rules in `core/`.
"""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiongate.core.bindings import agent_for, key_prefix_of
from sessiongate.core.clock import Clock, SystemClock
from sessiongate.core.entry import (
    INCARNATION_COUNTERS,
    EntryAction,
    SessionEntry,
    counters_of,
    next_action,
)
from sessiongate.core.freshness import evaluate_freshness, is_system_event, resolve_rule
from sessiongate.core.ids import is_safe_id, new_session_id
from sessiongate.core.keys import (
    KeyParts,
    build_key_parts,
    disambiguate,
    format_session_key,
)
from sessiongate.core.transcript import select_reset_tail
from sessiongate.errors import SessionNotFoundError
from sessiongate.store._identities import IdentityOps, alias_of
from sessiongate.store._imports import ImportOps
from sessiongate.store._incognito import IncognitoOps
from sessiongate.store.backends import open_backend, open_ownership
from sessiongate.store.changes import Change, ChangeKind
from sessiongate.store.erasure import ErasureOps
from sessiongate.store.kept_contexts import KeptContexts
from sessiongate.store.mirror import SessionsMirror
from sessiongate.store.placement import Placement
from sessiongate.store.records import EntryRecord, SessionRow, loads, row_to_event, to_us
from sessiongate.store.retention import RetentionOps
from sessiongate.store.rows import RowOps
from sessiongate.store.transcript_ops import TranscriptOps
from sessiongate.store.tree import TreeOps

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.source import SessionSource
    from sessiongate.store.ownership import Ownership
    from sessiongate.store.protocol import Backend, EphemeralBackend, Tx

__all__ = ["SessionStore"]

log = logging.getLogger(__name__)

# `extra` key naming the session a reconnect claim has kept once (the claim is one-shot).
_KEPT = "reconnect_kept"

# Counters and state that a new incarnation starts afresh (toggles and model choice carry over).
_FRESH_INCARNATION: dict[str, Any] = {
    **INCARNATION_COUNTERS,
    "was_auto_reset": False,
    "auto_reset_reason": None,
    "reset_had_activity": False,
    "is_fresh_reset": False,
    "suspended": False,
    "resume_pending": False,
    "resume_reason": None,
    "last_resume_marked_at": None,
    "memory_flush_at": None,
    "memory_flush_compaction_count": None,
}


class SessionStore(
    TranscriptOps, TreeOps, RowOps, ImportOps, IdentityOps, IncognitoOps, ErasureOps, RetentionOps
):
    """Routing entries, session incarnations and transcripts in `sessions_dir/state.db`."""

    def __init__(
        self,
        sessions_dir: Path,
        config: GatewayConfig,
        has_active_processes_fn: Callable[[str], bool] | None = None,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.sessions_dir = Path(sessions_dir)
        self.sessions_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self._has_active_processes = has_active_processes_fn
        self.db_path = self.sessions_dir / "state.db"
        self.json_path = self.sessions_dir / "sessions.json"
        self._db: Backend = open_backend(config, self.db_path)
        # Incognito lanes live in a second, in-memory database: no durable code path can write
        # them, and a restart removes them. Which database holds what is the placement's.
        self._placement = Placement(self._db)
        self.problems: list[str] = []
        self._closed = False
        self._listeners: list[Callable[[list[Change]], None]] = []
        self._contexts = KeptContexts()
        self._mirror: SessionsMirror | None = None
        # Whether `sessions.json` is kept. On a database instances share, every instance would
        # rewrite the whole routing table into a file of its own once a second: off there
        # unless asked for.
        wanted = config.mirror_sessions_json
        self.keeps_mirror: bool = not self._db.shared if wanted is None else wanted
        try:
            self._import_mirror_file()
            if self.keeps_mirror:
                self._mirror = SessionsMirror(
                    self._db.stream_routes, self.json_path, on_written=self._remember_mirror_write
                )
                self._mirror.mark_dirty()
        except BaseException:
            # Nobody gets a half-open store to close: release the connection (and the
            # checkpointer thread) before the error reaches the caller.
            self._db.close()
            raise

    # ------------------------------------------------------------------ routing entries

    def get_or_create_session(
        self,
        source: SessionSource,
        force_new: bool = False,
        *,
        event_kind: str | None = None,
        visible_session_id: str | None = None,
    ) -> SessionEntry:
        """The lane's current entry, created or rotated per the precedence of spec §2.

        `event_kind` marks system events (heartbeat, cron, exec): they may create a lane but
        never extend freshness, never change the remembered route and never trigger a reset.
        `visible_session_id` is a reconnecting client's one-shot claim: when it names the
        current session, a due policy reset waits for this one send.
        """
        system = event_kind is not None and is_system_event(event_kind)
        with self._db.transaction() as conn:
            now = self.clock.now()
            parts, key, existing = self._route_for(conn, source, creating_at=now)
            if existing is None:
                entry = self._create_lane(conn, key, source, now)
            elif force_new:
                entry = self._rotate(conn, existing, now, end_reason="force_new")
            else:
                entry = self._next_entry(
                    conn,
                    existing,
                    source,
                    now,
                    system=system,
                    keep=visible_session_id == existing.session_id,
                )
            # A lane created just now already carries this source, instant and chat name.
            if (
                existing is not None
                and not system
                and (
                    entry.origin != source
                    or entry.last_interaction_at != now
                    or (source.chat_name and source.chat_name != entry.display_name)
                )
            ):
                entry = entry.evolve(
                    origin=source,
                    display_name=source.chat_name or entry.display_name,
                    last_interaction_at=now,
                )
            if existing is None:
                conn.upsert_route(entry, parts)
            else:
                conn.put_route(entry, parts)
            kind = ChangeKind.SESSION_UPDATED if existing else ChangeKind.SESSION_CREATED
            conn.note(Change(kind, key, entry.session_id))
        self._mirror_dirty()
        return entry

    def _next_entry(
        self,
        conn: Tx,
        existing: SessionEntry,
        source: SessionSource,
        now: datetime,
        *,
        system: bool,
        keep: bool = False,
    ) -> SessionEntry:
        action = next_action(existing)
        if action is EntryAction.NEW_SUSPENDED:
            return self._rotate(
                conn,
                existing,
                now,
                end_reason="suspended",
                was_auto_reset=True,
                auto_reset_reason="suspended",
            )
        if action is EntryAction.REUSE and not system:
            reason = self._policy_reset_reason(existing, source, now)
            if reason is not None and keep and existing.extra.get(_KEPT) != existing.session_id:
                # A reconnecting client's one-shot claim: this send keeps the session it shows;
                # a second claim on the same session is an ordinary stale send.
                extra = {**existing.extra, _KEPT: existing.session_id}
                return existing.evolve(
                    updated_at=now, last_interaction_at=now, origin=source, extra=extra
                )
            if reason is not None:
                return self._rotate(
                    conn,
                    existing,
                    now,
                    end_reason=reason,
                    was_auto_reset=True,
                    auto_reset_reason=reason,
                )
        if system:
            return existing.evolve(updated_at=now)
        return existing.evolve(updated_at=now, last_interaction_at=now, origin=source)

    def _policy_reset_reason(
        self, entry: SessionEntry, source: SessionSource, now: datetime
    ) -> str | None:
        policy = self.config.reset_policy
        rule = resolve_rule(
            policy,
            platform=str(source.platform),
            chat_type=source.chat_type,
            is_thread=bool(source.thread_id),
        )
        if rule.mode == "none":
            return None
        return evaluate_freshness(
            rule,
            timezone=policy.timezone,
            session_started_at=entry.session_started_at or entry.created_at,
            last_interaction_at=entry.last_interaction_at or entry.session_started_at,
            now=now,
        )

    def refresh_lane(
        self,
        session_key: str,
        *,
        event_kind: str | None = None,
        visible_session_id: str | None = None,
    ) -> SessionEntry:
        """A message addressed to a lane by key (a fork, an incognito lane): its entry,
        rotated by the reset policy and touched exactly as `get_or_create_session` does for a
        source, with the lane's own origin as the source (so its origin never changes).
        `SessionNotFoundError` when the key names no lane."""
        system = event_kind is not None and is_system_event(event_kind)
        db = self._placement.for_key(session_key)
        with db.transaction() as conn:
            existing = conn.get_route(session_key)
            if existing is None:
                raise SessionNotFoundError(
                    self.missing_message(session_key), session_key=session_key
                )
            if existing.origin is None:
                return existing  # a legacy row with no origin to evaluate a policy for
            now = self.clock.now()
            entry = self._next_entry(
                conn,
                existing,
                existing.origin,
                now,
                system=system,
                keep=visible_session_id == existing.session_id,
            )
            conn.put_route(entry)
            conn.note(Change(ChangeKind.SESSION_UPDATED, session_key, entry.session_id))
        self._placement.placed(db, session_key, entry.session_id)
        self._mirror_dirty()
        return entry

    def resolve_route(self, source: SessionSource) -> tuple[str, SessionEntry | None]:
        """The key `source` routes to and its entry, read only: nothing is created, rotated or
        touched (identity aliases and collision tags applied exactly as on the write path)."""
        with self._db.read() as conn:
            _, key, entry = self._route_for(conn, source)
        return key, entry

    def get_session(self, session_key: str) -> SessionEntry | None:
        """The entry for a key, or None; never creates."""
        with self._placement.for_key(session_key).read() as conn:
            return conn.get_route(session_key)

    def update_session(self, session_key: str, last_prompt_tokens: int | None = None) -> None:
        with self._placement.for_key(session_key).transaction() as conn:
            entry = conn.get_route(session_key)
            if entry is None:
                return
            changes: dict[str, Any] = {"updated_at": self.clock.now()}
            if last_prompt_tokens is not None:
                changes["last_prompt_tokens"] = int(last_prompt_tokens)
            self._put(conn, entry.evolve(**changes))

    def record_turn(
        self,
        session_key: str,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        cost_usd: float | None = None,
        last_prompt_tokens: int | None = None,
        activity: bool = True,
    ) -> SessionEntry | None:
        """Add a finished turn's usage to the counters; `activity` stamps `last_activity_at`."""
        with self._placement.for_key(session_key).transaction() as conn:
            entry = conn.get_route(session_key)
            if entry is None:
                return None
            now = self.clock.now()
            changes: dict[str, Any] = {
                "updated_at": now,
                "input_tokens": entry.input_tokens + input_tokens,
                "output_tokens": entry.output_tokens + output_tokens,
                "cache_read_tokens": entry.cache_read_tokens + cache_read_tokens,
                "cache_write_tokens": entry.cache_write_tokens + cache_write_tokens,
                "total_tokens": entry.total_tokens + input_tokens + output_tokens,
                "is_fresh_reset": False,
            }
            changes["cost_status"] = _cost_status(entry, cost_usd)
            if cost_usd is not None:
                changes["estimated_cost_usd"] = entry.estimated_cost_usd + cost_usd
            if last_prompt_tokens is not None:
                changes["last_prompt_tokens"] = last_prompt_tokens
                changes["context_tokens"] = last_prompt_tokens
            if activity:
                changes["last_activity_at"] = now
            entry = entry.evolve(**changes)
            self._put(conn, entry)
            return entry

    def set_session_fields(self, session_key: str, **changes: Any) -> SessionEntry:
        """Set entry fields (toggles, model overrides, label, ...); raises if the key is unknown."""
        with self._placement.for_key(session_key).transaction() as conn:
            entry = self._require(conn, session_key)
            entry = entry.evolve(**changes)
            self._put(conn, entry)
            return entry

    def reset_session(
        self,
        session_key: str,
        display_name: str | None = None,
        *,
        reason: str = "reset",
        mode: str | None = None,
        keep_tail: bool = False,
    ) -> SessionEntry | None:
        """Explicit `/new` or `/reset`: a `reset` entry ends the old window.

        `new_session` (the default `reset_mode`) starts a new session id whose parent is the old
        one; `boundary` keeps the id and the next model context starts after the entry.
        `keep_tail` keeps at most the last 6 user/assistant messages, starting at a user
        message: the boundary's `first_kept_entry_id`, or copied into the new session.
        """
        mode = mode or self.config.reset_mode
        with self._placement.for_key(session_key).transaction() as conn:
            entry = conn.get_route(session_key)
            if entry is None:
                return None
            now = self.clock.now()
            row = conn.get_session_row(entry.session_id)
            if mode == "boundary" and row is not None:
                payload: dict[str, Any] = {"reason": reason}
                if keep_tail:
                    path = [row_to_event(r) for r in conn.load_path(row.sid, messages_only=False)]
                    first = select_reset_tail(path)
                    if first is not None:
                        payload["first_kept_entry_id"] = first
                self._append_records(
                    conn, row, [EntryRecord("reset", None, None, payload, to_us(now))]
                )
                entry = entry.evolve(
                    **{
                        **_FRESH_INCARNATION,
                        "is_fresh_reset": True,
                        "reset_had_activity": row.leaf_mdepth > 0,
                    },
                    updated_at=now,
                    session_started_at=now,
                )
            else:
                tail = self._reset_tail(conn, row) if keep_tail and row is not None else []
                entry = self._rotate(conn, entry, now, end_reason=reason, is_fresh_reset=True)
                if tail:
                    # The new session opens with the old one's last exchange (a savepoint of
                    # this transaction).
                    self.append_messages(entry.session_id, tail)
            if display_name is not None:
                entry = entry.evolve(display_name=display_name)
            self._put(conn, entry)
        return entry

    def _reset_tail(self, conn: Tx, row: SessionRow) -> list[dict[str, Any]]:
        """The user/assistant text messages a new session keeps from `row`'s context."""
        path = [row_to_event(r) for r in conn.load_path(row.sid, messages_only=False)]
        first = select_reset_tail(path)
        if first is None:
            return []
        start = next(i for i, event in enumerate(path) if event["id"] == first)
        return [
            {"role": event["role"], "content": event["content"]}
            for event in path[start:]
            if event.get("type") == "message"
            and event.get("role") in ("user", "assistant")
            and event.get("content") is not None
        ][-6:]

    def switch_session(
        self, session_key: str, target_session_id: str, *, owner_checked: bool = False
    ) -> SessionEntry | None:
        """Point the key at another session id (from `/resume`); None if the key or the
        session is unknown, or the session is another key's.

        A key resumes its own incarnations. `owner_checked` lets it take an ended session of
        another key whose owner the caller has verified (the gateway's same-person rule); a
        session that is another key's current one is always refused: two lanes would append
        to one transcript at once.
        """
        if not is_safe_id(target_session_id):
            return None
        with self._placement.for_key(session_key).transaction() as conn:
            entry = conn.get_route(session_key)
            target = conn.get_session_row(target_session_id)
            if entry is None or target is None:
                return None
            if target.session_key != session_key:
                holder = conn.route_by_session_id(target_session_id)
                if not owner_checked or (holder is not None and holder.session_key != session_key):
                    return None
            now = self.clock.now()
            counters = counters_of(entry)
            if target_session_id != entry.session_id:
                current = conn.get_session_row(entry.session_id)
                if current is not None:
                    # The counters stay with the incarnation being left, and the target's own
                    # come back (fresh ones if it never had any saved).
                    conn.save_counters(current.sid, counters)
                    if current.ended_at is None:
                        conn.end_session_row(current.sid, at=to_us(now), reason="switched")
                counters = {**INCARNATION_COUNTERS, **(conn.load_counters(target.sid) or {})}
                conn.end_session_row(target.sid, at=None, reason=None)
                leaf = conn.entry_row(target.leaf_id) if target.leaf_id is not None else None
                if leaf is not None and leaf.type == "reset":
                    # Resuming reopens the window the rotation closed: the boundary it wrote
                    # moves off the active path (it stays in the tree as the record).
                    conn.move_leaf(target, leaf.parent_id)
            entry = entry.evolve(
                session_id=target_session_id,
                updated_at=now,
                resume_pending=False,
                resume_reason=None,
                last_resume_marked_at=None,
                suspended=False,
                is_fresh_reset=False,
                **counters,
            )
            self._put(conn, entry)
            return entry

    def suspend_session(self, session_key: str) -> bool:
        with self._placement.for_key(session_key).transaction() as conn:
            entry = conn.get_route(session_key)
            if entry is None:
                return False
            self._put(conn, entry.evolve(suspended=True, updated_at=self.clock.now()))
            return True

    def mark_resume_pending(self, session_key: str, reason: str = "restart_timeout") -> bool:
        """Soft recovery marker; never overrides `suspended`."""
        with self._placement.for_key(session_key).transaction() as conn:
            entry = conn.get_route(session_key)
            if entry is None or entry.suspended:
                return False
            now = self.clock.now()
            self._put(
                conn,
                entry.evolve(resume_pending=True, resume_reason=reason, last_resume_marked_at=now),
            )
            return True

    def clear_resume_pending(self, session_key: str) -> bool:
        with self._placement.for_key(session_key).transaction() as conn:
            entry = conn.get_route(session_key)
            if entry is None or not entry.resume_pending:
                return False
            # All three fields, as the reference clears them: a stale mark time would make a
            # later mark look older than it is.
            self._put(
                conn,
                entry.evolve(resume_pending=False, resume_reason=None, last_resume_marked_at=None),
            )
            return True

    def suspend_recently_active(self, max_age_seconds: int = 120) -> int:
        """Crash recovery: mark lanes updated in the last `max_age_seconds` resume-pending."""
        now = self.clock.now()
        since = now - timedelta(seconds=max_age_seconds)
        count = 0
        with self._db.transaction() as conn:
            for entry in list(conn.iter_routes(since=since)):
                if entry.resume_pending or entry.suspended:
                    continue
                self._put(
                    conn,
                    entry.evolve(
                        resume_pending=True,
                        resume_reason="restart_interrupted",
                        last_resume_marked_at=now,
                    ),
                )
                count += 1
        return count

    def prune_old_entries(self, max_age_days: int) -> int:
        """Drop routing entries not updated for `max_age_days`; transcripts stay.

        Suspended entries and keys with live processes are kept; 0 or less disables pruning.
        """
        if max_age_days <= 0:
            return 0
        cutoff = self.clock.now() - timedelta(days=max_age_days)
        pruned = 0
        with self._db.transaction() as conn:
            for entry in list(conn.iter_routes()):
                if entry.updated_at >= cutoff or entry.suspended:
                    continue
                if self._has_active_processes and self._has_active_processes(entry.session_key):
                    continue
                conn.delete_route(entry.session_key)
                conn.note(Change(ChangeKind.SESSION_DELETED, entry.session_key))
                pruned += 1
        if pruned:
            self._mirror_dirty()
        return pruned

    def list_sessions(self, active_minutes: int | None = None) -> list[SessionEntry]:
        """All entries, most recently updated first; optionally only the recently active."""
        since = None
        if active_minutes is not None:
            since = self.clock.now() - timedelta(minutes=active_minutes)
        with self._db.read() as conn:
            return list(conn.iter_routes(since=since))

    def list_page(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        archived: bool | None = False,
        active_minutes: int | None = None,
        platform: str | None = None,
        pinned: bool | None = None,
        unread: bool | None = None,
        key_prefix: str | None = None,
        agent: str | None = None,
    ) -> tuple[list[SessionEntry], int]:
        """One page of entries (pinned first) and the total that match; `agent` (or
        `key_prefix`, `agent:<id>:`) selects one agent's lanes."""
        since = None
        if active_minutes is not None:
            since = self.clock.now() - timedelta(minutes=active_minutes)
        if agent is not None:
            key_prefix = key_prefix_of(agent)
        with self._db.read() as conn:
            return conn.list_route_page(
                limit=limit,
                offset=offset,
                archived=archived,
                since=since,
                platform=platform,
                pinned=pinned,
                unread=unread,
                key_prefix=key_prefix,
            )

    def lookup_by_session_id(self, session_id: str) -> SessionEntry | None:
        with self._placement.for_session(session_id).read() as conn:
            return conn.route_by_session_id(session_id)

    def has_any_sessions(self) -> bool:
        with self._db.read() as conn:
            return conn.has_any_sessions()

    def session_info(self, session_id: str) -> dict[str, Any] | None:
        """The incarnation row: key, parent, start/end, end reason, leaf, message count, and
        the transcript header (type, version, id, timestamp, parent session)."""
        with self._placement.for_session(session_id).read() as conn:
            row = conn.get_session_row(session_id)
        if row is None:
            return None
        return {
            "session_id": row.session_id,
            "session_key": row.session_key,
            "parent_session_id": row.parent_session_id,
            "started_at": row.started_at,
            "ended_at": row.ended_at,
            "end_reason": row.end_reason,
            "leaf_id": row.leaf_id,
            "message_count": row.leaf_mdepth,
            "generation": row.generation,
            "header": loads(row.header),
        }

    def sessions_for_key(self, session_key: str) -> list[dict[str, Any]]:
        """Every incarnation a key has had, newest first (for `/resume` and `/sessions`)."""
        with self._placement.for_key(session_key).read() as conn:
            ids = conn.session_ids_of_key(session_key)
        infos = [self.session_info(session_id) for session_id in ids]
        return [i for i in infos if i is not None]

    # ------------------------------------------------------------------ lifecycle

    def atomic(self, *, savepoints: bool = True) -> contextlib.AbstractContextManager[object]:
        """Group several calls into one transaction: each call inside becomes a savepoint,
        and all of it commits at the end or none of it (one on each database once incognito
        lanes exist). A new conversation and its first turn, for one, commit together.

        `savepoints=False` is for a caller that never goes on after a call inside failed
        (the gateway): the calls take no savepoints, and a failed one that had written makes
        the whole group refuse to commit (`StoreCorruptError`)."""
        memory = self._placement.memory
        if memory is None:  # the common case, without a generator's few microseconds
            return self._db.transaction(savepoints=savepoints)
        return self._atomic_both(memory, savepoints)

    @contextlib.contextmanager
    def _atomic_both(self, memory: EphemeralBackend, savepoints: bool) -> Iterator[None]:
        with self._db.transaction(savepoints=savepoints), memory.transaction(savepoints=savepoints):
            yield

    def flush_mirror(self) -> str | None:
        """Write `sessions.json` now if it is stale; why it could not be written, or None."""
        return self._mirror.flush() if self._mirror is not None else None

    def close(self) -> None:
        """Flush the mirror and close the database; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._mirror is not None:
            self._mirror.close()
        self._placement.close()

    @property
    def closed(self) -> bool:
        """Whether the durable database is closed (`close`, or a failure under it): the
        liveness answer of `/healthz`."""
        return self._db.closed

    def open_ownership(self, config: GatewayConfig | None = None) -> Ownership | None:
        """This instance's leases on a database several instances share, with `config`'s
        lease timings (the store's own by default), not yet started; None on a database only
        this process uses (SQLite), where the home lock already makes the instance the owner."""
        return open_ownership(self._db, config or self.config)

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    @property
    def remote(self) -> bool:
        """Whether a store call waits on the network (PostgreSQL): the gateway then makes
        its calls off the event loop."""
        return self._db.remote

    @property
    def database(self) -> Backend:
        """The underlying database, for the gateway's tables in the same transactions."""
        return self._db

    def _route_for(
        self, conn: Tx, source: SessionSource, *, creating_at: datetime | None = None
    ) -> tuple[KeyParts, str, SessionEntry | None]:
        """The key of `source` and its route; `creating_at`: a lane is created (at that
        instant) when there is none, so its first session can go with the route's read."""
        parts = build_key_parts(
            source,
            group_sessions_per_user=self.config.group_sessions_per_user,
            thread_sessions_per_user=self.config.thread_sessions_per_user,
            resolve_identity=lambda ident: alias_of(conn, "whatsapp", ident),
            agent_id=agent_for(source, self.config.bindings),
        )
        key = format_session_key(parts)
        if creating_at is not None:
            make_id, header = self._incarnation(creating_at, parent=None)
            conn.prefetch_lane_creation(key, make_id, started_at=to_us(creating_at), header=header)
        found = conn.get_route_with_parts(key)
        if found is None:
            return parts, key, None
        entry, stored = found
        if stored.chat_type and not stored.same_conversation(parts):
            # Two different conversations format to one key (see core.keys): never merge them.
            tagged = disambiguate(parts)
            log.warning(
                "session key collision; the newcomer gets a tagged key",
                extra={"session_key": key, "tagged_key": format_session_key(tagged)},
            )
            parts, key = tagged, format_session_key(tagged)
            return parts, key, conn.get_route(key)
        return parts, key, entry

    def _create_lane(
        self, conn: Tx, key: str, source: SessionSource, now: datetime
    ) -> SessionEntry:
        session_id = self._new_incarnation(conn, key, parent=None, now=now)
        return SessionEntry(
            session_key=key,
            session_id=session_id,
            created_at=now,
            updated_at=now,
            origin=source,
            display_name=source.chat_name,
            platform=source.platform,
            chat_type=source.chat_type,
            session_started_at=now,
            last_interaction_at=now,
        )

    def _rotate(
        self,
        conn: Tx,
        old: SessionEntry,
        now: datetime,
        *,
        end_reason: str,
        **flags: Any,
    ) -> SessionEntry:
        """End the old incarnation with a `reset` boundary and start a new one on the key."""
        old_row = conn.get_session_row(old.session_id)
        had_activity = False
        if old_row is not None:
            had_activity = old_row.leaf_mdepth > 0
            if had_activity:
                self._append_records(
                    conn,
                    old_row,
                    [EntryRecord("reset", None, None, {"reason": end_reason}, to_us(now))],
                )
            conn.end_session_row(old_row.sid, at=to_us(now), reason=end_reason)
            conn.save_counters(old_row.sid, counters_of(old))  # for a later `/resume`
        session_id = self._new_incarnation(conn, old.session_key, parent=old.session_id, now=now)
        changes = {**_FRESH_INCARNATION, "reset_had_activity": had_activity, **flags}
        return old.evolve(
            session_id=session_id,
            created_at=now,
            updated_at=now,
            session_started_at=now,
            last_interaction_at=now,
            **changes,
        )

    def _new_incarnation(self, conn: Tx, key: str, *, parent: str | None, now: datetime) -> str:
        make_id, header = self._incarnation(now, parent=parent)
        session_id = conn.create_fresh_session_row(
            make_id, session_key=key, parent_session_id=parent, started_at=to_us(now), header=header
        )
        self._placement.placed_by(conn, key, session_id)
        return session_id

    def _incarnation(
        self, now: datetime, *, parent: str | None
    ) -> tuple[Callable[[], str], Callable[[str], dict[str, Any]]]:
        """How a session started at `now` draws its id, and its header given that id."""
        stamp = now.isoformat()

        def header(session_id: str) -> dict[str, Any]:
            return {
                "type": "session",
                "version": 1,
                "id": session_id,
                "timestamp": stamp,
                "cwd": None,
                "parent_session": parent,
            }

        return lambda: new_session_id(self.clock, at=now), header

    def _require(self, conn: Tx, session_key: str) -> SessionEntry:
        entry = conn.get_route(session_key)
        if entry is None:
            raise SessionNotFoundError(
                f"no session with key {session_key!r}", session_key=session_key
            )
        return entry

    def _put(self, conn: Tx, entry: SessionEntry) -> None:
        conn.put_route(entry)
        conn.note(Change(ChangeKind.SESSION_UPDATED, entry.session_key, entry.session_id))
        self._mirror_dirty()

    def add_change_listener(self, listener: Callable[[list[Change]], None]) -> None:
        """Tell `listener` what each committed transaction changed (see `store.changes`);
        incognito lanes, like search and listings, leave them out."""
        self._listeners.append(listener)
        self._db.on_commit = self._tell

    def remove_change_listener(self, listener: Callable[[list[Change]], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _tell(self, notes: list[object]) -> None:
        changes = [note for note in notes if isinstance(note, Change)]
        if any(change.kind is ChangeKind.SESSION_DELETED for change in changes):
            self._contexts.clear()
        for listener in list(self._listeners):
            try:
                listener(changes)
            except Exception:
                # The write is committed whatever a follower makes of it.
                log.exception("change listener failed")

    def _mirror_dirty(self) -> None:
        if self._mirror is not None:
            self._mirror.mark_dirty()


def _cost_status(entry: SessionEntry, cost_usd: float | None) -> str:
    """`estimated` while every turn of the incarnation was priced: one unpriced turn makes the
    sum a lower bound, `unknown` from then on (a new incarnation starts over)."""
    if cost_usd is None:
        return "unknown"
    first = entry.total_tokens == 0 and entry.estimated_cost_usd == 0
    return "estimated" if first or entry.cost_status == "estimated" else "unknown"
