"""`POST /v1/messages` and `POST /v1/sessions/{key}/messages`: inbound messages on the `api`
platform.

The first names the conversation with session-source fields (at least `chat_id`); the runner
routes it to its lane like any platform message. The second addresses one session by key (a
fork, an incognito session): it runs on that lane, never routed by its source. With `wait`
(the default) the answer carries the reply; without, 202 and `status: queued` as soon as the
message is durably accepted. `unauthorized` (the `api` platform's allow list) is a 403, an
archived session a 409 and a full lane queue a 429; every other outcome of the turn
(`failed`, `interrupted`, `duplicate`, `command`) is a 200 whose `status` says what happened,
because the request itself was fine.

With `stream: true` the answer is `text/event-stream` (`sse.py`) once the message is accepted:
refusals before that (403, 409, 429, 503) stay ordinary JSON errors. The stream only watches
the turn: a client that disconnects does not cancel it, and `GET /v1/turns/{id}` shows how it
ended.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Response
from fastapi.responses import StreamingResponse  # noqa: TC002 (the routes' return annotation)

from sessiongate.api.auth import require_operator

# FastAPI reads the dependency annotations at run time.
from sessiongate.api.deps import (
    ConfigDep,
    KeyDep,
    MetricsDep,
    RunnerDep,
    StoreDep,
    require_entry,
)
from sessiongate.api.errors import ApiError
from sessiongate.api.metrics import ApiMetrics  # noqa: TC001
from sessiongate.api.responses import errors
from sessiongate.api.schemas import MessageIn, MessageOut, SessionMessageIn
from sessiongate.api.sources import source_of
from sessiongate.api.sse import HeldStartResponse, turn_events
from sessiongate.core.platform import Platform
from sessiongate.core.source import SessionSource
from sessiongate.errors import (
    QueueFullError,
    SessionArchivedError,
    StoreUnavailableError,
    UnauthorizedError,
)
from sessiongate.gateway.messages import MessageEvent
from sessiongate.gateway.streams import TurnWatch

if TYPE_CHECKING:
    from sessiongate.gateway.runner import GatewayRunner

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["messages"], dependencies=[Depends(require_operator)])

_ACCEPTED: dict[int | str, dict[str, Any]] = {
    200: {
        "content": {"text/event-stream": {}},
        "description": "The reply (`stream: true`: server-sent events)",
    },
    202: {"model": MessageOut, "description": "Accepted and queued (`wait: false`)"},
}


@router.post(
    "/messages",
    response_model=MessageOut,
    responses={**_ACCEPTED, **errors(400, 401, 403, 409, 413, 415, 422, 429)},
    summary="Send a message to the agent on the api platform",
)
async def post_message(
    body: MessageIn,
    response: Response,
    runner: RunnerDep,
    config: ConfigDep,
    metrics: MetricsDep,
) -> MessageOut | StreamingResponse:
    _check_length(body.text, config.api.max_message_chars)
    event = MessageEvent(
        source=source_of(body),
        text=body.text,
        message_id=body.message_id,
        reply_to=body.reply_to,
        visible_session_id=body.visible_session_id,
    )
    return await _run(
        runner, event, wait=body.wait, stream=body.stream, response=response, metrics=metrics
    )


@router.post(
    "/sessions/{key}/messages",
    response_model=MessageOut,
    responses={**_ACCEPTED, **errors(400, 401, 403, 404, 409, 413, 415, 422, 429)},
    summary="Send a message to one session by key (a fork, an incognito session)",
)
async def post_session_message(
    key: KeyDep,
    body: SessionMessageIn,
    response: Response,
    store: StoreDep,
    runner: RunnerDep,
    config: ConfigDep,
    metrics: MetricsDep,
) -> MessageOut | StreamingResponse:
    _check_length(body.text, config.api.max_message_chars)
    entry = await runner.calls.run(require_entry, store, key)
    # The api channel answers in the response: the reply never goes out on the platform the
    # session came from. Dedup ids are scoped to the addressed lane.
    source = SessionSource(
        platform=Platform.API,
        chat_id=key,
        chat_type=entry.chat_type,
        user_id=body.user_id,
        user_name=body.user_name,
    )
    event = MessageEvent(
        source=source,
        text=body.text,
        message_id=body.message_id,
        reply_to=body.reply_to,
        session_key=key,
        visible_session_id=body.visible_session_id,
    )
    return await _run(
        runner, event, wait=body.wait, stream=body.stream, response=response, metrics=metrics
    )


def _check_length(text: str, limit: int) -> None:
    if len(text) > limit:
        raise ApiError(413, "message_too_long", f"the text is longer than {limit} characters")


async def _run(
    runner: GatewayRunner,
    event: MessageEvent,
    *,
    wait: bool,
    stream: bool = False,
    response: Response,
    metrics: ApiMetrics,
) -> MessageOut | StreamingResponse:
    started = time.perf_counter()
    watch = TurnWatch() if stream else None
    receipt = await runner.handle_message(event, wait=wait and not stream, watch=watch)
    status = str(receipt.status)
    if wait and status in ("replied", "failed", "interrupted"):
        metrics.turn_latency.labels(status=status).observe(time.perf_counter() - started)
    if status == "unauthorized":
        raise UnauthorizedError(
            "this sender is not allowed on the api platform", session_key=receipt.session_key
        )
    if status == "archived":
        raise SessionArchivedError(
            receipt.reply or "the session is archived", session_key=receipt.session_key
        )
    if status == "queue_full":
        raise QueueFullError(
            "the conversation's queue is full; retry when the agent has caught up",
            session_key=receipt.session_key,
        )
    if status == "unavailable":
        raise StoreUnavailableError(
            receipt.reply or "storage refused the write", session_key=receipt.session_key
        )
    if watch is not None:
        return HeldStartResponse(
            turn_events(receipt, watch if status == "queued" else None),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )
    if status == "queued":
        response.status_code = 202
    return MessageOut.model_validate(
        {
            "session_key": receipt.session_key,
            "session_id": receipt.session_id,
            "status": status,
            "reply": receipt.reply,
            "turn_id": receipt.turn_id,
        }
    )
