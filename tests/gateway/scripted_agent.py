"""A scripted streaming agent for the crash tests: five tool calls, then a reply.

`ScriptedAgent` implements `stream_turn`. For each of its five steps whose result the turn's
context does not hold yet, it completes an assistant message calling the `step` tool, runs
the tool (one line appended and fsynced to `side_file`: the record of what really ran), and
yields its result. On a first attempt (no resume note) it hangs inside step `hang_at`, after
the call is stored and the tool has started: the moment the test kills the process. Loaded by
the child gateway process through its import path, `scripted_agent:ScriptedAgent`.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import TYPE_CHECKING, Any

from sessiongate.core.turn_events import MessageCompleted, TextDelta, ToolResult, TurnEnd

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from sessiongate.gateway.agent import TurnRequest

STEPS = 5
REPLY = "all five steps done"


def emit(*parts: object) -> None:
    print(*parts, flush=True)


class ScriptedAgent:
    def __init__(self, side_file: Path, *, hang_at: int | None = 4) -> None:
        self.side_file = side_file
        self.hang_at = hang_at

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[Any]:
        emit("NOTE", json.dumps(request.resume_note))
        answered = {m.get("tool_call_id") for m in request.messages if m.get("role") == "tool"}
        for step in range(1, STEPS + 1):
            call_id = f"call_{step}"
            if call_id in answered:
                continue
            yield TextDelta(f"step {step}")
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": "step", "arguments": json.dumps({"n": step})},
            }
            yield MessageCompleted({"role": "assistant", "content": None, "tool_calls": [call]})
            self._run_tool(step)
            if step == self.hang_at and request.resume_note is None:
                emit("HANG", step)
                await asyncio.Event().wait()
            yield ToolResult(call_id, "step", f"step {step} done")
            emit("DONE", step)
        yield TextDelta(REPLY)
        yield TurnEnd(REPLY)

    def _run_tool(self, step: int) -> None:
        with self.side_file.open("a") as side:
            side.write(f"{step}\n")
            side.flush()
            os.fsync(side.fileno())

    async def run_turn(self, request: TurnRequest) -> Any:
        raise AssertionError("the gateway streams agents that can")

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return ""

    async def aclose(self) -> None:
        return None
