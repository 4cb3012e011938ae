"""`GET /v1/events`: the live feed (`gateway/feed.py`) as server-sent events.

Each event is one frame: `id: <epoch>-<seq>`, `event: <type>`, and one `data:` line of JSON
(`id`, `type`, `at`, `session_key`, and the type's fields). A client that reconnects with
`Last-Event-ID` gets every event it missed while the feed still holds it; otherwise (the
gateway restarted, the id is too old, the client fell too far behind) a `reset` event tells it
to refetch what it shows, and the stream goes on from there. A comment line is sent after
`feed.keepalive_seconds` without events, so proxies keep the connection open; a busy feed is
sent in batches at most every `feed.batch_seconds`.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import StreamingResponse

from sessiongate.api.auth import require_operator

# FastAPI reads the dependency annotations at run time.
from sessiongate.api.deps import ConfigDep, RunnerDep  # noqa: TC001
from sessiongate.api.responses import errors
from sessiongate.core.keys import check_key_text
from sessiongate.gateway.feed import Reset, join_frames

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sessiongate.gateway.feed import Subscription

__all__ = ["event_stream", "router"]

router = APIRouter(prefix="/v1", tags=["events"], dependencies=[Depends(require_operator)])

_OPENING = b"retry: 2000\n: connected\n\n"
_KEEPALIVE = b": keepalive\n\n"
# Events in one write at most; a full one is followed at once by the next.
_BATCH_EVENTS = 500


@router.get(
    "/events",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "The event stream"},
        **errors(400, 401, 422),
    },
    summary="The live feed of session, transcript, turn and queue changes (SSE)",
)
async def events(
    runner: RunnerDep,
    config: ConfigDep,
    session_key: Annotated[
        str | None, Query(description="only the events of this session key")
    ] = None,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            max_length=200,
            description="the id of the last event received; missed events are replayed",
        ),
    ] = None,
) -> StreamingResponse:
    key = None if session_key is None else check_key_text(session_key)
    sub = runner.feed.subscribe(last_event_id=last_event_id, session_key=key)
    return StreamingResponse(
        event_stream(sub, keepalive=config.feed.keepalive_seconds, batch=config.feed.batch_seconds),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def event_stream(
    sub: Subscription, *, keepalive: float, batch: float = 0.0
) -> AsyncIterator[bytes]:
    """The bytes of the stream: an opening, then frames as events come; ends with the feed.

    The first event after a quiet spell goes out at once; after each write the stream waits
    for the next multiple of `batch` seconds on the loop's clock, so a burst goes out in a few
    large writes instead of one per commit (each wake-up of a subscriber is time the turns'
    event loop does not have), and every busy stream wakes at the same instant: one pass of
    the loop serves them all.
    """
    loop = asyncio.get_running_loop()
    try:
        yield _OPENING
        while True:
            try:
                async with asyncio.timeout(keepalive):
                    got = await sub.next_batch(limit=_BATCH_EVENTS)
            except TimeoutError:
                yield _KEEPALIVE
                continue
            if got is None:
                return
            if isinstance(got, Reset):
                yield got.frame()
            else:
                yield join_frames(got)
                if len(got) >= _BATCH_EVENTS:
                    continue  # more is waiting: no pause while catching up
            if batch:
                await asyncio.sleep(batch - loop.time() % batch)
    finally:
        sub.close()
