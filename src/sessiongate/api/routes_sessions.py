"""Operator routes over sessions: create, list, read, transcript, context, search, reset, patch,
delete."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response
from starlette.concurrency import run_in_threadpool

from sessiongate.api.auth import require_operator
from sessiongate.api.deps import (
    CallsDep,
    ConfigDep,
    KeyDep,
    MetricsDep,
    RunnerDep,
    StoreDep,
    ensure_idle,
    require_entry,
)
from sessiongate.api.responses import errors
from sessiongate.api.rows import context_view, session_row
from sessiongate.api.schemas import (
    ContextOut,
    DeleteOut,
    PatchIn,
    ResetIn,
    ResetOut,
    SearchHit,
    SearchOut,
    SessionCreateIn,
    SessionList,
    SessionRow,
    TranscriptEvent,
    TranscriptOut,
)
from sessiongate.api.sources import source_of
from sessiongate.core.bindings import AGENT_ID, agent_of_key
from sessiongate.core.sentinel import UNSET
from sessiongate.errors import EntryNotFoundError, SessionBusyError, SessionNotFoundError
from sessiongate.gateway import operations

if TYPE_CHECKING:
    from sessiongate.core.config import GatewayConfig
    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.source import SessionSource
    from sessiongate.core.transcript import ModelContext
    from sessiongate.gateway.runner import GatewayRunner
    from sessiongate.store.session_store import SessionStore

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["sessions"], dependencies=[Depends(require_operator)])

# Larger pages would let one request pin the store for a long scan.
MAX_PAGE = 1000
# Keeps `now - active_minutes` inside the range of a datetime (about 190 years).
MAX_ACTIVE_MINUTES = 100_000_000


AgentQuery = Annotated[
    str | None,
    Query(
        pattern=f"^{AGENT_ID.pattern}$",
        description="only the sessions of this agent (an id of `agents`, or `main`)",
    ),
]


@router.post(
    "/sessions",
    response_model=SessionRow,
    status_code=201,
    responses={
        200: {"model": SessionRow, "description": "The session already existed"},
        **errors(400, 401, 415),
    },
    summary="Create a session: the one a source routes to, or a new incognito one",
)
async def create_session(
    body: SessionCreateIn, response: Response, store: StoreDep, calls: CallsDep
) -> SessionRow:
    row, existed = await calls.run(_created, store, source_of(body), incognito=body.incognito)
    if existed:
        response.status_code = 200
    return row


def _created(
    store: SessionStore, source: SessionSource, *, incognito: bool
) -> tuple[SessionRow, bool]:
    """(the row, whether the session existed) for a create (store calls)."""
    if incognito:
        return session_row(store.create_incognito_session(source), store), False
    # Read first: an existing lane is returned as it is, never rolled over under its turn.
    _, entry = store.resolve_route(source)
    if entry is not None:
        return session_row(entry, store), True
    return session_row(store.get_or_create_session(source), store), False


@router.get(
    "/sessions",
    response_model=SessionList,
    responses=errors(401, 422),
    summary="List sessions, pinned first",
)
async def list_sessions(
    store: StoreDep,
    config: ConfigDep,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
    archived: Annotated[
        bool, Query(description="list archived sessions instead of the others")
    ] = False,
    active_minutes: Annotated[
        int | None,
        Query(ge=1, le=MAX_ACTIVE_MINUTES, description="only sessions updated this recently"),
    ] = None,
    incognito: Annotated[
        bool, Query(description="list the in-memory incognito sessions instead of the others")
    ] = False,
    platform: Annotated[
        str | None, Query(min_length=1, max_length=64, description="only this platform")
    ] = None,
    pinned: Annotated[bool | None, Query(description="only pinned (or unpinned) ones")] = None,
    unread: Annotated[bool | None, Query(description="only unread (or read) ones")] = None,
    agent: AgentQuery = None,
) -> SessionList:
    if incognito:
        # The incognito lanes live in the process's own memory database.
        every = [
            e
            for e in store.list_incognito()
            if agent is None or agent_of_key(e.session_key) == agent
        ]
        entries, total = every[offset : offset + limit], len(every)
        rows = await run_in_threadpool(
            lambda: [session_row(e, store, config=config) for e in entries]
        )
    else:
        # A page of up to `MAX_PAGE` rows, each with its preview read: off the event loop on
        # either backend.
        rows, total = await run_in_threadpool(
            _page,
            store,
            config,
            limit=limit,
            offset=offset,
            archived=archived,
            active_minutes=active_minutes,
            platform=platform,
            pinned=pinned,
            unread=unread,
            agent=agent,
        )
    end = offset + len(rows)
    has_more = end < total
    return SessionList(
        sessions=rows,
        total=total,
        has_more=has_more,
        next_offset=end if has_more else None,
    )


def _page(store: SessionStore, config: GatewayConfig, **query: Any) -> tuple[list[SessionRow], int]:
    """(the rows of one page of `list_page(**query)`, the total it counts) (store reads)."""
    entries, total = store.list_page(**query)
    return [session_row(e, store, config=config) for e in entries], total


@router.get(
    "/sessions/{key}",
    response_model=SessionRow,
    responses=errors(400, 401, 404),
    summary="One session row",
)
async def get_session(key: KeyDep, store: StoreDep, config: ConfigDep) -> SessionRow:
    return await run_in_threadpool(
        lambda: session_row(require_entry(store, key), store, config=config)
    )


@router.get(
    "/sessions/{key}/transcript",
    response_model=TranscriptOut,
    responses=errors(400, 401, 404, 422),
    summary="The transcript: the active path, or every branch",
)
async def get_transcript(
    key: KeyDep,
    store: StoreDep,
    branch: Annotated[Literal["active", "all"], Query()] = "active",
    limit: Annotated[
        int | None,
        Query(ge=1, le=MAX_PAGE, description="only the last N events (before `before`)"),
    ] = None,
    before: Annotated[
        int | None,
        Query(ge=1, le=2**62, description="only events before this entry id (with `limit`)"),
    ] = None,
) -> TranscriptOut:
    entry, events, info = await run_in_threadpool(_transcript, store, key, branch)
    has_more = False
    if before is not None:
        cut = next((i for i, e in enumerate(events) if e["id"] == before), None)
        if cut is None:
            raise EntryNotFoundError(
                f"entry {before} is not in this transcript", session_id=entry.session_id
            )
        events = events[:cut]
    if limit is not None and len(events) > limit:
        has_more = True
        events = events[-limit:]
    return TranscriptOut(
        session_id=entry.session_id,
        header=info["header"] if info is not None else {},
        events=[TranscriptEvent.model_validate(e) for e in events],
        has_more=has_more,
    )


def _transcript(
    store: SessionStore, key: str, branch: Literal["active", "all"]
) -> tuple[SessionEntry, list[dict[str, Any]], dict[str, Any] | None]:
    """The session's entry, its events on `branch` and its incarnation row (store reads)."""
    entry = require_entry(store, key)
    events = store.load_events(entry.session_id, branch=branch)
    return entry, events, store.session_info(entry.session_id)


