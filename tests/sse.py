"""A small server-sent-events reader over an httpx streaming response, for the tests."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    import httpx

# A hang guard for an event that never comes; never a timing assertion.
EVENT_TIMEOUT = 30.0


@dataclass(frozen=True)
class SSEEvent:
    id: str | None
    event: str
    data: dict[str, Any]


class SSEReader:
    """Frames of `response` one by one: comments skipped, `data` parsed as JSON."""

    def __init__(self, response: httpx.Response) -> None:
        self._lines: AsyncIterator[str] = response.aiter_lines()

    async def next(self, guard: float = EVENT_TIMEOUT) -> SSEEvent:
        async with asyncio.timeout(guard):
            fields: dict[str, str] = {}
            async for line in self._lines:
                if line == "":
                    if "data" in fields:
                        return SSEEvent(
                            fields.get("id"),
                            fields.get("event", "message"),
                            json.loads(fields["data"]),
                        )
                    fields = {}
                    continue
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
            raise EOFError("the stream ended")

    async def until(self, event: str, guard: float = EVENT_TIMEOUT, **match: Any) -> list[SSEEvent]:
        """Every event up to and including the first `event` whose data has `match`."""
        seen: list[SSEEvent] = []
        while True:
            got = await self.next(guard)
            seen.append(got)
            if got.event == event and all(got.data.get(k) == v for k, v in match.items()):
                return seen
