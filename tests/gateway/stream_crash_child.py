"""The child process of `test_stream_crash.py`: a gateway whose agent is loaded by import path.

    python stream_crash_child.py HOME MODULE:CLASS SIDE_FILE [send]

`MODULE:CLASS` is imported (this directory is on the path) and built as `CLASS(SIDE_FILE)`
for every session. With `send`, one message goes in first. Output, one flushed line each:
the agent's own lines, `SENT <text>` when a reply is delivered, `IDLE` when the runner has
nothing left to do (then it stops cleanly).
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.gateway import GatewayRunner

if TYPE_CHECKING:
    from sessiongate.core.source import SessionSource

CONFIG = GatewayConfig()


class PrintingAdapter(LoopbackAdapter):
    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> None:
        print("SENT", text.replace("\n", " "), flush=True)


async def main(home: Path, agent_path: str, side_file: Path, send: bool) -> None:
    module_name, _, name = agent_path.partition(":")
    agent_class = getattr(importlib.import_module(module_name), name)
    store = SessionStore(home / "sessions", CONFIG)
    adapter = PrintingAdapter()
    runner = GatewayRunner(
        store,
        CONFIG,
        home=home,
        agent_factory=lambda _key: agent_class(side_file),
        adapters=[adapter],
    )
    await runner.start()
    if send:
        await adapter.receive("do the five steps", chat_id="x", message_id="x1", wait=False)
    await runner.wait_idle()
    print("IDLE", flush=True)
    await runner.stop()
    store.close()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), "send" in sys.argv[4:]))
