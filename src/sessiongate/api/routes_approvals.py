"""Tool approvals for programs: `GET /v1/approvals` (by status) and `POST /v1/approvals/{id}`.

The operator's bearer token decides for any approver (as on every operator route); a
decision is the same one conditional update `/approve` and `/deny` make in a chat, so of two
concurrent ones exactly one wins and the other gets 409 `approval_decided`. With
`arguments_sha256` the decision applies only if the approval is for that exact call.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query

from sessiongate.api.auth import require_operator
from sessiongate.api.deps import RunnerDep  # noqa: TC001  (FastAPI reads it at run time)
from sessiongate.api.responses import errors
from sessiongate.api.schemas import ApprovalDecisionIn, ApprovalList, ApprovalOut
from sessiongate.errors import ApprovalNotFoundError
from sessiongate.gateway.approvals import OPERATOR
from sessiongate.store.records import ApprovalRow, from_us

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["approvals"], dependencies=[Depends(require_operator)])

ApprovalId = Annotated[
    str,
    Path(min_length=1, max_length=64, pattern=r"^[0-9a-f]+$", description="the approval's id"),
]
Status = Literal["pending", "approved", "denied", "expired", "cancelled"]


def approval_out(row: ApprovalRow) -> ApprovalOut:
    return ApprovalOut(
        id=row.id,
        status=row.status,
        tool=row.tool,
        arguments=row.arguments,
        arguments_sha256=row.arguments_sha256,
        session_key=row.session_key,
        turn_id=row.turn_id,
        call_id=row.call_id,
        approvers=json.loads(row.approvers),
        requested_at=from_us(row.requested_at),
        expires_at=from_us(row.expires_at),
        decided_at=None if row.decided_at is None else from_us(row.decided_at),
        decided_by=row.decided_by,
    )


@router.get(
    "/approvals",
    response_model=ApprovalList,
    responses=errors(401, 422),
    summary="Tool approvals, newest first",
)
async def list_approvals(
    runner: RunnerDep,
    status: Annotated[Status | None, Query(description="only approvals in this state")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> ApprovalList:
    # Expiring wakes the expired calls' waiters (loop state), so it stays on the loop.
    runner.approvals.expire_due()
    rows = await runner.calls.run(runner.approvals.book.listed, status=status, limit=limit)
    return ApprovalList(approvals=[approval_out(row) for row in rows])


@router.get(
    "/approvals/{approval_id}",
    response_model=ApprovalOut,
    responses=errors(401, 404, 422),
    summary="One tool approval",
)
async def get_approval(approval_id: ApprovalId, runner: RunnerDep) -> ApprovalOut:
    row = await runner.calls.run(runner.approvals.book.get, approval_id)
    if row is None:
        raise ApprovalNotFoundError(f"no approval {approval_id!r}")
    return approval_out(row)


@router.post(
    "/approvals/{approval_id}",
    response_model=ApprovalOut,
    responses=errors(401, 404, 409, 422),
    summary="Approve or deny a waiting tool call",
)
async def decide_approval(
    approval_id: ApprovalId, body: ApprovalDecisionIn, runner: RunnerDep
) -> ApprovalOut:
    # The decision wakes the waiting call (loop state), so it stays on the loop.
    row = runner.approvals.decide(
        approval_id,
        approve=body.decision == "approve",
        by=OPERATOR,
        sha256=body.arguments_sha256,
    )
    return approval_out(row)
