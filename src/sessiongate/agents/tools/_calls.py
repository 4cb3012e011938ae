"""Running the tool calls of one assistant message: each gets a result, whatever happens.

Whatever the model or the tool does wrong becomes a result the model can read, never an
exception out of the turn: an unknown tool, arguments that are not JSON or do not match the
schema, a tool that raises, one that runs past its timeout (stopped), one that returns something
that is not JSON, arguments nested too deeply to parse, and anything unforeseen while running
one call. Only cancellation (an interrupt, `/stop`, the drain) goes through. Calls of one
message run concurrently when `parallel`, and their results come back in the calls' order, so
one bad call never costs the others their results.

Before a message's calls are stored or run, `repair_tool_calls` makes each one storable and
sendable back to the model: a name no server accepts (empty, too long, odd characters)
becomes `INVALID_TOOL_NAME`, and a missing or repeated call id a fresh one, so the turn's
transcript stays valid and the model reads one error result per bad call.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import re
import threading
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_json

from sessiongate.agents.tools._schema import describe_validation_error
from sessiongate.agents.tools.base import ToolError
from sessiongate.core.turn_events import ToolResult
from sessiongate.gateway.tracing import traced

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from sessiongate.agents.tools.base import Tool, ToolContext
    from sessiongate.gateway.approvals import TurnApprovals

__all__ = [
    "INVALID_TOOL_NAME",
    "ToolLimits",
    "repair_tool_calls",
    "run_calls_with_approvals",
    "run_tool_calls",
]

log = logging.getLogger(__name__)

# What a call whose name no chat API accepts is stored and sent back as: the transcript refuses
# an empty name, and servers refuse names outside this pattern in the next request.
INVALID_TOOL_NAME = "invalid_tool_name"
_SENDABLE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Arguments nested deeper than this are refused before they are parsed: Python's parser and
# the schema's validation recurse once per level and would fail the whole turn at ~1,000.
MAX_ARGUMENT_DEPTH = 64
_OPENERS = frozenset("[{")
_CLOSERS = frozenset("]}")


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


def repair_tool_calls(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """An assistant message's `tool_calls` made valid to store and to send back: each call an
    object of type `function` with a sendable name (else `INVALID_TOOL_NAME`), string
    arguments and an id of its own."""
    repaired: list[dict[str, Any]] = []
    seen: set[str] = set()
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        name = function.get("name")
        if not isinstance(name, str) or not _SENDABLE_NAME.fullmatch(name):
            log.info(
                "tool call with a name no server accepts",
                extra={"tool": str(name)[:80]},
            )
            name = INVALID_TOOL_NAME
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = "{}" if arguments is None else _dumped(arguments)
        call_id = call.get("id") if isinstance(call, dict) else None
        if not isinstance(call_id, str) or not call_id or call_id in seen:
            call_id = f"call_{index}"
            while call_id in seen:
                call_id += "_"
        seen.add(call_id)
        repaired.append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        )
    return repaired


def _dumped(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return "{}"


def _too_deep(raw: str) -> bool:
    """Whether JSON text nests brackets deeper than `MAX_ARGUMENT_DEPTH` (brackets inside
    strings counted too: an overestimate only refuses arguments no tool needs)."""
    depth = 0
    for char in raw:
        if char in _OPENERS:
            depth += 1
            if depth > MAX_ARGUMENT_DEPTH:
                return True
        elif char in _CLOSERS:
            depth -= 1
    return False


async def run_tool_calls(
    calls: Sequence[Mapping[str, Any]],
    tools: Mapping[str, Tool],
    context: ToolContext,
    limits: ToolLimits,
) -> list[ToolResult]:
    """One `ToolResult` per call of an assistant message's `tool_calls`, in their order."""
    if not limits.parallel or len(calls) == 1:
        return [await _run_guarded(call, tools, context, limits) for call in calls]
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(_run_guarded(call, tools, context, limits)) for call in calls]
    return [task.result() for task in tasks]


