"""Server-Sent Events, read line by line (the WHATWG event-stream format, as signal-cli writes
it): `id:`, `event:` and `data:` fields, an empty line ends an event, `:` starts a comment.

Comments are yielded too (as `SseEvent(comment=True)`): signal-cli's keep-alives are comments,
and the receiver's watchdog counts them as signs of life, which a client library that drops
them could not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ["SseEvent", "iter_events"]


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str = "message"
    data: str = ""
    id: str | None = None
    comment: bool = False


async def iter_events(lines: AsyncIterator[str]) -> AsyncIterator[SseEvent]:
    """The events (and comments) of a stream given as its lines, without line endings."""
    event, event_id = "", None
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r\n")
        if not line:
            if data or event:
                yield SseEvent(event=event or "message", data="\n".join(data), id=event_id)
            event, data = "", []
            continue
        if line.startswith(":"):
            yield SseEvent(comment=True, data=line[1:].strip())
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\x00" not in value:
            # The id outlives its event: it is what a reconnect sends as Last-Event-ID.
            event_id = value
