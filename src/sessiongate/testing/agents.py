"""Scripted agents for tests: real implementations of the `Agent` protocol, no model behind.

- `ScriptedAgent(replies=[...])` streams one scripted reply per turn: a string is streamed as
  one `TextDelta`, a list is streamed part by part (strings as `TextDelta`s, turn events such
  as `MessageCompleted`, `ToolResult` or `StreamRetry` as they are); the turn ends with the
  text parts joined. It records every `TurnRequest` it served.
- `GatedAgent(parts)` streams `parts` and waits before part `i` until the test opens
  `gate(i)`, so a test can act while a reply is half-way out; `shown` receives each text
  part as it goes out.
- `HeldAgent(reply)` holds each turn until the test sets `release` (`started` is set when a
  turn begins): a lane that is busy for as long as a test needs.
- `FailingAgent(error)` ends every turn with an error code (or raises `raises`), the way a
  misconfigured or crashing agent does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from sessiongate.core.turn_events import TextDelta, TurnEnd, TurnEvent
from sessiongate.gateway.agent import TurnRequest, TurnResult

__all__ = ["FailingAgent", "GatedAgent", "HeldAgent", "Reply", "ScriptedAgent"]

# One scripted reply: its text, or its parts (text, or turn events yielded as they are).
Reply = str | Sequence[str | TurnEvent]


def _events(parts: Sequence[str | TurnEvent]) -> list[TurnEvent]:
    return [TextDelta(part) if isinstance(part, str) else part for part in parts]


def _text(parts: Sequence[str | TurnEvent]) -> str:
    return "".join(part for part in parts if isinstance(part, str))


class _QuietAgent:
    """What every scripted agent shares: a summary and a close that do nothing."""

    closed: bool = False

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return "summary"

    async def aclose(self) -> None:
        self.closed = True


class ScriptedAgent(_QuietAgent):
    """Streams the next of `replies` each turn; after the last, repeats `default`
    (or, with none, fails the test's expectation loudly)."""

    def __init__(self, replies: Sequence[Reply] = (), *, default: Reply | None = None) -> None:
        self.replies: list[Reply] = list(replies)
        self.default = default
        self.requests: list[TurnRequest] = []

    def _next(self) -> Sequence[str | TurnEvent]:
        if self.replies:
            reply = self.replies.pop(0)
        elif self.default is not None:
            reply = self.default
        else:
            raise AssertionError("the scripted agent has no reply left")
        return [reply] if isinstance(reply, str) else reply

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[TurnEvent]:
        self.requests.append(request)
        parts = self._next()
        for event in _events(parts):
            yield event
        yield TurnEnd(_text(parts))

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        self.requests.append(request)
        return TurnResult(text=_text(self._next()))


class GatedAgent(_QuietAgent):
    """Streams `parts`, waiting before part `i` until `gate(i)` is open.

    The final text is `reply`, or the text parts joined; with `fail` set the turn ends with
    `agent_misconfigured` instead.
    """

    def __init__(
        self, parts: Sequence[str | TurnEvent] = ("par", "tial", " reply"), reply: str | None = None
    ) -> None:
        self.parts: list[str | TurnEvent] = list(parts)
        self.reply = reply
        self.fail = False
        self.gates: dict[int, asyncio.Event] = {}
        self.shown: asyncio.Queue[str] = asyncio.Queue()
        self.requests: list[TurnRequest] = []

    def gate(self, index: int) -> asyncio.Event:
        return self.gates.setdefault(index, asyncio.Event())

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[TurnEvent]:
        self.requests.append(request)
        for index, part in enumerate(self.parts):
            if index in self.gates:
                await self.gates[index].wait()
            if isinstance(part, str):
                yield TextDelta(part)
                self.shown.put_nowait(part)
            else:
                yield part
        if self.fail:
            yield TurnEnd("The agent is misconfigured.", error="agent_misconfigured")
            return
        yield TurnEnd(_text(self.parts) if self.reply is None else self.reply)

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        raise AssertionError("the gateway streams agents that can")


class HeldAgent(_QuietAgent):
    """Holds each turn until `release` is set; `started` is set when a turn begins.

    `reply` is the text, or a function of the request giving it.
    """

    def __init__(self, reply: str | Callable[[TurnRequest], str] = "done") -> None:
        self.reply = reply
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.requests: list[TurnRequest] = []

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        self.requests.append(request)
        self.started.set()
        await self.release.wait()
        text = self.reply if isinstance(self.reply, str) else self.reply(request)
        return TurnResult(text=text)


class FailingAgent(_QuietAgent):
    """Ends every turn with `error` (a short code) and `text` for the user; with `raises`
    set, raises it from inside the turn instead, like an agent that crashes."""

    def __init__(
        self,
        error: str = "agent_unavailable",
        text: str = "The agent is unavailable.",
        *,
        raises: BaseException | None = None,
    ) -> None:
        self.error = error
        self.text = text
        self.raises = raises
        self.requests: list[TurnRequest] = []

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[TurnEvent]:
        self.requests.append(request)
        if self.raises is not None:
            raise self.raises
        yield TurnEnd(self.text, error=self.error, detail=self.error)

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        raise AssertionError("the gateway streams agents that can")
