"""A compiled LangGraph graph served as a sessiongate agent (`[langgraph]`).

The graph's state has a `messages` key (LangChain messages). A turn streams
`graph.astream(..., stream_mode=["messages", "updates"])` with `thread_id` = the session id:
the model's tokens become text deltas, and every message a node returns (an AI message with
its tool calls, a tool message) is stored the moment its node finishes.

Which history is the source of truth:

- **no checkpointer** (the usual case): the graph gets the transcript's model context (after
  resets, compactions and rewinds), the session context as a system message, and the new user
  message. The transcript is the one history.
- **the graph has its own checkpointer**: the graph keeps its history in its checkpoints, by
  `thread_id`, and gets only the new user message; the transcript is the record of what was
  said, and a rewind or a compaction in sessiongate does not reach the graph's checkpoints.
  The gateway says so once, when it loads the graph.

A graph that calls `interrupt()` ends the turn with `agent_interrupted` and the interrupt's
value in the detail; approvals asked in the chat will resume such graphs.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from sessiongate.agents._assembly import Assembly, as_text, split_request, summary_of
from sessiongate.core.turn_events import TextDelta, TurnEnd, UsageReport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sessiongate.agents.base import TurnResult
    from sessiongate.core.turn_events import TurnEvent
    from sessiongate.gateway.agent import TurnRequest

__all__ = ["LangGraphAgent"]

log = logging.getLogger(__name__)

FAILURE_NOTICE = "Sorry, something went wrong while answering. Please try again."
INTERRUPT_NOTICE = "The agent stopped to ask for a decision this gateway cannot take yet."


class LangGraphAgent:
    """One compiled graph serving a session."""

    def __init__(self, graph: Any, *, session_key: str | None) -> None:
        self._messages = importlib.import_module("langchain_core.messages")
        self.graph = graph
        self.checkpointed = getattr(graph, "checkpointer", None) not in (None, False)
        if self.checkpointed and session_key is None:
            log.warning(
                "langgraph graph has its own checkpointer: its checkpoints are the model's "
                "history, the transcript is kept as the record (docs/AGENTS.md)",
                extra={"graph": type(graph).__name__},
            )

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[TurnEvent]:
        lc = self._messages
        history, text = split_request(request.messages)
        if self.checkpointed:
            inputs = [lc.HumanMessage(content=text)]
        else:
            prompt = [{"role": "system", "content": request.system_prompt}]
            inputs = lc.convert_to_messages(
                [
                    *(prompt if request.system_prompt else []),
                    *history,
                    {"role": "user", "content": text},
                ]
            )
        config = {"configurable": {"thread_id": request.session_id}}
        assembly = Assembly()
        final = ""
        input_tokens = output_tokens = 0
        try:
            async for mode, chunk in self.graph.astream(
                {"messages": inputs}, config, stream_mode=["messages", "updates"]
            ):
                if mode == "messages":
                    message = chunk[0]
                    content = getattr(message, "content", None)
                    if (
                        isinstance(message, lc.AIMessageChunk)
                        and isinstance(content, str)
                        and content
                    ):
                        yield TextDelta(content)
                    continue
                if "__interrupt__" in chunk:
                    for flushed in assembly.flush():
                        yield flushed
                    detail = as_text([getattr(i, "value", i) for i in chunk["__interrupt__"]])
                    yield TurnEnd(INTERRUPT_NOTICE, error="agent_interrupted", detail=detail[:500])
                    return
                for update in chunk.values():
                    for message in (
                        (update or {}).get("messages", []) if isinstance(update, dict) else []
                    ):
                        for event in self._stored(message, assembly):
                            yield event
                        if isinstance(message, lc.AIMessage):
                            usage = message.usage_metadata or {}
                            input_tokens += int(usage.get("input_tokens", 0))
                            output_tokens += int(usage.get("output_tokens", 0))
                            if not message.tool_calls:
                                final = as_text(message.content)
        except Exception as exc:  # the graph's own failure (a node, a tool, the model)
            for flushed in assembly.flush():
                yield flushed
            log.warning(
                "langgraph run failed", extra={"detail": f"{type(exc).__name__}: {exc}"[:300]}
            )
            yield TurnEnd(
                FAILURE_NOTICE, error="agent_failed", detail=f"{type(exc).__name__}: {exc}"[:500]
            )
            return
        for flushed in assembly.flush():
            yield flushed
        yield UsageReport(input_tokens=input_tokens, output_tokens=output_tokens)
        yield TurnEnd(final)

    def _stored(self, message: Any, assembly: Assembly) -> list[TurnEvent]:
        lc = self._messages
        if isinstance(message, lc.AIMessage):
            out: list[TurnEvent] = list(assembly.text(as_text(message.content), name=message.name))
            for call in message.tool_calls:
                assembly.call(
                    str(call.get("id") or ""), str(call.get("name") or ""), call.get("args") or {}
                )
            if not message.tool_calls:
                out.extend(assembly.flush())
            return out
        if isinstance(message, lc.ToolMessage):
            failed = getattr(message, "status", "success") == "error"
            return list(
                assembly.result(str(message.tool_call_id), message.content, is_error=failed)
            )
        return []

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        from sessiongate.agents.openai_agent import collect_turn

        return await collect_turn(self.stream_turn(request))

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return summary_of(messages)

    async def aclose(self) -> None:
        return None
