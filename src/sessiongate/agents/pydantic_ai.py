"""A pydantic-ai `Agent` served as a sessiongate agent (`[pydantic-ai]`).

A turn runs `agent.iter(<the new user message>, message_history=<the model context>,
instructions=<the session context>)` and walks its graph: each model request streams its
text deltas; each model response (text and tool calls) is stored as one assistant message
the moment the framework hands it to its tools, and each tool's return as its result, so
the framework's `new_messages()` reach the transcript as they complete. The history is the
transcript's model context converted to pydantic-ai's messages; nothing is kept beside it.
The run's usage is reported at the end; a run that fails (the model server away, the usage
limit hit, the model misbehaving) ends the turn with a reason; `/stop` cancels the run.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from sessiongate.agents._approvals import decide, resumed_history
from sessiongate.agents._assembly import Assembly, as_text, split_request, summary_of
from sessiongate.agents.framework_tools import pydantic_toolset
from sessiongate.agents.pydantic_ai_approvals import (
    approval_calls,
    deferred_results,
    gated,
    output_types,
)
from sessiongate.core.turn_events import TextDelta, TurnEnd, UsageReport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sessiongate.agents.base import TurnResult
    from sessiongate.agents.tools import Toolset
    from sessiongate.core.turn_events import TurnEvent
    from sessiongate.gateway.agent import TurnRequest

__all__ = ["PydanticAIAgent", "to_model_messages"]

log = logging.getLogger(__name__)

FAILURE_NOTICE = "Sorry, something went wrong while answering. Please try again."


def to_model_messages(messages: list[dict[str, Any]]) -> list[Any]:
    """Chat-format messages as pydantic-ai's `ModelRequest` / `ModelResponse` list."""
    m = importlib.import_module("pydantic_ai.messages")
    out: list[Any] = []
    names: dict[str, str] = {}
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role == "user":
            out.append(m.ModelRequest(parts=[m.UserPromptPart(content=as_text(content))]))
        elif role == "system":
            out.append(m.ModelRequest(parts=[m.SystemPromptPart(content=as_text(content))]))
        elif role == "assistant":
            parts: list[Any] = []
            if content:
                parts.append(m.TextPart(content=as_text(content)))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                names[str(call.get("id"))] = str(function.get("name") or "")
                parts.append(
                    m.ToolCallPart(
                        tool_name=str(function.get("name") or ""),
                        args=function.get("arguments") or "{}",
                        tool_call_id=str(call.get("id") or ""),
                    )
                )
            if parts:
                out.append(m.ModelResponse(parts=parts))
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            name = (message.get("metadata") or {}).get("tool_name") or names.get(call_id, "")
            part = m.ToolReturnPart(
                tool_name=str(name), content=as_text(content), tool_call_id=call_id
            )
            last = out[-1] if out else None
            if isinstance(last, m.ModelRequest) and all(
                isinstance(p, m.ToolReturnPart) for p in last.parts
            ):
                last.parts.append(part)  # the results of one response go back together
            else:
                out.append(m.ModelRequest(parts=[part]))
    return out


