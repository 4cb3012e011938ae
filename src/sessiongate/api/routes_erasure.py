"""`POST /v1/erasure`: forget one person everywhere the store keeps them (operator only).

The body names the person as `<platform>:<user_id>`; `dry_run` answers the plan without
changing anything. A lane of theirs with a turn running is refused with 409 (retry when it has
finished), as a delete is. The answer is the receipt (`store/erasure.py`); the audit table
keeps it without the keys, which name the person.
"""

# No `from __future__ import annotations`: FastAPI reads the dependency annotations at run time.
from fastapi import APIRouter, Depends
from pydantic import Field, StrictBool, StrictStr
from starlette.concurrency import run_in_threadpool

from sessiongate.api.auth import require_operator
from sessiongate.api.deps import RunnerDep, StoreDep, ensure_idle
from sessiongate.api.errors import ApiError
from sessiongate.api.responses import errors
from sessiongate.api.schemas import _In
from sessiongate.core.erasure import parse_subject
from sessiongate.store.erasure import ErasureReceipt

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["privacy"], dependencies=[Depends(require_operator)])


class ErasureIn(_In):
    user: StrictStr = Field(
        min_length=3, max_length=600, description="`<platform>:<user_id>`, e.g. telegram:42"
    )
    dry_run: StrictBool = False


class ErasureOut(_In):
    receipt_id: int | None
    subject_hash: str
    erased_at: str
    dry_run: bool
    # False when the rows are gone but the file could not be rewritten yet (send it again).
    scrubbed: bool
    counts: dict[str, int]
    keys: list[str]


@router.post(
    "/erasure",
    response_model=ErasureOut,
    responses=errors(400, 401, 409, 413, 415, 422),
    summary="Erase one person's sessions and messages (right to erasure)",
)
async def erase(body: ErasureIn, store: StoreDep, runner: RunnerDep) -> ErasureOut:
    try:
        subject = parse_subject(body.user)
    except ValueError as exc:
        raise ApiError(400, "invalid_user", str(exc)) from exc
    plan = await run_in_threadpool(store.forget_user, subject, dry_run=True)
    for key in plan.keys:
        ensure_idle(runner, key, "erase the session")
    receipt = plan if body.dry_run else await run_in_threadpool(store.forget_user, subject)
    return _out(receipt)


def _out(receipt: ErasureReceipt) -> ErasureOut:
    return ErasureOut(
        receipt_id=receipt.receipt_id,
        subject_hash=receipt.subject_hash,
        erased_at=receipt.erased_at,
        dry_run=receipt.dry_run,
        scrubbed=receipt.scrubbed,
        counts=receipt.counts(),
        keys=receipt.keys,
    )
