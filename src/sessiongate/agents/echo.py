"""The echo agent: the default, deterministic, needs no model and no network."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sessiongate.agents.base import TurnRequest, TurnResult, Usage
from sessiongate.core.transcript import deterministic_summary, estimate_tokens
from sessiongate.core.turn_events import TextDelta, TurnEnd, UsageReport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sessiongate.core.turn_events import TurnEvent

__all__ = ["ECHO_DELTAS", "EchoAgent", "split_deltas"]

# Pieces an echo reply streams in: enough to see a reply grow and to exercise every path a
# real model's stream takes, few enough that the bench measures the gateway, not the agent.
ECHO_DELTAS = 8


def split_deltas(text: str, pieces: int = ECHO_DELTAS) -> list[str]:
    """`text` in `pieces` consecutive parts as even as possible (fewer when it is shorter)."""
    pieces = max(1, min(pieces, len(text)))
    size, extra = divmod(len(text), pieces)
    out: list[str] = []
    start = 0
    for index in range(pieces):
        end = start + size + (index < extra)
        out.append(text[start:end])
        start = end
    return out


class EchoAgent:
    """Replies `echo: <the last user text>` after `delay_seconds` (to see busy lanes by hand).

    It streams (`stream_turn`): the reply in `ECHO_DELTAS` deltas, then its usage and the end;
    `run_turn` gives the same reply whole.
    """

    def __init__(self, *, delay_seconds: float = 0.0) -> None:
        self.delay_seconds = delay_seconds
        self.turns = 0

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[TurnEvent]:
        result = await self.run_turn(request)
        for piece in split_deltas(result.text):
            yield TextDelta(piece)
        usage = result.usage
        yield UsageReport(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost_usd=0.0
        )
        yield TurnEnd(result.text)

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        if self.delay_seconds > 0:
            await asyncio.sleep(self.delay_seconds)
        self.turns += 1
        text = ""
        for message in reversed(request.messages):
            if message.get("role") == "user":
                content = message.get("content")
                text = content if isinstance(content, str) else ""
                break
        reply = f"echo: {text}"
        usage = Usage(
            input_tokens=estimate_tokens(request.messages)
            + estimate_tokens([{"role": "system", "content": request.system_prompt}]),
            output_tokens=estimate_tokens([{"role": "assistant", "content": reply}]),
        )
        return TurnResult(text=reply, usage=usage, cost_usd=0.0)

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return deterministic_summary(messages)

    async def aclose(self) -> None:
        return None
