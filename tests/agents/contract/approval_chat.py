"""A chat on a real gateway for the approval tests: a loopback Telegram chat, a real store
and the fake clock, with the agent the configuration names."""

from __future__ import annotations

import asyncio
import json
import re

from fake_openai import Call
from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.agents import build_agent_factory
from sessiongate.gateway import GatewayRunner

PROMPT_ID = re.compile(r"/approve ([0-9a-f]+)")
DELETE = Call("delete_file", json.dumps({"path": "/srv/data"}), id="call_del")
GUARD = 30  # a hang guard for a condition that never comes true, never a timing assertion


async def until(predicate) -> None:
    async with asyncio.timeout(GUARD):
        for _ in iter(lambda: bool(predicate()), True):
            await asyncio.sleep(0.005)


class Chat:
    def __init__(self, tmp_path, clock, config: GatewayConfig) -> None:
        self.config = config
        self.home = tmp_path / "home"
        self.clock = clock
        self.store = SessionStore(self.home / "sessions", config, clock=clock)
        self.adapter = LoopbackAdapter()
        self.runner = self._runner()

    def _runner(self) -> GatewayRunner:
        return GatewayRunner(
            self.store,
            self.config,
            home=self.home,
            clock=self.clock,
            agent_factory=build_agent_factory(self.config),
            adapters=[self.adapter],
        )

    def send(self, text: str) -> asyncio.Task:
        return asyncio.create_task(self.adapter.receive(text, chat_id="alice"))

    async def say(self, text: str):
        return await self.send(text)

    def prompts(self) -> list[str]:
        return [t for t in self.adapter.texts() if t.startswith("Approval needed")]

    async def prompt_id(self) -> str:
        await until(lambda: self.prompts())
        match = PROMPT_ID.search(self.prompts()[0])
        assert match is not None
        return match.group(1)

    async def restart(self) -> None:
        await self.runner.stop()
        self.adapter = LoopbackAdapter()
        self.runner = self._runner()
        await self.runner.start()

    def messages(self, key: str) -> list[dict]:
        entry = self.store.get_session(key)
        return [e for e in self.store.load_transcript(entry.session_id) if e.get("role")]


def tool_results(server, request: int) -> list[str]:
    return [
        str(m["content"])
        for m in server.requests[request]["body"]["messages"]
        if m["role"] == "tool"
    ]
