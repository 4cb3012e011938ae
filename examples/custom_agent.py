"""Writing an agent: an order-desk bot as a plain `Agent`, run end to end in this process.

    python examples/custom_agent.py

The agent gets each turn's model context (the conversation so far, the new user message
last) and returns its reply; the gateway does the rest: routing, the durable transcript, one
turn at a time per chat, recovery. Here a loopback platform stands in for Telegram, so the
script needs no account; with a real platform the agent is the same (pass the same factory
to `GatewayRunner`, or load it from the configuration once agents can be named by entry
point).
"""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.agents import TurnRequest, TurnResult
from sessiongate.gateway import GatewayRunner

ORDERS = {"1001": "shipped on Monday", "1002": "waiting for stock"}


class OrderDeskAgent:
    """Answers order questions from the conversation: it remembers the last order asked about."""

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        asked = [
            m["content"] for m in request.messages if m.get("role") == "user" and m.get("content")
        ]
        for text in reversed(asked):
            match = re.search(r"#?(\d{4})", str(text))
            if match:
                order = match.group(1)
                status = ORDERS.get(order, "not an order I know")
                return TurnResult(text=f"Order {order}: {status}.")
        return TurnResult(text="Which order? Send its number, like #1001.")

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return f"{len(messages)} messages about orders"

    async def aclose(self) -> None:
        return None


async def converse(home: Path, lines: list[str]) -> list[str]:
    """Run a gateway on `home` and send `lines` as one Telegram user; returns the bot's replies."""
    config = GatewayConfig()
    adapter = LoopbackAdapter("telegram")
    with SessionStore(home / "sessions", config) as store:
        runner = GatewayRunner(
            store, config, home=home, agent_factory=lambda key: OrderDeskAgent(), adapters=[adapter]
        )
        await runner.start()
        try:
            for line in lines:
                await adapter.receive(line, chat_id="alice")
        finally:
            await runner.stop()
    return adapter.texts("alice")


def main() -> None:
    lines = sys.argv[1:] or ["hi, where is my parcel?", "it is #1001", "and is it still on time?"]
    with tempfile.TemporaryDirectory() as tmp:
        for said, answer in zip(lines, asyncio.run(converse(Path(tmp), lines)), strict=True):
            print(f"you> {said}\nbot> {answer}")


if __name__ == "__main__":
    main()