async def run_calls_with_approvals(
    calls: Sequence[Mapping[str, Any]],
    tools: Mapping[str, Tool],
    context: ToolContext,
    limits: ToolLimits,
    approvals: TurnApprovals | None,
) -> list[ToolResult]:
    """`run_tool_calls`, after the calls that need a person's approval have it.

    Every such call of the message is asked at once (each prompt goes to the chat) and waited
    for; then the decided approvals are marked started, before any call of the message runs,
    so a turn resumed after a restart never runs one twice. A call that may not run (denied,
    expired, cancelled, not the call approved) gets its refusal as an error result; the others
    run as usual, and the results come back in the calls' order.
    """
    asking = [call for call in calls if approvals is not None and approvals.needs(_tool_name(call))]
    if approvals is None or not asking:
        return await run_tool_calls(calls, tools, context, limits)
    shown = {
        str(call.get("id") or ""): (_tool_name(call), _arguments_text(call)) for call in asking
    }
    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(approvals.ask(call_id, tool, arguments))
            for call_id, (tool, arguments) in shown.items()
        ]
    refused = {
        decision.approval.call_id: decision.result or ""
        for decision in approvals.start([task.result() for task in tasks], shown)
        if not decision.run
    }
    runnable = [call for call in calls if str(call.get("id") or "") not in refused]
    ran = iter(await run_tool_calls(runnable, tools, context, limits) if runnable else [])
    results: list[ToolResult] = []
    for call in calls:
        call_id = str(call.get("id") or "")
        if call_id in refused:
            log.info(
                "tool call not approved",
                extra={"session_key": context.session_key, "tool": _tool_name(call)},
            )
            results.append(ToolResult(call_id, _tool_name(call), refused[call_id], is_error=True))
        else:
            results.append(next(ran))
    return results


def _arguments_text(call: Mapping[str, Any]) -> str:
    raw = (call.get("function") or {}).get("arguments")
    return raw if isinstance(raw, str) else _dumped(raw if raw is not None else {})


async def _run_guarded(
    call: Mapping[str, Any],
    tools: Mapping[str, Tool],
    context: ToolContext,
    limits: ToolLimits,
) -> ToolResult:
    """`_run_one`, whose every failure is already a result; anything it did not foresee
    (an `Exception`, never a cancellation) still becomes this call's error result, logged
    with its traceback, so the other calls and the turn go on."""
    try:
        return await _run_one(call, tools, context, limits)
    except Exception as exc:
        log.exception("tool call failed unexpectedly", extra={"session_key": context.session_key})
        function = call.get("function") if isinstance(call, dict) else None
        name = function.get("name") if isinstance(function, dict) else None
        payload = json.dumps({"error": f"the call could not be run: {type(exc).__name__}"})
        return ToolResult(str(call.get("id") or ""), str(name or ""), payload, is_error=True)


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

    known = ", ".join(sorted(tools)) or "none"
    if name == INVALID_TOOL_NAME and name not in tools:
        return error(f"the call names no valid tool (a name is 1 to 64 of A-Z a-z 0-9 _ -); "
                     f"the tools are: {known}")  # fmt: skip
    tool = tools.get(name)
    if tool is None:
        return error(f"unknown tool {name!r}; the tools are: {known}")
    raw = function.get("arguments") or "{}"
    if isinstance(raw, str) and _too_deep(raw):
        return error(f"the arguments are nested more than {MAX_ARGUMENT_DEPTH} levels deep")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError as exc:
        return error(f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})")
    except RecursionError:
        return error(f"the arguments are nested more than {MAX_ARGUMENT_DEPTH} levels deep")
    if not isinstance(arguments, dict):
        return error("the arguments must be a JSON object")
    try:
        validated = tool.arguments.model_validate(arguments)
    except ValidationError as exc:
        return error(f"the arguments do not match the schema: {describe_validation_error(exc)}")
    except RecursionError:
        return error(f"the arguments are nested more than {MAX_ARGUMENT_DEPTH} levels deep")
    kwargs = dict(validated)
    if tool.context_parameter is not None:
        kwargs[tool.context_parameter] = context
    timeout = limits.timeout_for(tool)
    try:
        async with asyncio.timeout(timeout):
            value = await _call(tool, kwargs)
    except TimeoutError:
        return error(f"the tool did not finish within {timeout:g} seconds and was stopped")
    except ToolError as exc:
        return error(str(exc))
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
