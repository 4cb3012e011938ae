"""Fixtures for the agent tests: the streaming fake server, and a real gateway (a
`GatewayRunner` on a real store) whose agents are OpenAI-compatible agents talking to it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from fake_openai import FakeOpenAI
from sessiongate import GatewayConfig, SessionStore
from sessiongate.agents import build_agent_factory
from sessiongate.core.source import SessionSource
from sessiongate.gateway import GatewayRunner, MessageEvent

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from sessiongate.core.clock import FakeClock

ALL_TOOLS = [
    "sessions_list",
    "sessions_history",
    "sessions_search",
    "sessions_send",
    "sessions_spawn",
]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


class Gateway:
    def __init__(self, runner: GatewayRunner, store: SessionStore, server: FakeOpenAI) -> None:
        self.runner = runner
        self.store = store
        self.server = server

    async def say(self, user: str, text: str) -> Any:
        source = SessionSource(platform="api", chat_id=user, user_id=user)
        return await self.runner.handle_message(MessageEvent(source=source, text=text))

    def key(self, user: str) -> str:
        return f"agent:main:api:dm:{user}"

    def tool_results(self, request_index: int) -> list[Any]:
        """The tool messages the model was sent in one request, contents parsed."""
        messages = self.server.requests[request_index]["body"]["messages"]
        return [json.loads(m["content"]) for m in messages if m["role"] == "tool"]


@pytest.fixture
async def make_gateway(tmp_path: Path, clock: FakeClock, server: FakeOpenAI) -> AsyncIterator[Any]:
    made: list[Gateway] = []

    async def make(*, agent: dict[str, Any] | None = None, **openai: Any) -> Gateway:
        """A started gateway; `openai` are `agent.openai` settings, `agent` other ones."""
        settings = {
            "base_url": server.base_url,
            "model": "fake-model",
            "max_retries": 0,
            "tools": ALL_TOOLS,
            **openai,
        }
        config = GatewayConfig(agent={**(agent or {}), "openai": settings})
        home = tmp_path / f"home{len(made)}"
        store = SessionStore(home / "sessions", config, clock=clock)
        runner = GatewayRunner(
            store, config, home=home, agent_factory=build_agent_factory(config), clock=clock
        )
        await runner.start()
        made.append(Gateway(runner, store, server))
        return made[-1]

    yield make
    for gateway in made:
        await gateway.runner.stop()
        gateway.store.close()
