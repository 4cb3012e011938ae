"""LangGraph `SqliteSaver` (packages `langgraph`, `langgraph-checkpoint-sqlite`) as an adapter.

Driven the way LangGraph drives it: a one-node `StateGraph(MessagesState)` compiled with the
saver, invoked once per turn with that turn's messages on thread `name`. A checkpoint holds the
whole state, and each invoke writes one per super-step (input, node, end), so storage grows with
the square of a thread's length: the hot thread is capped at 1,000 messages. Reads use the
saver directly (`get_tuple`, the latest checkpoint) and slice its message list.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import durability, library


def _noop(state: MessagesState) -> dict[str, Any]:
    return {}


class LangGraphSaver:
    max_thread_messages = 1_000

    def __init__(self, work_dir: Path, options: dict[str, Any]) -> None:
        self.path = Path(work_dir) / "langgraph.db"
        self.conn = sqlite3.connect(str(self.path), check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()
        graph = StateGraph(MessagesState)
        graph.add_node("agent", _noop)
        graph.add_edge(START, "agent")
        graph.add_edge("agent", END)
        self.graph = graph.compile(checkpointer=self.saver)

    @staticmethod
    def _config(name: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": name}}

    def create_session(self, name: str) -> str:
        return name  # a thread exists once its first checkpoint is written

    def open_session(self, name: str) -> str:
        return name

    def append(self, handle: str, messages: list[dict[str, str]]) -> None:
        batch: list[BaseMessage] = [
            HumanMessage(content=m["content"])
            if m["role"] == "user"
            else AIMessage(content=m["content"])
            for m in messages
        ]
        self.graph.invoke({"messages": batch}, self._config(handle))

    def _messages(self, name: str) -> list[BaseMessage]:
        found = self.saver.get_tuple(self._config(name))
        if found is None:
            return []
        return list(found.checkpoint["channel_values"].get("messages", []))

    def tail(self, handle: str, n: int) -> list[BaseMessage]:
        return self._messages(handle)[-n:]

    def load_all(self, handle: str) -> list[BaseMessage]:
        return self._messages(handle)

    def text(self, item: BaseMessage) -> str:
        return str(item.content)

    def files(self) -> list[Path]:
        return [self.path]

    def describe(self) -> dict[str, Any]:
        return {
            "library": library("langgraph", "langgraph-checkpoint-sqlite"),
            **durability(self.path),
        }

    def close(self) -> None:
        self.conn.close()
