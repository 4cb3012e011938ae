"""The child process of `test_crash.py`: a gateway on a real home, killed by the test.

    python crash_child.py HOME crash        accept a mix of messages, then wait to be killed
    python crash_child.py HOME hang [send]  every turn hangs; `send` sends one message first

Events go to stdout, one flushed line each: `RUNNING <turn_id> <text>` when a turn reaches the
agent, `SENT <chat_id> <turn_id> <text>` when a reply is delivered, `HOLD <turn_id>` when a
delivery hangs (chat `d`), `READY` when every crash-scenario message is in flight, `IDLE` when
the runner has nothing left to do.
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

CONFIG = GatewayConfig(busy_input_mode="queue")


def emit(*parts: object) -> None:
    print(*parts, flush=True)


class SlowAgent:
    """Replies at once, except to texts starting with `slow` (or always, when `hang`)."""

    def __init__(self, hang: bool, started: asyncio.Queue[int]) -> None:
        self.hang = hang
        self.started = started

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        text = str(request.messages[-1]["content"])
        if self.hang or text.startswith("slow"):
            emit("RUNNING", request.turn_id, text)
            self.started.put_nowait(request.turn_id or 0)
            await asyncio.Event().wait()
        return TurnResult(text=f"re: {text}")

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return ""

    async def aclose(self) -> None:
        return None


class PrintingAdapter(LoopbackAdapter):
    def __init__(self, held: asyncio.Queue[int]) -> None:
        super().__init__()
        self.held = held

    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> None:
        if source.chat_id == "d":  # this platform never confirms: the reply stays `replied`
            emit("HOLD", turn_id)
            self.held.put_nowait(turn_id or 0)
            await asyncio.Event().wait()
        emit("SENT", source.chat_id, turn_id, text.replace("\n", " "))


async def main(home: Path, scenario: str, send: bool) -> None:
    started: asyncio.Queue[int] = asyncio.Queue()
    held: asyncio.Queue[int] = asyncio.Queue()
    store = SessionStore(home / "sessions", CONFIG)
    adapter = PrintingAdapter(held)
    runner = GatewayRunner(
        store,
        CONFIG,
        home=home,
        agent_factory=lambda _key: SlowAgent(scenario == "hang", started),
        adapters=[adapter],
    )
    await runner.start()
    if scenario == "crash":
        await adapter.receive("fast b1", chat_id="b", message_id="b1")
        await adapter.receive("d1", chat_id="d", message_id="d1", wait=False)
        await adapter.receive("slow a1", chat_id="a", message_id="a1", wait=False)
        await started.get()  # a1 runs, so a2 waits in the slot instead of merging with it
        await adapter.receive("a2", chat_id="a", message_id="a2", wait=False)
        await adapter.receive("/queue a3", chat_id="a", message_id="a3", wait=False)
        await adapter.receive("slow c1", chat_id="c", message_id="c1", wait=False)
        await started.get()
        await held.get()
        emit("READY")
        await asyncio.Event().wait()
    if send:
        await adapter.receive("reboot the server", chat_id="x", message_id="x1", wait=False)
    await runner.wait_idle()
    emit("IDLE")
    await runner.stop()
    store.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], "send" in sys.argv[3:]))
