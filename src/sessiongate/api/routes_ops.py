"""What an operator watches: running turns and queues per lane, replies that did not reach
their platform, incognito lanes while they live, and the store's health.

`GET /v1/ops` answers all of it in one read, so the dashboard's operations page is one request;
`POST /v1/ops/deliveries/{turn_id}/retry` sends an undelivered reply again now.
"""

# No `from __future__ import annotations`: FastAPI reads the dependency annotations at run time.
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel

from sessiongate.api.auth import require_operator
from sessiongate.api.deps import RunnerDep, StoreDep
from sessiongate.api.errors import ApiError
from sessiongate.api.responses import errors
from sessiongate.api.rows import session_row
from sessiongate.api.schemas import SessionRow
from sessiongate.gateway.runner import GatewayRunner
from sessiongate.store.lanes import TurnState
from sessiongate.store.session_store import SessionStore

__all__ = ["router"]

router = APIRouter(prefix="/v1/ops", tags=["operations"], dependencies=[Depends(require_operator)])

# The operations page lists at most this many of each kind; totals are always exact.
MAX_LISTED = 200
# Enough of a reply to recognise it; the transcript holds the whole text.
REPLY_PREVIEW_CHARS = 200


class LaneOut(BaseModel):
    session_key: str
    running_turn_id: int | None
    running_since: datetime | None
    attempt: int | None
    queued: int


class UndeliveredOut(BaseModel):
    turn_id: int
    session_key: str
    platform: str | None
    reply_preview: str
    replied_at: datetime | None


class HealthCheckOut(BaseModel):
    name: str
    ok: bool
    detail: str


class OpsOut(BaseModel):
    lanes: list[LaneOut]
    queued_total: int
    undelivered: list[UndeliveredOut]
    undelivered_total: int
    # The dead-letter list's size (`GET /v1/deliveries?status=failed`): failed and dead.
    dead_letters_total: int = 0
    incognito: list[SessionRow]
    health: list[HealthCheckOut]
    verdict: str


class RetryOut(BaseModel):
    turn_id: int
    delivered: bool


@router.get("", response_model=OpsOut, responses=errors(401), summary="Lanes, deliveries, health")
async def operations(store: StoreDep, runner: RunnerDep) -> OpsOut:
    return await runner.calls.run(_operations, store, runner)


def _operations(store: SessionStore, runner: GatewayRunner) -> OpsOut:
    """The whole page (store reads)."""
    lane_store = runner.lane_store
    running = {t.session_key: t for t in lane_store.turns_in_state(TurnState.RUNNING)}
    keys = sorted({*running, *lane_store.lanes_with_pending()})
    lanes = [
        LaneOut(
            session_key=key,
            running_turn_id=running[key].id if key in running else None,
            running_since=running[key].started_at if key in running else None,
            attempt=running[key].attempt if key in running else None,
            queued=lane_store.queue_depth(key),
        )
        for key in keys[:MAX_LISTED]
    ]
    replied = lane_store.turns_in_state(TurnState.REPLIED)
    undelivered = [
        UndeliveredOut(
            turn_id=t.id,
            session_key=t.session_key,
            platform=str(t.source.platform),
            reply_preview=(t.reply or "")[:REPLY_PREVIEW_CHARS],
            replied_at=t.finished_at,
        )
        for t in replied[:MAX_LISTED]
    ]
    counts = runner.deliveries.counts()
    health = _health(store)
    return OpsOut(
        lanes=lanes,
        queued_total=lane_store.total_queued(),
        undelivered=undelivered,
        undelivered_total=len(replied),
        dead_letters_total=counts.get("failed", 0) + counts.get("dead", 0),
        incognito=[session_row(e, store) for e in store.list_incognito()[:MAX_LISTED]],
        health=health,
        verdict="healthy" if all(c.ok for c in health) else "needs attention",
    )


@router.post(
    "/deliveries/{turn_id}/retry",
    response_model=RetryOut,
    responses=errors(401, 404),
    summary="Send an undelivered reply again now",
)
async def retry_delivery(
    turn_id: Annotated[int, Path(ge=1, le=2**62)], runner: RunnerDep
) -> RetryOut:
    turn = await runner.calls.run(runner.lane_store.get_turn, turn_id)
    if turn is None or turn.state is not TurnState.REPLIED:
        raise ApiError(404, "turn_not_found", f"no undelivered reply for turn {turn_id}")
    return RetryOut(turn_id=turn_id, delivered=await runner.retry_delivery(turn_id))


def _health(store: SessionStore) -> list[HealthCheckOut]:
    """The checks `sessiongate doctor` makes of a running store, without repairing anything."""
    checks: list[HealthCheckOut] = []
    status = store.search_index_status()
    problems = []
    if status.get("stale"):
        problems.append("stale: search falls back to a scan")
    if status.get("integrity_error"):
        problems.append(f"integrity check failed: {status['integrity_error']}")
    pending = int(status.get("pending", 0) or 0)
    checks.append(
        HealthCheckOut(
            name="search index",
            ok=not problems,
            detail="; ".join(problems) if problems else f"current, {pending} entries to index",
        )
    )
    skipped = list(store.problems)
    checks.append(
        HealthCheckOut(
            name="sessions.json import",
            ok=not skipped,
            detail=f"{len(skipped)} entries skipped" if skipped else "nothing skipped",
        )
    )
    mirror = store.sessions_dir / "sessions.json"
    if not store.keeps_mirror:
        checks.append(HealthCheckOut(name="sessions.json mirror", ok=True, detail="off"))
    elif mirror.exists() and not mirror.is_file():
        checks.append(
            HealthCheckOut(name="sessions.json mirror", ok=False, detail="not a regular file")
        )
    else:
        checks.append(
            HealthCheckOut(
                name="sessions.json mirror",
                ok=True,
                detail="written" if mirror.exists() else "not written yet",
            )
        )
    return checks
