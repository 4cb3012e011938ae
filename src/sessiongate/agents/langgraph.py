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

A graph that calls `interrupt()` asks for approval through the gateway and is resumed with
the decision (`langgraph_approvals.py`).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from sessiongate.agents._approvals import decide
from sessiongate.agents._assembly import Assembly, as_text, split_request, summary_of
from sessiongate.agents.langgraph_approvals import (
    NODE_KEY,
    asked_of,
    named_calls,
    paused_before,
    resume_value,
    tool_nodes,
    with_memory,
)
from sessiongate.core.turn_events import TextDelta, TurnEnd, UsageReport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sessiongate.agents.base import TurnResult
    from sessiongate.core.turn_events import TurnEvent
    from sessiongate.gateway.agent import TurnRequest

__all__ = ["LangGraphAgent"]

log = logging.getLogger(__name__)

FAILURE_NOTICE = "Sorry, something went wrong while answering. Please try again."


class _Totals:
    """What the turn's messages add up to: the final text and the tokens."""

    def __init__(self) -> None:
        self.final = ""
        self.input_tokens = 0
        self.output_tokens = 0


def _chat_calls(message: Any) -> list[dict[str, Any]]:
    """An AI message's tool calls in the transcript's chat format."""
    return [
        {
            "id": str(call.get("id") or ""),
            "type": "function",
            "function": {"name": str(call.get("name") or ""), "arguments": as_text(call["args"])},
        }
        for call in message.tool_calls
    ]


def _call_name(call: dict[str, Any]) -> str:
    return str((call.get("function") or {}).get("name") or "")


def _api_message(message: dict[str, Any]) -> dict[str, Any]:
    """A stored message as LangChain converts it (our own fields left out)."""
    return {k: v for k, v in message.items() if k in ("role", "content", "name", "tool_calls")}


