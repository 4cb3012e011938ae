"""OpenAI Agents SDK `SQLiteSession` (package `openai-agents`) as a workload adapter.

One `SQLiteSession(session_id, db_path)` object per conversation, the way the SDK's examples
create them. Each object keeps a connection per worker thread until it is closed, so the adapter
keeps the 1,000 most recently used objects open and closes the rest (10,000 open sessions would
exhaust file descriptors). Its API is async; calls run on one event loop owned by the adapter.
"""

from __future__ import annotations

import asyncio
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

from agents import SQLiteSession

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import durability, library

OPEN_OBJECTS = 1_000


class OpenAIAgentsSession:
    max_thread_messages = None

    def __init__(self, work_dir: Path, options: dict[str, Any]) -> None:
        self.path = Path(work_dir) / "openai_agents.db"
        self.loop = asyncio.new_event_loop()
        self.open: OrderedDict[str, SQLiteSession] = OrderedDict()

    def _session(self, name: str, *, fresh: bool = False) -> SQLiteSession:
        session = self.open.get(name)
        if session is not None and not fresh:
            self.open.move_to_end(name)
            return session
        if session is not None:
            session.close()
        session = SQLiteSession(name, self.path)
        self.open[name] = session
        self.open.move_to_end(name)
        while len(self.open) > OPEN_OBJECTS:
            _old, evicted = self.open.popitem(last=False)
            evicted.close()
        return session

    def create_session(self, name: str) -> str:
        self._session(name)
        return name

    def open_session(self, name: str) -> str:
        # A cold open: a new object, as a request handler would create it.
        self._session(name, fresh=True)
        return name

    def append(self, handle: str, messages: list[dict[str, str]]) -> None:
        self.loop.run_until_complete(self._session(handle).add_items(messages))  # type: ignore[arg-type]

    def tail(self, handle: str, n: int) -> list[Any]:
        return self.loop.run_until_complete(self._session(handle).get_items(limit=n))

    def load_all(self, handle: str) -> list[Any]:
        return self.loop.run_until_complete(self._session(handle).get_items())

    def text(self, item: Any) -> str:
        return str(item["content"])

    def files(self) -> list[Path]:
        return [self.path]

    def describe(self) -> dict[str, Any]:
        return {"library": library("openai-agents"), **durability(self.path)}

    def close(self) -> None:
        for session in self.open.values():
            session.close()
        self.open.clear()
        self.loop.close()
