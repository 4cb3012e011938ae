"""Server-sent events of one turn: `accepted`, `delta`, `retry`, `message`, then `done` or
`error`.

Each event is `event: <name>` and one `data:` line of JSON. `accepted` names the session and
the turn; `delta` carries a piece of the reply text (not durable: a slow client may miss some,
see `gateway.streams.DELTA_BUFFER`); `retry` (`attempt`, `reason`) says the message being
generated starts over (the agent's model call is retried after its stream broke): the text of
the `delta`s since the last `message` is void and the next deltas replace it; `message` is a
message of the turn as it was stored (`id`, `role`, `content`, and `tool_calls` /
`tool_call_id` / `name` when present); the last event is `done` (`status`, `reply`,
`turn_id`) for a turn that replied or was interrupted (and for a message that ran no turn: a
duplicate, a command), or `error` (`code`, `message`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.responses import StreamingResponse

from sessiongate.core.jsontext import json_encoder
from sessiongate.core.turn_events import StreamRetry, TextDelta

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.types import Send

    from sessiongate.gateway.messages import Receipt
    from sessiongate.gateway.streams import TurnWatch, WatchEvent

__all__ = ["HeldStartResponse", "sse_event", "turn_events"]

# The receipt statuses that end a stream with `error`, and the code each one gets.
_ERROR_CODES = {"failed": "turn_failed", "unavailable": "unavailable"}
_MESSAGE_FIELDS = ("tool_calls", "tool_call_id", "name")


# One encoder for every event (`core/jsontext.py`): building one per call was a good part of
# a delta's cost.
_to_json = json_encoder(default=str)


def sse_event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {_to_json(data)}\n\n"


class HeldStartResponse(StreamingResponse):
    """A stream whose status line and headers leave with its first chunk, not before it.

    A turn's first chunk (`accepted` and, most often, the first deltas) is ready one pass of
    the loop later; sent back to back, the headers and it reach the client together, which
    reads them in one wake-up instead of two (and the server makes its two writes in one
    step). Each wake-up on a busy machine is a chance to wait for a core.
    """

    async def stream_response(self, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        started = False
        async for chunk in self.body_iterator:
            body = chunk if isinstance(chunk, bytes | memoryview) else chunk.encode(self.charset)
            if not started:
                started = True
                await send({**start, "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": body, "more_body": True})
        if not started:
            await send({**start, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _message(message: dict[str, Any]) -> dict[str, Any]:
    out = {"id": message.get("id"), "role": message["role"], "content": message.get("content")}
    for name in _MESSAGE_FIELDS:
        if message.get(name) is not None:
            out[name] = message[name]
    return out


async def turn_events(accepted: Receipt, watch: TurnWatch | None) -> AsyncIterator[str]:
    """The SSE body of a message accepted with `accepted`; `watch` follows its turn (None
    when the message ran no turn of its own: the receipt is already the end).

    Each chunk holds every event that is ready when it is written, so events that happen
    together leave in one write: a socket write (and the client's wake-up for it) costs more
    than encoding a few events, and it was most of the time to a first delta.
    """
    head = sse_event(
        "accepted",
        {
            "session_key": accepted.session_key,
            "session_id": accepted.session_id,
            "turn_id": accepted.turn_id,
        },
    )
    if watch is None:
        yield head + _end(accepted, accepted)
        return
    # One pass of the loop first: the lane's worker is ready to start the turn, and what it
    # publishes at once (the user message, an agent's first deltas) leaves with `accepted`.
    await asyncio.sleep(0)
    chunk = [head]
    while True:
        chunk.extend(_encode(event) for event in watch.take_nowait())
        if watch.receipt is not None:
            chunk.append(_end(watch.receipt, accepted))
            yield "".join(chunk)
            return
        if chunk:
            yield "".join(chunk)
            chunk = []
        await watch.wait_ready()


def _encode(event: WatchEvent) -> str:
    if isinstance(event, TextDelta):
        return sse_event("delta", {"text": event.text})
    if isinstance(event, StreamRetry):
        return sse_event("retry", {"attempt": event.attempt, "reason": event.reason})
    return sse_event("message", _message(event.message))


def _end(end: Receipt, accepted: Receipt) -> str:
    status = str(end.status)
    code = _ERROR_CODES.get(status)
    if code is not None:
        return sse_event("error", {"code": code, "message": end.reply or status})
    return sse_event(
        "done",
        {"status": status, "reply": end.reply, "turn_id": end.turn_id or accepted.turn_id},
    )