@router.get(
    "/sessions/{key}/context",
    response_model=ContextOut,
    responses=errors(400, 401, 404),
    summary="The model context the next turn would get",
)
async def get_context(key: KeyDep, store: StoreDep, runner: RunnerDep) -> ContextOut:
    entry, context = await run_in_threadpool(_context, store, key)
    return context_view(entry, context, store, prompts=runner.system_prompts)


def _context(store: SessionStore, key: str) -> tuple[SessionEntry, ModelContext]:
    """The session's entry and the model context of its next turn (store reads)."""
    entry = require_entry(store, key)
    return entry, store.model_context(entry.session_id)


@router.get(
    "/search",
    response_model=SearchOut,
    responses=errors(401, 422),
    summary="Full-text search over the active branches",
)
async def search(
    store: StoreDep,
    metrics: MetricsDep,
    q: Annotated[str, Query(min_length=1, max_length=1000)],
    limit: Annotated[int, Query(ge=1, le=500)] = 20,
    agent: AgentQuery = None,
) -> SearchOut:
    hits, degraded = await run_in_threadpool(store.search_detailed, q, limit, agent=agent)
    metrics.search_degraded.set(1 if degraded else 0)
    return SearchOut(results=[SearchHit.model_validate(h) for h in hits], degraded=degraded)


