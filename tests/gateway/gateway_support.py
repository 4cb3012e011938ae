"""Agents the gateway tests drive, and the bundle a test gets (`Gateway`).

`Hub` agents never sleep: a turn either replies at once or, with `hub.blocking`, waits until the
test calls `hub.release()`; `await hub.next_started()` waits until a turn has reached the agent.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.agents.base import TurnRequest, TurnResult, Usage

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate import GatewayConfig, SessionStore
    from sessiongate.adapters.loopback import LoopbackAdapter
    from sessiongate.gateway import GatewayRunner
    from sessiongate.store.lanes import LaneStore

# A safety net so a broken runner fails the test instead of hanging it; never a timing check.
HANG_GUARD_SECONDS = 10.0


class Hub:
    def __init__(self) -> None:
        self.blocking = False
        self.hang = False  # never finish; only cancellation ends the turn
        self.fail: BaseException | None = None
        self.extra_messages: list[dict[str, Any]] = []
        self.requests: list[TurnRequest] = []
        self.cancelled: list[int | None] = []
        self.active: dict[str, int] = defaultdict(int)
        self.max_active: dict[str, int] = defaultdict(int)
        self.closed = 0
        # Compaction: what `summarize` was given, and a gate that holds it until opened.
        self.summarized: list[list[dict[str, Any]]] = []
        self.summary_gate: asyncio.Event | None = None
        self.summary_started = asyncio.Event()
        self.summary_fail: BaseException | None = None
        self._started: asyncio.Queue[TurnRequest] = asyncio.Queue()
        self._releases: dict[int | None, asyncio.Event] = {}

    def factory(self, key: str) -> HubAgent:
        return HubAgent(self, key)

    async def next_started(self) -> TurnRequest:
        return await asyncio.wait_for(self._started.get(), HANG_GUARD_SECONDS)

    def release(self, turn_id: int | None = None) -> None:
        """Let one blocked turn finish (the oldest waiting one without an id)."""
        if turn_id is None:
            waiting = [t for t, e in self._releases.items() if not e.is_set()]
            turn_id = waiting[0]
        self._releases.setdefault(turn_id, asyncio.Event()).set()

    def release_all(self) -> None:
        self.blocking = False
        self.hang = False
        for event in self._releases.values():
            event.set()
        if self.summary_gate is not None:
            self.summary_gate.set()

    def user_texts(self) -> list[str]:
        return [str(r.messages[-1]["content"]) for r in self.requests]


class HubAgent:
    def __init__(self, hub: Hub, key: str) -> None:
        self.hub = hub
        self.key = key

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        hub = self.hub
        hub.requests.append(request)
        hub.active[self.key] += 1
        hub.max_active[self.key] = max(hub.max_active[self.key], hub.active[self.key])
        try:
            hub._started.put_nowait(request)
            if hub.hang:
                await asyncio.Event().wait()
            if hub.blocking:
                event = hub._releases.setdefault(request.turn_id, asyncio.Event())
                await event.wait()
            if hub.fail is not None:
                raise hub.fail
            text = request.messages[-1]["content"]
            return TurnResult(
                text=f"re: {text}",
                usage=Usage(input_tokens=10, output_tokens=5),
                cost_usd=0.01,
                messages=list(hub.extra_messages),
            )
        except asyncio.CancelledError:
            hub.cancelled.append(request.turn_id)
            raise
        finally:
            hub.active[self.key] -= 1

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        hub = self.hub
        hub.summarized.append(messages)
        hub.summary_started.set()
        if hub.summary_gate is not None:
            await hub.summary_gate.wait()
        if hub.summary_fail is not None:
            raise hub.summary_fail
        return "summary"

    async def aclose(self) -> None:
        self.hub.closed += 1


@dataclass
class Gateway:
    runner: GatewayRunner
    store: SessionStore
    adapter: LoopbackAdapter
    hub: Hub
    home: Path
    config: GatewayConfig

    @property
    def lanes(self) -> LaneStore:
        return self.runner.lane_store

    def key(self, chat_id: str = "chat") -> str:
        return self.store.get_or_create_session(self.adapter.source(chat_id)).session_key

    def transcript(self, chat_id: str = "chat") -> list[tuple[str, str]]:
        entry = self.store.get_session(f"agent:main:telegram:dm:{chat_id}")
        assert entry is not None
        return [(m["role"], m["content"]) for m in self.store.load_transcript(entry.session_id)]


async def settle(rounds: int = 20) -> None:
    """Let ready tasks run (a scheduling yield, not a wait for time)."""
    for _ in range(rounds):
        await asyncio.sleep(0)
