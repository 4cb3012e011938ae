"""Streamed turns: one event stream per agent turn, and the watchers that follow a turn.

`agent_events` gives every agent's turn as a stream of `TurnEvent`s: an agent with
`stream_turn` is used as it is; one written to `run_turn -> TurnResult` is wrapped (its
messages, its usage, then the end), so old agents keep working unchanged.

A `TurnWatch` follows one turn for one subscriber (an SSE response, a terminal): the text
deltas, each `StreamRetry` (the message being generated starts over: the deltas since the last
message are void) and each message as it is persisted, then the turn's receipt. Deltas are not
durable and a watcher that falls behind by `DELTA_BUFFER` of them loses the newest ones
(counted), never a retry, never a message and never the end: a slow client must not slow the
turn or grow memory without bound (STYLE 5, bounded queues).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.core.turn_events import (
    MessageCompleted,
    StreamRetry,
    TextDelta,
    TurnEnd,
    UsageReport,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sessiongate.core.turn_events import TurnEvent
    from sessiongate.gateway.agent import Agent, TurnRequest
    from sessiongate.gateway.messages import Receipt

__all__ = ["DELTA_BUFFER", "StreamedMessage", "TurnWatch", "WatchEvent", "agent_events"]

# Deltas a watcher may lag behind before new ones are dropped for it: at the echo agent's 8
# a reply that is 128 replies, and at an LLM's few hundred a reply still the whole reply.
DELTA_BUFFER = 1024


@dataclass(frozen=True, slots=True)
class StreamedMessage:
    """A message of the turn as it was persisted: chat-format fields plus its entry `id`
    (None when it could not be stored yet; the outcome commit stores it)."""

    message: dict[str, Any]


WatchEvent = TextDelta | StreamRetry | StreamedMessage


def agent_events(agent: Agent, request: TurnRequest) -> AsyncIterator[TurnEvent]:
    """The agent's turn as events: `stream_turn` when the agent has it, else `run_turn`
    wrapped into a stream."""
    stream = getattr(agent, "stream_turn", None)
    if stream is not None:
        events: AsyncIterator[TurnEvent] = stream(request)
        return events
    return _wrapped(agent, request)


async def _wrapped(agent: Agent, request: TurnRequest) -> AsyncIterator[TurnEvent]:
    result = await agent.run_turn(request)
    # A wrapped agent's messages (tool calls and results) all complete at its end; each is
    # stored as it is, tool results included, so nothing of what it returned is reshaped.
    for message in result.messages:
        yield MessageCompleted(message)
    usage = result.usage
    yield UsageReport(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cost_usd=result.cost_usd,
    )
    yield TurnEnd(result.text)


class TurnWatch:
    """One subscriber's view of one turn: `TextDelta`s, `StreamRetry`s and `StreamedMessage`s
    as they happen, then the end (`receipt`, the turn's outcome as its waiters get it)."""

    __slots__ = ("_deltas", "_items", "_max_deltas", "_wake", "dropped_deltas", "receipt")

    def __init__(self, *, max_deltas: int = DELTA_BUFFER) -> None:
        self._items: deque[WatchEvent] = deque()
        self._deltas = 0
        self._max_deltas = max_deltas
        self._wake = asyncio.Event()
        self.receipt: Receipt | None = None
        self.dropped_deltas = 0

    def push(self, event: WatchEvent) -> None:
        if self.receipt is not None:
            return
        items = self._items
        if isinstance(event, TextDelta):
            if self._deltas >= self._max_deltas:
                self.dropped_deltas += 1
                return
            self._deltas += 1
        elif isinstance(event, StreamRetry):
            # The deltas of the failed attempt not yet sent are void: they are not sent at
            # all (the retry still is, for those that were).
            while items and isinstance(items[-1], TextDelta):
                items.pop()
                self._deltas -= 1
        items.append(event)
        self._wake.set()

    def finish(self, receipt: Receipt) -> None:
        """The turn ended (or the message will not run): no event follows."""
        if self.receipt is None:
            self.receipt = receipt
            self._wake.set()

    def take_nowait(self) -> list[WatchEvent]:
        """Everything pushed since the last take, at once (empty when nothing was)."""
        items = list(self._items)
        self._items.clear()
        self._deltas = 0
        return items

    async def wait_ready(self) -> None:
        """Until something was pushed since the last take, or the turn ended."""
        while not self._items and self.receipt is None:
            self._wake.clear()
            await self._wake.wait()

    async def events(self) -> AsyncIterator[WatchEvent]:
        """What happened since the last call, as it happens, until the end; `receipt` is set
        once this returns."""
        while True:
            await self.wait_ready()
            for item in self.take_nowait():
                yield item
            if self.receipt is not None and not self._items:
                return
