"""The child process of `test_job_crash.py`: a gateway with one job, killed by the test.

    python job_crash_child.py HOME hang   the job's turn hangs (`RUNNING <turn_id>`)
    python job_crash_child.py HOME run    turns reply; `IDLE` once the runner has nothing left

The job is run through a claim made beforehand (as `sessiongate jobs run-now` makes it), so
the child's first scheduler tick hands it off. `SENT <turn_id> <text>` when a reply is sent.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.agents.base import TurnRequest, TurnResult
from sessiongate.gateway import GatewayRunner

if TYPE_CHECKING:
    from sessiongate.core.source import SessionSource

JOB = {"id": "digest", "every": "1d", "deliver_to": "telegram:chat", "prompt": "digest"}
CONFIG = GatewayConfig(jobs=[JOB])


def emit(*parts: object) -> None:
    print(*parts, flush=True)


class Agent:
    def __init__(self, hang: bool) -> None:
        self.hang = hang

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        emit("RUNNING", request.turn_id)
        if self.hang:
            await asyncio.Event().wait()
        return TurnResult(text=f"re: {request.messages[-1]['content']}")

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return ""

    async def aclose(self) -> None:
        return None


class PrintingAdapter(LoopbackAdapter):
    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> None:
        emit("SENT", turn_id, text)


async def main(home: Path, scenario: str) -> None:
    store = SessionStore(home / "sessions", CONFIG)
    runner = GatewayRunner(
        store,
        CONFIG,
        home=home,
        agent_factory=lambda _key: Agent(scenario == "hang"),
        adapters=[PrintingAdapter()],
    )
    await runner.start()
    await runner.jobs.tick()
    if scenario == "hang":
        await asyncio.Event().wait()
    await runner.wait_idle()
    emit("IDLE")
    await runner.stop()
    store.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
