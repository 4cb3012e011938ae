"""The echo agent: the default, deterministic, needs no model and no network."""

from __future__ import annotations

import asyncio
from typing import Any

from sessiongate.agents.base import TurnRequest, TurnResult, Usage
from sessiongate.core.transcript import deterministic_summary, estimate_tokens

__all__ = ["EchoAgent"]


class EchoAgent:
    """Replies `echo: <the last user text>` after `delay_seconds` (to see busy lanes by hand)."""

    def __init__(self, *, delay_seconds: float = 0.0) -> None:
        self.delay_seconds = delay_seconds
        self.turns = 0

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
