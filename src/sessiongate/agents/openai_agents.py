"""An OpenAI Agents SDK `Agent` served as a sessiongate agent (`[openai-agents]`).

A turn runs `Runner.run_streamed(agent, <the new user message>, session=...)`. The session is
`TranscriptSession`, the SDK's own `Session` interface over the turn's model context: the SDK
reads the conversation from the transcript (after resets and compactions, rewinds applied)
and its `add_items` stores nothing, since the gateway stores each message from the stream as
it completes. There is one history, the transcript; a resumed turn continues from what was
stored (a completed tool call and its result are in the history, so the model does not call it
again).

The stream maps to turn events: text deltas as they come, each model response as one
assistant message with its tool calls (named after the SDK agent that produced it, so
handoffs between agents read in the transcript), each tool output (handoffs included) as a
tool result, the run's usage at the end. The session's `/model` choice is the run's model
(`RunConfig(model=...)`). A run that fails (`MaxTurnsExceeded`, the model refusing, the
model server away) ends the turn with a reason instead of an exception; `/stop` cancels the
run.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from sessiongate.agents._approvals import decide, resumed_history
from sessiongate.agents._assembly import Assembly, as_text, split_request, summary_of
from sessiongate.agents.framework_tools import with_sdk_tools
from sessiongate.agents.openai_agents_approvals import agent_named, gated, invoke_tool
from sessiongate.core.turn_events import TextDelta, ToolResult, TurnEnd, UsageReport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from sessiongate.agents.base import TurnResult
    from sessiongate.agents.tools import Toolset
    from sessiongate.core.turn_events import TurnEvent
    from sessiongate.gateway.agent import TurnRequest
    from sessiongate.gateway.approvals import TurnApprovals

__all__ = ["OpenAIAgentsAgent", "TranscriptSession", "to_input_items"]

log = logging.getLogger(__name__)

FAILURE_NOTICE = "Sorry, something went wrong while answering. Please try again."


def to_input_items(messages: list[dict[str, Any]], system_prompt: str) -> list[dict[str, Any]]:
    """Chat-format messages as the SDK's Responses input items (system prompt first)."""
    items: list[dict[str, Any]] = []
    if system_prompt:
        items.append({"role": "system", "content": system_prompt})
    for message in messages:
        role = message.get("role")
        if role in ("user", "system"):
            items.append({"role": role, "content": as_text(message.get("content"))})
        elif role == "assistant":
            text = as_text(message.get("content")) if message.get("content") else ""
            if text:
                items.append({"role": "assistant", "content": text})
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.get("id"),
                        "name": function.get("name"),
                        "arguments": function.get("arguments") or "{}",
                    }
                )
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id"),
                    "output": as_text(message.get("content")),
                }
            )
    return items


class TranscriptSession:
    """The SDK's `Session` protocol over one turn's model context (read-only: the gateway
    stores the turn's messages itself, as they complete)."""

    session_settings = None

    def __init__(self, session_id: str, items: list[dict[str, Any]]) -> None:
        self.session_id = session_id
        self._items = items

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return list(self._items if limit is None else self._items[-limit:])

    async def add_items(self, items: list[Any]) -> None:
        """Nothing to do: each message reaches the transcript from the turn's stream."""

    async def pop_item(self) -> Any | None:
        return None

    async def clear_session(self) -> None:
        """The transcript is reset with `/new`, never by the SDK."""


