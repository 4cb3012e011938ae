"""Running the tool calls of one assistant message: each gets a result, whatever happens.

Whatever the model or the tool does wrong becomes a result the model can read, never an
exception out of the turn: an unknown tool, arguments that are not JSON or do not match the
schema, a tool that raises, one that runs past its timeout (stopped), one that returns something
that is not JSON. Only cancellation (an interrupt, `/stop`, the drain) goes through. Calls of one
message run concurrently when `parallel`, and their results come back in the calls' order.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import threading
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_json

from sessiongate.agents.tools._schema import describe_validation_error
from sessiongate.core.turn_events import ToolResult
from sessiongate.gateway.tracing import traced

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from sessiongate.agents.tools import Tool, ToolContext

__all__ = ["ToolLimits", "run_tool_calls"]

log = logging.getLogger(__name__)


class ToolLimits:
    def __init__(
        self,
        *,
        timeout_seconds: float,
        per_tool: Mapping[str, float],
        max_result_chars: int,
        parallel: bool,
    ) -> None:
        self.timeout_seconds = timeout_seconds
        self.per_tool = per_tool
        self.max_result_chars = max_result_chars
        self.parallel = parallel

    def timeout_for(self, tool: Tool) -> float:
        configured = self.per_tool.get(tool.name)
        if configured is not None:
            return configured
        return tool.timeout_seconds if tool.timeout_seconds is not None else self.timeout_seconds


async def run_tool_calls(
    calls: Sequence[Mapping[str, Any]],
    tools: Mapping[str, Tool],
    context: ToolContext,
    limits: ToolLimits,
) -> list[ToolResult]:
    """One `ToolResult` per call of an assistant message's `tool_calls`, in their order."""
    if not limits.parallel or len(calls) == 1:
        return [await _run_one(call, tools, context, limits) for call in calls]
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(_run_one(call, tools, context, limits)) for call in calls]
    return [task.result() for task in tasks]


def _tool_name(call: Mapping[str, Any], *_: Any) -> str:
    return str((call.get("function") or {}).get("name") or "")


@traced(
    lambda call, *_: f"execute_tool {_tool_name(call)}",
    start=lambda call, tools, context, limits: {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": _tool_name(call),
        "gen_ai.tool.call.id": call.get("id"),
        "sessiongate.turn_id": context.turn_id,
    },
    finish=lambda result, *_: {"error.type": "tool_error" if result.is_error else None},
)
async def _run_one(
    call: Mapping[str, Any],
    tools: Mapping[str, Tool],
    context: ToolContext,
    limits: ToolLimits,
) -> ToolResult:
    function = call.get("function") or {}
    name = str(function.get("name") or "")
    call_id = str(call.get("id") or "")

    def error(text: str) -> ToolResult:
        log.info(
            "tool call refused or failed",
            extra={"session_key": context.session_key, "tool": name, "error": text[:200]},
        )
        payload = json.dumps({"error": text}, ensure_ascii=False)
        return ToolResult(call_id, name, payload, is_error=True)

    tool = tools.get(name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return error(f"unknown tool {name!r}; the tools are: {known}")
    raw = function.get("arguments") or "{}"
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        return error(f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})")
    if not isinstance(arguments, dict):
        return error("the arguments must be a JSON object")
    try:
        validated = tool.arguments.model_validate(arguments)
    except ValidationError as exc:
        return error(f"the arguments do not match the schema: {describe_validation_error(exc)}")
    kwargs = dict(validated)
    if tool.context_parameter is not None:
        kwargs[tool.context_parameter] = context
    timeout = limits.timeout_for(tool)
    try:
        async with asyncio.timeout(timeout):
            value = await _call(tool, kwargs)
    except TimeoutError:
        return error(f"the tool did not finish within {timeout:g} seconds and was stopped")
    except Exception as exc:
        return error(f"the tool failed: {type(exc).__name__}: {exc}")
    try:
        content = value if isinstance(value, str) else to_json(value).decode()
    except (PydanticSerializationError, ValueError, TypeError):
        return error(
            f"the tool returned a {type(value).__name__}, which cannot be serialised as JSON"
        )
    if len(content) > limits.max_result_chars:
        cut = len(content) - limits.max_result_chars
        content = f"{content[: limits.max_result_chars]}\n[... {cut} more characters cut]"
    return ToolResult(call_id, name, content)


async def _call(tool: Tool, kwargs: dict[str, Any]) -> Any:
    if inspect.iscoroutinefunction(tool.function):
        return await tool.function(**kwargs)
    value = await _in_daemon_thread(tool, kwargs)
    if inspect.isawaitable(value):
        value = await value
    return value


async def _in_daemon_thread(tool: Tool, kwargs: dict[str, Any]) -> Any:
    """A plain function on a thread of its own: it may block (files, a database, a web call).

    A daemon thread rather than the loop's executor: a hung tool cannot be stopped, and in the
    executor it would hold up the loop's shutdown; here its result is simply dropped.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: Any, failed: bool) -> None:
        if future.done():
            return  # the call timed out or was cancelled meanwhile
        if failed:
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    def target() -> None:
        try:
            outcome, failed = tool.function(**kwargs), False
        except Exception as exc:
            outcome, failed = exc, True
        with contextlib.suppress(RuntimeError):  # the loop closed while the tool ran
            loop.call_soon_threadsafe(settle, outcome, failed)

    threading.Thread(target=target, name=f"tool-{tool.name}", daemon=True).start()
    return await future