class PydanticAIAgent:
    """One pydantic-ai agent serving a session."""

    def __init__(self, agent: Any, *, toolset: Toolset | None = None) -> None:
        self._ai = importlib.import_module("pydantic_ai")
        self._m = importlib.import_module("pydantic_ai.messages")
        self.agent = agent
        self._toolset = toolset  # the MCP tools of `agents.<id>.tools`

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[TurnEvent]:
        history, text = split_request(request.messages)
        prompt: str | None = text
        assembly = Assembly()
        output: Any = None
        usage: Any = None
        deferred: Any = None
        stored: Any = None  # a response stored already, whose calls the next run acts on
        answered: frozenset[str] = frozenset()  # its calls whose results are stored already
        messages = to_model_messages(history)
        try:
            if request.awaiting is not None:
                # Resumed while the stored response's calls waited for approval: asked again
                # (the same approvals), then the run goes on from it.
                messages, stored, deferred = await self._take_up(request)
                answered = frozenset(deferred.calls)
                prompt = None
            extra = pydantic_toolset(self._toolset, request)
            with gated(self.agent, request.approvals, extra):
                while True:
                    async with self.agent.iter(
                        prompt,
                        message_history=messages,
                        instructions=request.system_prompt or None,
                        output_type=output_types(self.agent),
                        deferred_tool_results=deferred,
                        toolsets=None if extra is None else [extra],
                    ) as run:
                        async for node in run:
                            async for event in self._node_events(
                                node, run, assembly, stored, answered
                            ):
                                yield event
                            if self._ai.Agent.is_call_tools_node(node):
                                stored = None
                            if self._ai.Agent.is_end_node(node):
                                output = node.data.output
                        # A property in current releases, a method in earlier ones.
                        usage = run.usage if hasattr(run.usage, "input_tokens") else run.usage()
                        messages = run.all_messages()
                    if not (isinstance(output, self._ai.DeferredToolRequests) and output.approvals):
                        break
                    for flushed in assembly.flush():  # the calls are stored before asked
                        yield flushed
                    deferred = deferred_results(
                        await decide(request.approvals, approval_calls(output))
                    )
                    stored, prompt = messages[-1], None
        except Exception as exc:  # the run's own failure (a tool, the model, a usage limit)
            for flushed in assembly.flush():
                yield flushed
            code = (
                "tool_loop_limit"
                if isinstance(exc, self._ai.exceptions.UsageLimitExceeded)
                else "agent_failed"
            )
            log.warning("pydantic-ai run failed", extra={"error": code}, exc_info=True)
            yield TurnEnd(FAILURE_NOTICE, error=code, detail=f"{type(exc).__name__}: {exc}"[:500])
            return
        for flushed in assembly.flush():
            yield flushed
        if usage is not None:
            yield UsageReport(
                input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
                output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
            )
        yield TurnEnd(as_text(output))

    async def _take_up(self, request: TurnRequest) -> tuple[list[Any], Any, Any]:
        """A resumed turn's history ending with the stored response whose calls waited, that
        response, and the decisions on its calls."""
        awaiting = request.awaiting or {}
        history, done = resumed_history(request.messages, awaiting)
        messages = to_model_messages(history)
        response = messages[-1]
        calls = [
            (p.tool_call_id, p.tool_name, p.args_as_json_str())
            for p in response.parts
            if isinstance(p, self._m.ToolCallPart) and self._waits(p.tool_name, request)
        ]
        decided = deferred_results(await decide(request.approvals, calls))
        # A call that needed no approval and ran before the pause keeps its stored result.
        decided.calls.update({call_id: m.get("content") for call_id, m in done.items()})
        return messages, response, decided

    def _waits(self, tool: str, request: TurnRequest) -> bool:
        """Whether a call of `tool` waits for approval: named in `approvals.tools`, or a
        deferred tool of the agent (`requires_approval`)."""
        if request.approvals is not None and request.approvals.needs(tool):
            return True
        function_tools = getattr(self.agent, "_function_toolset", None)
        found = getattr(function_tools, "tools", {}).get(tool)
        return bool(getattr(found, "requires_approval", False))

    async def _node_events(
        self,
        node: Any,
        run: Any,
        assembly: Assembly,
        stored: Any = None,
        answered: frozenset[str] = frozenset(),
    ) -> AsyncIterator[TurnEvent]:
        m, agent_class = self._m, self._ai.Agent
        if agent_class.is_model_request_node(node):
            async with node.stream(run.ctx) as stream:
                async for event in stream:
                    delta = getattr(event, "delta", None)
                    if isinstance(delta, m.TextPartDelta) and delta.content_delta:
                        yield TextDelta(delta.content_delta)
                    elif (
                        isinstance(event, m.PartStartEvent)
                        and isinstance(event.part, m.TextPart)
                        and event.part.content
                    ):
                        yield TextDelta(event.part.content)
        elif agent_class.is_call_tools_node(node):
            response = node.model_response
            if stored is None:
                for completed in assembly.text(_response_text(response, m)):
                    yield completed
            for part in response.parts:
                if isinstance(part, m.ToolCallPart):
                    if stored is None:
                        assembly.call(part.tool_call_id, part.tool_name, part.args_as_json_str())
                    else:  # a response stored already: only its calls' results are new
                        assembly.known(part.tool_call_id, part.tool_name)
            async with node.stream(run.ctx) as stream:
                async for event in stream:
                    if isinstance(event, m.FunctionToolResultEvent):
                        # `part` in current releases, `result` in earlier ones.
                        result = getattr(event, "part", None) or event.result
                        if result.tool_call_id in answered:
                            continue  # its result was stored before the pause
                        failed = isinstance(result, m.RetryPromptPart)
                        output = result.model_response() if failed else result.content
                        for out in assembly.result(result.tool_call_id, output, is_error=failed):
                            yield out

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        from sessiongate.agents.openai_agent import collect_turn

        return await collect_turn(self.stream_turn(request))

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return summary_of(messages)

    async def aclose(self) -> None:
        return None


def _response_text(response: Any, m: Any) -> str:
    return "".join(p.content for p in response.parts if isinstance(p, m.TextPart))