class OpenAIAgentsAgent:
    """One SDK agent (its handoffs included) serving a session."""

    def __init__(self, agent: Any, *, toolset: Toolset | None = None) -> None:
        self._agents = importlib.import_module("agents")
        self.agent = agent
        self._toolset = toolset  # the MCP tools of `agents.<id>.tools`

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[TurnEvent]:
        sdk = self._agents
        history, text = split_request(request.messages)
        agent = gated(with_sdk_tools(self.agent, self._toolset, request), request.approvals)
        assembly = Assembly()
        start: Any = text
        if request.awaiting is not None:
            # Resumed while the last message's calls waited for approval: they are taken up
            # again (the same approvals), then the run continues from the transcript.
            history, done = resumed_history(request.messages, request.awaiting)
            async for event in self._take_up(agent, request, history, done):
                yield event
            start = []
        session = TranscriptSession(
            request.session_id, to_input_items(history, request.system_prompt)
        )
        run_config = sdk.RunConfig(model=request.model) if request.model else None
        result = sdk.Runner.run_streamed(agent, start, session=session, run_config=run_config)
        answered: set[str] = set()
        try:
            while True:
                async for event in result.stream_events():
                    for out in self._map(event, assembly, answered):
                        yield out
                if not result.interruptions:
                    break
                for flushed in assembly.flush():  # the calls are stored before they are asked
                    yield flushed
                state = result.to_state()
                items = list(result.interruptions)
                calls = [_approval_call(item) for item in items]
                refusals = await decide(request.approvals, calls)
                for item, (call_id, _, _) in zip(items, calls, strict=True):
                    refusal = refusals.get(call_id)
                    if refusal is None:
                        state.approve(item)
                        continue
                    state.reject(item, rejection_message=refusal)
                    answered.add(call_id)
                    for out in assembly.result(call_id, refusal, is_error=True):
                        yield out
                result.cancel()
                result = sdk.Runner.run_streamed(
                    agent, state, session=session, run_config=run_config
                )
        except Exception as exc:  # the run's own failure (a tool, the model, max turns)
            for flushed in assembly.flush():
                yield flushed
            yield _failure(exc, sdk)
            return
        finally:
            result.cancel()
        for flushed in assembly.flush():
            yield flushed
        usage = result.context_wrapper.usage
        yield UsageReport(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens)
        yield TurnEnd(as_text(result.final_output))

    async def _take_up(
        self,
        agent: Any,
        request: TurnRequest,
        history: list[dict[str, Any]],
        done: dict[str, dict[str, Any]],
    ) -> AsyncIterator[TurnEvent]:
        """The awaited calls of a resumed turn: asked (found) again, and the approved ones run
        once through the SDK's own tools; their results join `history` (a call with a stored
        result keeps it, and is not run again)."""
        awaiting = request.awaiting or {}
        calls = list(awaiting.get("tool_calls") or [])
        owner = agent_named(agent, awaiting.get("name"))
        asked = [
            (str(c.get("id") or ""), _call_name(c), _call_arguments(c))
            for c in calls
            if request.approvals is not None and _needs(owner, _call_name(c), request.approvals)
        ]
        refusals = await decide(request.approvals, asked)
        for call in calls:
            call_id = str(call.get("id") or "")
            if call_id in done:
                history.append(done[call_id])
                continue
            refusal = refusals.get(call_id)
            if refusal is not None:
                output, failed = refusal, True
            else:
                output, failed = await invoke_tool(owner, call)
            # The message holding the calls is stored already: only their results are new.
            yield ToolResult(call_id, _call_name(call), output, is_error=failed)
            history.append({"role": "tool", "tool_call_id": call_id, "content": output})

    def _map(self, event: Any, assembly: Assembly, answered: set[str]) -> list[TurnEvent]:
        if event.type == "raw_response_event":
            data = event.data
            if getattr(data, "type", None) == "response.output_text.delta" and data.delta:
                return [TextDelta(data.delta)]
            return []
        if event.type != "run_item_stream_event":
            return []
        item = event.item
        agent = getattr(getattr(item, "agent", None), "name", None)
        if event.name == "message_output_created":
            text = self._agents.ItemHelpers.text_message_output(item)
            return list(assembly.text(text, name=agent))
        if event.name in ("tool_called", "handoff_requested"):
            raw = item.raw_item
            call_id = _field(raw, "call_id") or _field(raw, "id") or ""
            name = _field(raw, "name") or type(raw).__name__
            assembly.call(str(call_id), str(name), _field(raw, "arguments") or "{}", agent=agent)
            return []
        if event.name in ("tool_output", "handoff_occured"):
            raw = item.raw_item
            output = getattr(item, "output", None)
            if output is None:
                output = _field(raw, "output")
            call_id = str(_field(raw, "call_id") or "")
            if call_id in answered:  # its refusal was stored when it was decided
                return []
            return list(assembly.result(call_id, output))
        return []

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        from sessiongate.agents.openai_agent import collect_turn

        return await collect_turn(self.stream_turn(request))

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        return summary_of(messages)

    async def aclose(self) -> None:
        return None


def _approval_call(item: Any) -> tuple[str, str, str]:
    """A paused call as the gateway shows it: call id, tool name, arguments (as given)."""
    raw = item.raw_item
    arguments = _field(raw, "arguments")
    return (
        str(_field(raw, "call_id") or _field(raw, "id") or ""),
        str(item.tool_name or _field(raw, "name") or ""),
        arguments if isinstance(arguments, str) else as_text(arguments or {}),
    )


def _call_name(call: dict[str, Any]) -> str:
    return str((call.get("function") or {}).get("name") or "")


def _call_arguments(call: dict[str, Any]) -> str:
    raw = (call.get("function") or {}).get("arguments")
    return raw if isinstance(raw, str) else as_text(raw if raw is not None else {})


def _needs(agent: Any, name: str, approvals: TurnApprovals) -> bool:
    """Whether a call of `name` by `agent` waits for approval: named in `approvals.tools`, or
    marked `needs_approval` in code (a callable marker counts as asking)."""
    if approvals.needs(name):
        return True
    tool = next((t for t in agent.tools if getattr(t, "name", None) == name), None)
    return tool is not None and getattr(tool, "needs_approval", False) is not False


def _field(raw: Any, name: str) -> Any:
    return raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)


def _openai_error() -> type[Exception]:
    try:
        return importlib.import_module("openai").APIError  # type: ignore[no-any-return]
    except ImportError:  # pragma: no cover - the SDK depends on openai
        return _NoError


class _NoError(Exception):
    pass


def _failure(exc: Exception, sdk: Any) -> TurnEnd:
    code = (
        "tool_loop_limit"
        if isinstance(exc, sdk.exceptions.MaxTurnsExceeded)
        else ("agent_unavailable" if isinstance(exc, _openai_error()) else "agent_failed")
    )
    log.warning("agents sdk run failed", extra={"error": code}, exc_info=exc)
    return TurnEnd(FAILURE_NOTICE, error=code, detail=f"{type(exc).__name__}: {exc}"[:500])
