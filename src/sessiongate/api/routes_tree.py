"""Operator routes over the transcript tree: rewind, fork, branches, switch, compact.

Rewind, branch switch and fork move or copy the active path, so they are refused (409
`session_busy`) while a turn runs on the lane; the one exception is a fork with
`fork_from: last-completed`, which copies only what the running turn cannot change. Rewind and
fork name an entry the same way and refuse a bad one alike: 404 `entry_not_found` when it is
not on the active path, 400 `invalid_entry` when it is not a user message. A branch switch
reports its outcomes (`missing`, `not_a_tip`, ...) in a 200 body, as the clients expect.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends
from starlette.concurrency import run_in_threadpool

from sessiongate.api.auth import require_operator
from sessiongate.api.deps import KeyDep, RunnerDep, StoreDep, ensure_idle, require_entry
from sessiongate.api.responses import errors
from sessiongate.api.rows import branch_view
from sessiongate.api.schemas import (
    BranchesOut,
    CompactOut,
    ForkIn,
    ForkOut,
    RewindIn,
    RewindOut,
    SwitchIn,
    SwitchOut,
)
from sessiongate.errors import EntryNotFoundError, InvalidEntryError
from sessiongate.gateway import operations

__all__ = ["router"]

router = APIRouter(
    prefix="/v1", tags=["conversation tree"], dependencies=[Depends(require_operator)]
)


@router.post(
    "/sessions/{key}/rewind",
    response_model=RewindOut,
    responses=errors(400, 401, 404, 409, 413, 415, 422),
    summary="Move the active leaf back before a user message (the old branch stays)",
)
async def rewind(key: KeyDep, body: RewindIn, store: StoreDep, runner: RunnerDep) -> RewindOut:
    # On the loop even on PostgreSQL: the entry read, the idle check and the rewind of that
    # entry's session with nothing awaited in between, so no turn or reset comes between them.
    entry = require_entry(store, key)
    ensure_idle(runner, key, "rewind")
    if body.entry_id is not None:
        result = store.rewind_to(entry.session_id, body.entry_id)
        _raise_refusal(str(result["status"]), body.entry_id)
        return RewindOut(
            status="rewound",
            editor_text=result.get("editor_text") or "",
            rewound_count=int(result.get("rewound_count") or 0),
        )
    assert body.turns is not None  # RewindIn holds exactly one of the two
    undone = store.rewind_session(entry.session_id, body.turns)
    count = int(undone["rewound_count"])
    return RewindOut(
        status="rewound" if count else "nothing_to_rewind",
        editor_text=undone["target_text"],
        rewound_count=count,
    )


def _raise_refusal(status: str, entry_id: int) -> None:
    """The store's refusals of a rewind target, as the errors a fork at that entry gets."""
    if status in ("missing", "off_active_path"):
        raise EntryNotFoundError(f"entry {entry_id} is not on the active path", entry_id=entry_id)
    if status == "not_user_message":
        raise InvalidEntryError(f"entry {entry_id} is not a user message")


@router.post(
    "/sessions/{key}/fork",
    response_model=ForkOut,
    responses=errors(400, 401, 404, 409, 413, 415, 422),
    summary="Copy the conversation into a new session key",
)
async def fork(
    key: KeyDep, store: StoreDep, runner: RunnerDep, body: ForkIn | None = None
) -> ForkOut:
    await runner.calls.run(require_entry, store, key)
    options = body or ForkIn()
    # The idle check and the fork stay together on the loop: no turn starts in between.
    if options.entry_id is not None:
        ensure_idle(runner, key, "fork")
    # The store refuses a busy fork unless it is `last-completed`.
    child, editor_text = operations.fork(
        store,
        key,
        entry_id=options.entry_id,
        fork_from=options.fork_from or "active",
        busy=runner.is_busy(key),
    )
    return ForkOut(
        session_key=child.session_key, session_id=child.session_id, editor_text=editor_text
    )


@router.get(
    "/sessions/{key}/branches",
    response_model=BranchesOut,
    responses=errors(400, 401, 404),
    summary="Every branch tip of the current session",
)
async def branches(key: KeyDep, store: StoreDep) -> BranchesOut:
    tips = await run_in_threadpool(
        lambda: store.list_branches(require_entry(store, key).session_id)
    )
    return BranchesOut(branches=[branch_view(t) for t in tips])


@router.post(
    "/sessions/{key}/branches/switch",
    response_model=SwitchOut,
    responses=errors(400, 401, 404, 409, 413, 415, 422),
    summary="Make another branch tip the active leaf",
)
async def switch_branch(
    key: KeyDep, body: SwitchIn, store: StoreDep, runner: RunnerDep
) -> SwitchOut:
    # On the loop even on PostgreSQL, as a rewind is (see there).
    entry = require_entry(store, key)
    ensure_idle(runner, key, "switch branches")
    return SwitchOut.model_validate(
        {"status": operations.switch_branch(store, entry, body.leaf_entry_id)}
    )


@router.post(
    "/sessions/{key}/compact",
    response_model=CompactOut,
    responses=errors(400, 401, 404, 409, 501),
    summary="Summarise the older part of the conversation into a compaction entry",
)
async def compact(key: KeyDep, store: StoreDep, runner: RunnerDep) -> CompactOut:
    await runner.calls.run(require_entry, store, key)
    result = await runner.compact(key)
    return CompactOut(
        compacted=bool(result["compacted"]),
        tokens_before=int(result.get("tokens_before") or 0),
        tokens_after=int(result.get("tokens_after") or 0),
        reason=result.get("reason"),
    )
