"""The dead-letter list: outbound messages and what became of them (`store/deliveries.py`).

`GET /v1/deliveries` lists deliveries, newest first (`?status=failed`: the dead-letter list,
failed and dead; `pending`, `sent`, `dead` list those only); `POST /v1/deliveries/{id}/retry`
sends a failed or dead one again now, and `POST /v1/deliveries/retry` every one of the list.
Outbound webhook events have theirs: `GET /v1/webhooks/events?status=dead` and
`POST /v1/webhooks/events/{id}/retry`.
"""

# No `from __future__ import annotations`: FastAPI reads the dependency annotations at run time.
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel

from sessiongate.api.auth import require_operator
from sessiongate.api.deps import RunnerDep
from sessiongate.api.errors import ApiError
from sessiongate.api.responses import errors
from sessiongate.store.deliveries import UNDELIVERED, DeliveryRecord, DeliveryStore
from sessiongate.store.outbox import DEAD, OutboxEvent, OutboxStore
from sessiongate.store.records import DeliveryStatus

__all__ = ["router", "webhook_router"]

router = APIRouter(
    prefix="/v1/deliveries", tags=["deliveries"], dependencies=[Depends(require_operator)]
)

webhook_router = APIRouter(
    prefix="/v1/webhooks", tags=["deliveries"], dependencies=[Depends(require_operator)]
)

MAX_LISTED = 1000
# The list shows the start of each message; the transcript holds the whole text.
PREVIEW_CHARS = 200

StatusFilter = Literal["failed", "pending", "sent", "dead", "all"]


class DeliveryOut(BaseModel):
    id: int
    kind: str
    turn_id: int | None
    session_key: str | None
    platform: str
    chat_id: str
    status: str
    attempts: int
    message_id: str | None
    reason: str | None
    preview: str
    created_at: datetime
    updated_at: datetime
    next_at: datetime


class DeliveriesOut(BaseModel):
    deliveries: list[DeliveryOut]
    # Rows per status in the whole table (not only those listed).
    counts: dict[str, int]


class RetryAllOut(BaseModel):
    retried: int
    sent: int


def _out(record: DeliveryRecord) -> DeliveryOut:
    return DeliveryOut(
        id=record.id,
        kind=record.kind,
        turn_id=record.turn_id,
        session_key=record.session_key,
        platform=str(record.source.platform),
        chat_id=record.source.chat_id,
        status=str(record.status),
        attempts=record.attempts,
        message_id=record.message_id,
        reason=record.reason,
        preview=record.text[:PREVIEW_CHARS],
        created_at=record.created_at,
        updated_at=record.updated_at,
        next_at=record.next_at,
    )


def statuses_of(status: str) -> tuple[DeliveryStatus, ...]:
    """The rows a `status` filter lists: `failed` is the dead-letter list (failed and dead)."""
    if status == "all":
        return ()
    if status == "failed":
        return UNDELIVERED
    return (DeliveryStatus(status),)


@router.get(
    "", response_model=DeliveriesOut, responses=errors(401), summary="Deliveries, newest first"
)
async def list_deliveries(
    runner: RunnerDep,
    status: Annotated[StatusFilter, Query()] = "all",
    limit: Annotated[int, Query(ge=1, le=MAX_LISTED)] = 100,
) -> DeliveriesOut:
    records, counts = await runner.calls.run(_listed, runner.deliveries, status, limit)
    return DeliveriesOut(deliveries=[_out(r) for r in records], counts=counts)


def _listed(
    rows: DeliveryStore, status: str, limit: int
) -> tuple[list[DeliveryRecord], dict[str, int]]:
    """The deliveries a `status` filter lists, and the counts per status (store reads)."""
    return rows.find(statuses_of(status), limit=limit), rows.counts()


@router.post(
    "/retry",
    response_model=RetryAllOut,
    responses=errors(401),
    summary="Send every failed or dead delivery again now",
)
async def retry_all(runner: RunnerDep) -> RetryAllOut:
    records = await runner.calls.run(runner.deliveries.find, UNDELIVERED, limit=MAX_LISTED)
    sent = 0
    for record in records:
        after = await runner.retry_delivery_row(record.id)
        sent += after is not None and after.status is DeliveryStatus.SENT
    return RetryAllOut(retried=len(records), sent=sent)


@router.post(
    "/{delivery_id}/retry",
    response_model=DeliveryOut,
    responses=errors(401, 404, 409),
    summary="Send a failed or dead delivery again now",
)
async def retry_delivery(
    delivery_id: Annotated[int, Path(ge=1, le=2**62)], runner: RunnerDep
) -> DeliveryOut:
    record = await runner.calls.run(runner.deliveries.get, delivery_id)
    if record is None:
        raise ApiError(404, "delivery_not_found", f"no delivery {delivery_id}")
    if record.status is DeliveryStatus.SENT:
        raise ApiError(409, "already_sent", f"delivery {delivery_id} was sent already")
    after = await runner.retry_delivery_row(delivery_id)
    if after is None:
        raise ApiError(409, "delivery_busy", f"delivery {delivery_id} is being sent now")
    return _out(after)


class WebhookEventOut(BaseModel):
    id: int
    event_id: str
    target: str
    event: str
    session_key: str | None
    status: str
    attempts: int
    reason: str | None
    created_at: datetime
    next_at: datetime


class WebhookEventsOut(BaseModel):
    events: list[WebhookEventOut]


def _event_out(event: OutboxEvent) -> WebhookEventOut:
    return WebhookEventOut(
        id=event.id,
        event_id=event.event_id,
        target=event.target,
        event=event.event,
        session_key=event.session_key,
        status=event.status,
        attempts=event.attempts,
        reason=event.reason,
        created_at=event.created_at,
        next_at=event.next_at,
    )


@webhook_router.get(
    "/events",
    response_model=WebhookEventsOut,
    responses=errors(401),
    summary="Outbound webhook events, newest first",
)
async def list_webhook_events(
    runner: RunnerDep,
    status: Annotated[Literal["pending", "sent", "dead", "all"], Query()] = "all",
    limit: Annotated[int, Query(ge=1, le=MAX_LISTED)] = 100,
) -> WebhookEventsOut:
    statuses = () if status == "all" else (status,)
    events = await runner.calls.run(runner.outbox.find, statuses, limit=limit)
    return WebhookEventsOut(events=[_event_out(e) for e in events])


@webhook_router.post(
    "/events/{event_id}/retry",
    response_model=WebhookEventOut,
    responses=errors(401, 404, 409),
    summary="Send a dead webhook event again",
)
async def retry_webhook_event(
    event_id: Annotated[int, Path(ge=1, le=2**62)], runner: RunnerDep
) -> WebhookEventOut:
    after = await runner.calls.run(_reopened, runner.outbox, event_id)
    if runner.webhooks is not None:
        runner.webhooks.wake()
    return _event_out(after)


def _reopened(outbox: OutboxStore, event_id: int) -> OutboxEvent:
    """The dead webhook event `event_id` after it was reopened: 404 when there is none, 409
    when it is not dead (store calls)."""
    event = outbox.get(event_id)
    if event is None:
        raise ApiError(404, "event_not_found", f"no webhook event {event_id}")
    if event.status != DEAD:
        raise ApiError(409, "event_not_dead", f"webhook event {event_id} is {event.status}")
    outbox.reopen(event_id)
    after = outbox.get(event_id)
    assert after is not None
    return after