@router.post(
    "/sessions/{key}/reset",
    response_model=ResetOut,
    responses=errors(400, 401, 404, 409),
    summary="End the current conversation and start a new session id",
)
async def reset_session(
    key: KeyDep, store: StoreDep, runner: RunnerDep, calls: CallsDep, body: ResetIn | None = None
) -> ResetOut:
    await calls.run(require_entry, store, key)
    # The running turn would otherwise write its reply into the conversation just ended.
    ensure_idle(runner, key, "reset")
    # As `/new` does: the new conversation starts with its stuck-loop counter at zero, in the
    # same commit as the reset. Nothing awaits between the check and the commit (on the loop
    # even on PostgreSQL), so no turn can start on the lane in between.
    options = body or ResetIn()
    entry, counted = operations.reset(
        store, runner.lane_store, key, mode=options.mode, keep_tail=options.keep_tail
    )
    if entry is None:  # deleted between the two calls
        raise SessionNotFoundError(f"no session with key {key!r}", session_key=key)
    if counted:
        await calls.run(runner.write_restart_counts)
    return ResetOut(session_id=entry.session_id)


@router.patch(
    "/sessions/{key}",
    response_model=SessionRow,
    responses=errors(400, 401, 404, 409, 413, 415, 422),
    summary="Pin, archive, mark read or unread, label, choose the model",
)
async def patch_session(
    key: KeyDep, body: PatchIn, store: StoreDep, runner: RunnerDep, calls: CallsDep
) -> SessionRow:
    await calls.run(require_entry, store, key)
    given = body.model_fields_set
    changes: dict[str, Any] = {}
    for name in ("pinned", "archived", "unread", "expected_session_id"):
        value = getattr(body, name)
        if value is not None:
            changes[name] = value
    # For these two, an explicit null is a value: clear the label / "I saw no marker".
    for name in ("label", "expected_marked_unread_at"):
        if name in given:
            changes[name] = getattr(body, name)
    # The check and the change share one transaction, and nothing awaits between them (it
    # stays on the loop even on PostgreSQL), so no message can be accepted on the lane in
    # between.
    choice = {n: getattr(body, n) for n in ("model", "provider", "thinking_level") if n in given}
    with runner.lane_store.atomic():
        if body.archived:
            _ensure_quiet(runner, key)
        entry = store.patch_session(
            key, **{name: changes.get(name, UNSET) for name in _PATCH_FIELDS}
        )
        if choice:
            entry = store.set_model_choice(key, **choice)
    return session_row(entry, store)


def _ensure_quiet(runner: GatewayRunner, key: str) -> None:
    """Refuse to archive a lane with a running turn or waiting messages: an archived lane
    drops what waits on it unrun, and those messages were already acknowledged."""
    ensure_idle(runner, key, "archive the session")
    if runner.queue_depth(key):
        raise SessionBusyError(
            f"cannot archive the session while messages wait on {key!r}; retry when they have run",
            session_key=key,
        )


_PATCH_FIELDS = (
    "pinned",
    "archived",
    "expected_session_id",
    "unread",
    "expected_marked_unread_at",
    "label",
)


@router.delete(
    "/sessions/{key}",
    response_model=DeleteOut,
    responses=errors(400, 401, 404, 409),
    summary="Delete a session (its transcript is archived first)",
)
async def delete_session(
    key: KeyDep, store: StoreDep, runner: RunnerDep, calls: CallsDep
) -> DeleteOut:
    await calls.run(require_entry, store, key)
    # The check and the delete stay together on the loop: no turn starts in between.
    ensure_idle(runner, key, "delete the session")
    if not store.delete_session(key):
        raise SessionNotFoundError(f"no session with key {key!r}", session_key=key)
    return DeleteOut(deleted=True, session_key=key)
