"""`GET /v1/turns/{id}`: how one turn stands (state, reply, error), for a client that sent
with `wait: false` or whose stream broke off. While the turn runs in this process it also shows
the text being generated (`partial`) and how many times it started over (`retries`).

A message accepted behind a busy lane already has its turn id (a turn takes its inbox row's
id), so until the turn is claimed the answer is `queued`. An id that names neither a turn nor
a waiting message is 404 `turn_not_found`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Depends, Path

from sessiongate.api.auth import require_operator
from sessiongate.api.deps import RunnerDep  # noqa: TC001  (FastAPI reads it at run time)
from sessiongate.api.errors import ApiError
from sessiongate.api.responses import errors
from sessiongate.api.schemas import TurnOut

if TYPE_CHECKING:
    from sessiongate.store.lanes import InboxItem, LaneStore, Turn

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["turns"], dependencies=[Depends(require_operator)])

# Ids are SQLite integers; past 2**62 nothing can exist (and 2**63 overflows the driver).
TurnId = Annotated[int, Path(ge=1, le=2**62, description="the `turn_id` of a message receipt")]


@router.get(
    "/turns/{turn_id}",
    response_model=TurnOut,
    responses=errors(401, 404, 422),
    summary="One turn: its state, reply and error",
)
async def get_turn(turn_id: TurnId, runner: RunnerDep) -> TurnOut:
    turn, item = await runner.calls.run(_find, runner.lane_store, turn_id)
    if turn is not None:
        live = runner.live_turn(turn.session_key, turn.id)
        return TurnOut(
            turn_id=turn.id,
            session_key=turn.session_key,
            session_id=turn.session_id,
            state=turn.state.value,
            reply=turn.reply,
            error=turn.error,
            attempt=turn.attempt,
            accepted_at=turn.accepted_at,
            started_at=turn.started_at,
            finished_at=turn.finished_at,
            partial=None if live is None else live.partial,
            retries=None if live is None else live.retries,
        )
    if item is not None:
        return TurnOut(
            turn_id=turn_id,
            session_key=item.session_key,
            session_id=None,
            state="queued",
            reply=None,
            error=None,
            attempt=0,
            accepted_at=item.accepted_at,
            started_at=None,
            finished_at=None,
        )
    raise ApiError(404, "turn_not_found", f"no turn with id {turn_id}")


def _find(lanes: LaneStore, turn_id: int) -> tuple[Turn | None, InboxItem | None]:
    """The turn `turn_id`, or else the waiting message that will be it (store reads)."""
    turn = lanes.get_turn(turn_id)
    return turn, (None if turn is not None else lanes.get_item(turn_id))