class LangGraphAgent:
    """One compiled graph serving a session."""

    def __init__(self, graph: Any, *, session_key: str | None) -> None:
        self._messages = importlib.import_module("langchain_core.messages")
        self._types = importlib.import_module("langgraph.types")
        self.graph = graph
        self.checkpointed = getattr(graph, "checkpointer", None) not in (None, False)
        if self.checkpointed and session_key is None:
            log.warning(
                "langgraph graph has its own checkpointer: its checkpoints are the model's "
                "history, the transcript is kept as the record (docs/AGENTS.md)",
                extra={"graph": type(graph).__name__},
            )

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[TurnEvent]:
        graph = self.graph if self.checkpointed else with_memory(self.graph)
        config = {"configurable": {"thread_id": request.session_id}}
        assembly = Assembly()
        totals = _Totals()
        approvals = request.approvals
        breakpoints = tool_nodes(graph) if approvals is not None and approvals.named() else {}
        try:
            run_input, interrupts = await self._start(graph, request, config, assembly)
            if run_input is None and not interrupts:
                # State put back from the transcript stands before the tool node: a call
                # `approvals.tools` names is asked again here (the run would not pause).
                node = await paused_before(graph, config, breakpoints)
                if node is not None:
                    for event in await named_calls(
                        graph, config, node, breakpoints[node], assembly, approvals
                    ):
                        yield event
            while True:
                if interrupts:
                    for flushed in assembly.flush():  # the calls are stored before asked
                        yield flushed
                    asked = asked_of(interrupts, assembly.last_calls)
                    refusals = await decide(
                        request.approvals, [(a.call_id, a.tool, a.arguments) for a in asked]
                    )
                    run_input = self._types.Command(resume=resume_value(asked, refusals))
                    interrupts = []
                async for mode, chunk in graph.astream(
                    run_input,
                    config,
                    stream_mode=["messages", "updates"],
                    interrupt_before=list(breakpoints) or None,
                ):
                    if mode == "messages":
                        delta = self._delta(chunk[0])
                        if delta is not None:
                            yield delta
                        continue
                    if "__interrupt__" in chunk:
                        interrupts.extend(chunk["__interrupt__"])
                        continue
                    for node, update in chunk.items():
                        for message in (
                            (update or {}).get("messages", []) if isinstance(update, dict) else []
                        ):
                            for event in self._stored(message, assembly, node, totals):
                                yield event
                if interrupts:
                    continue
                node = await paused_before(graph, config, breakpoints)
                if node is None:
                    break
                for flushed in assembly.flush():  # the calls are stored before asked
                    yield flushed
                for event in await named_calls(
                    graph, config, node, breakpoints[node], assembly, approvals
                ):
                    yield event
                run_input = None
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
        yield UsageReport(input_tokens=totals.input_tokens, output_tokens=totals.output_tokens)
        yield TurnEnd(totals.final)

    async def _start(
        self, graph: Any, request: TurnRequest, config: dict[str, Any], assembly: Assembly
    ) -> tuple[Any, list[Any]]:
        """The graph's first input, and the interrupts a resumed turn asks again first."""
        lc = self._messages
        history, text = split_request(request.messages)
        resumed = request.awaiting is not None or request.resume_note is not None
        if self.checkpointed and resumed:
            # The graph's own checkpoints hold the paused run: its interrupts are asked again
            # (the same approvals) and it resumes from them.
            state = await graph.aget_state(config)
            pending = list(getattr(state, "interrupts", ()) or ())
            if pending or state.next:  # paused by `interrupt()`, or before a tool node
                messages = (state.values or {}).get("messages") or []
                last = messages[-1] if messages else None
                if isinstance(last, lc.AIMessage):
                    assembly.last_calls = _chat_calls(last)
                    for call in assembly.last_calls:
                        assembly.known(call["id"], call["function"]["name"])
                return None, pending
        if request.awaiting is not None and not self.checkpointed:
            # The turn's in-memory checkpoint went with the restart: the state is put back
            # from the transcript, as the node that produced the waiting message left it.
            awaiting = request.awaiting
            earlier = list(request.messages)
            tail = earlier[-1] if earlier else {}
            if (
                tail.get("role") == "assistant"
                and not tail.get("tool_calls")
                and tail.get("content") == awaiting.get("content")
            ):
                earlier.pop()  # the model context kept its text without the open calls
            prompt = [{"role": "system", "content": request.system_prompt}]
            restored = lc.convert_to_messages(
                [*(prompt if request.system_prompt else []), *earlier, _api_message(awaiting)]
            )
            node = (awaiting.get("metadata") or {}).get(NODE_KEY)
            await graph.aupdate_state(config, {"messages": restored}, as_node=node)
            assembly.last_calls = list(awaiting.get("tool_calls") or [])
            for call in assembly.last_calls:
                assembly.known(str(call.get("id") or ""), _call_name(call))
            return None, []
        if self.checkpointed:
            return {"messages": [lc.HumanMessage(content=text)]}, []
        prompt = [{"role": "system", "content": request.system_prompt}]
        inputs = lc.convert_to_messages(
            [
                *(prompt if request.system_prompt else []),
                *history,
                {"role": "user", "content": text},
            ]
        )
        return {"messages": inputs}, []

    def _delta(self, message: Any) -> TextDelta | None:
        content = getattr(message, "content", None)
        if isinstance(message, self._messages.AIMessageChunk) and isinstance(content, str):
            return TextDelta(content) if content else None
        return None

    def _stored(
        self, message: Any, assembly: Assembly, node: str, totals: _Totals
    ) -> list[TurnEvent]:
        lc = self._messages
        if isinstance(message, lc.AIMessage):
            out: list[TurnEvent] = list(assembly.text(as_text(message.content), name=message.name))
            for call in message.tool_calls:
                assembly.call(
                    str(call.get("id") or ""), str(call.get("name") or ""), call.get("args") or {}
                )
            usage = message.usage_metadata or {}
            totals.input_tokens += int(usage.get("input_tokens", 0))
            totals.output_tokens += int(usage.get("output_tokens", 0))
            if message.tool_calls:
                assembly.note(NODE_KEY, node)
            else:
                totals.final = as_text(message.content)
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
