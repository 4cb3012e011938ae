"""`POST /v1/messages`: an inbound message on the `api` platform.

The caller names the conversation with session-source fields (at least `chat_id`); the runner
routes it to its lane like any platform message. With `wait` (the default) the answer carries
the reply; without, 202 and `status: queued` as soon as the message is durably accepted.
`unauthorized` (the `api` platform's allow list) is a 403 and a full lane queue a 429; every
other outcome of the turn (`failed`, `interrupted`, `duplicate`, `command`) is a 200 whose
`status` says what happened, because the request itself was fine.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from fastapi import APIRouter, Depends, Response

from sessiongate.api.auth import require_operator

# FastAPI reads the dependency annotations at run time.
from sessiongate.api.deps import ConfigDep, MetricsDep, RunnerDep  # noqa: TC001
from sessiongate.api.errors import ApiError
from sessiongate.api.responses import errors
from sessiongate.api.schemas import MessageIn, MessageOut
from sessiongate.core.platform import Platform
from sessiongate.core.source import SessionSource
from sessiongate.errors import QueueFullError, StoreUnavailableError, UnauthorizedError
from sessiongate.gateway import MessageEvent

__all__ = ["router", "source_of"]

router = APIRouter(prefix="/v1", tags=["messages"], dependencies=[Depends(require_operator)])

# Every SessionSource field a client may set: the platform is always `api`, and
# `role_authorized` is granted by adapters, never claimed by a request body.
_SOURCE_FIELDS = tuple(
    f.name
    for f in dataclasses.fields(SessionSource)
    if f.name not in ("platform", "role_authorized")
)


def source_of(body: MessageIn) -> SessionSource:
    """The session source of an API message; `role_authorized` is never taken from a body."""
    fields: dict[str, Any] = {name: getattr(body, name) for name in _SOURCE_FIELDS}
    return SessionSource(platform=Platform.API, **fields)


@router.post(
    "/messages",
    response_model=MessageOut,
    responses={
        202: {"model": MessageOut, "description": "Accepted and queued (`wait: false`)"},
        **errors(400, 401, 403, 413, 415, 422, 429),
    },
    summary="Send a message to the agent on the api platform",
)
async def post_message(
    body: MessageIn,
    response: Response,
    runner: RunnerDep,
    config: ConfigDep,
    metrics: MetricsDep,
) -> MessageOut:
    limit = config.api.max_message_chars
    if len(body.text) > limit:
        raise ApiError(413, "message_too_long", f"the text is longer than {limit} characters")
    event = MessageEvent(
        source=source_of(body),
        text=body.text,
        message_id=body.message_id,
        reply_to=body.reply_to,
    )
    started = time.perf_counter()
    receipt = await runner.handle_message(event, wait=body.wait)
    status = str(receipt.status)
    if body.wait and status in ("replied", "failed", "interrupted"):
        metrics.turn_latency.labels(status=status).observe(time.perf_counter() - started)
    if status == "unauthorized":
        raise UnauthorizedError(
            "this sender is not allowed on the api platform", session_key=receipt.session_key
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
