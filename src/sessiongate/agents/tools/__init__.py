"""Tools the OpenAI-compatible agent lets its model call.

`agent.openai.tools` names them: a built-in by its name (`sessions_list`, see `sessions.py`;
`schedule`, see `schedule.py`),
your own function by import path (`mypkg.tools:lookup_order`). A function may be plain or
async; its type hints and docstring give the JSON schema the model sees. `@tool` sets a name,
a description or a default timeout; a parameter annotated `ToolContext` receives the turn's
context (the calling session, the gateway) instead of a model argument.

    from sessiongate.agents.tools import tool

    @tool(timeout_seconds=5)
    async def lookup_order(order_id: str) -> dict:
        '''Look an order up by its id.

        Args:
            order_id: the id printed on the receipt
        '''
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, overload

from sessiongate.agents.tools._schema import read_signature
from sessiongate.core.mcp import is_mcp_tool_spec
from sessiongate.errors import SessiongateError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from pydantic import BaseModel

    from sessiongate.core.config import SessionToolsConfig
    from sessiongate.gateway.agent import AgentHost

__all__ = [
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolLoadError",
    "Toolset",
    "load_tools",
    "make_tool",
    "tool",
]

_MARK = "__sessiongate_tool__"
# What chat-completions servers accept as a function name; any other name fails every request.
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class ToolLoadError(SessiongateError, ImportError):
    """A name in `agent.openai.tools` that is no tool (an ImportError, so the CLI reports it
    like a missing extra, at start-up)."""

    code = "invalid_tool"


class ToolError(Exception):
    """Raised by a tool to answer the call with exactly this error text (no exception type
    prepended): the model reads `{"error": "<message>"}`."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool gets of the turn that calls it."""

    session_key: str
    session_id: str
    turn_id: int | None
    # The model the turn runs on (a spawned sub-agent inherits it).
    model: str
    settings: SessionToolsConfig
    # The gateway running the turn; None when the agent runs outside one.
    host: AgentHost | None = None


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    function: Callable[..., Any]
    arguments: type[BaseModel]
    context_parameter: str | None = None
    # The tool's own default timeout, under `agent.openai.tool_timeouts` and over
    # `agent.openai.tool_timeout_seconds`.
    timeout_seconds: float | None = None

    def spec(self) -> dict[str, Any]:
        """The entry of the request's `tools` list."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class Toolset(Protocol):
    """Tools that may change while the gateway runs (an MCP server's): asked at each turn."""

    def tools(self) -> list[Tool]:
        """The tools as they are now."""
        ...


def make_tool(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_seconds: float | None = None,
) -> Tool:
    """A `Tool` from a plain or async function; raises `TypeError` if its parameters cannot
    be filled from JSON."""
    tool_name = name or str(getattr(function, "__name__", "tool"))
    if not _TOOL_NAME.fullmatch(tool_name):
        raise TypeError(f"tool name {tool_name!r} is not 1 to 64 of A-Z, a-z, 0-9, '_' and '-'")
    signature = read_signature(function, name=tool_name, context_type=ToolContext)
    return Tool(
        name=tool_name,
        description=description or signature.description,
        parameters=signature.json_schema(),
        function=function,
        arguments=signature.arguments,
        context_parameter=signature.context_parameter,
        timeout_seconds=timeout_seconds,
    )


@overload
def tool(function: Callable[..., Any], /) -> Callable[..., Any]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_seconds: float | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout_seconds: float | None = None,
) -> Any:
    """Mark a function as a tool (`@tool` or `@tool(name=..., timeout_seconds=...)`); the
    function itself is returned unchanged, so it stays callable as before."""

    def mark(target: Callable[..., Any]) -> Callable[..., Any]:
        made = make_tool(
            target, name=name, description=description, timeout_seconds=timeout_seconds
        )
        setattr(target, _MARK, made)
        return target

    return mark(function) if function is not None else mark


def load_tools(names: Sequence[str], *, setting: str = "agent.openai.tools") -> list[Tool]:
    """The tools `names` names, in order; raises `ToolLoadError` naming the entry of `setting`
    (the configuration key they come from) that is no tool, and for two tools of one name.

    Entries `mcp:<server>:...` are skipped: those tools come from the MCP servers at run time
    (`sessiongate.agents.mcp`)."""
    from sessiongate.agents.tools.schedule import SCHEDULE_TOOLS
    from sessiongate.agents.tools.sessions import BUILTIN_TOOLS as SESSION_TOOLS

    builtins = {**SESSION_TOOLS, **SCHEDULE_TOOLS}
    tools: list[Tool] = []
    for position, spec in enumerate(names):
        if is_mcp_tool_spec(spec):
            continue
        where = f"{setting}[{position}] ({spec!r})"
        if ":" not in spec:
            builtin = builtins.get(spec)
            if builtin is None:
                known = ", ".join(sorted(builtins))
                raise ToolLoadError(
                    f"{where}: no built-in tool of that name (built-ins: {known}; your own "
                    "tools are named as module:function)"
                )
            tools.append(builtin)
            continue
        tools.append(_import_tool(spec, where))
    seen: set[str] = set()
    for made in tools:
        if made.name in seen:
            raise ToolLoadError(f"{setting}: two tools are named {made.name!r}")
        seen.add(made.name)
    return tools


def _import_tool(spec: str, where: str) -> Tool:
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        # Whatever stops the module importing (a missing module, its own error, a bad `@tool`)
        # is reported as this entry's problem, at start-up.
        raise ToolLoadError(
            f"{where}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    target = getattr(module, attribute, None)
    if target is None:
        raise ToolLoadError(f"{where}: {module_name!r} has no {attribute!r}")
    marked = getattr(target, _MARK, None)
    if isinstance(marked, Tool):
        return marked
    if not callable(target):
        raise ToolLoadError(f"{where}: {attribute!r} is not a function")
    try:
        return make_tool(target)
    except (TypeError, NameError) as exc:
        raise ToolLoadError(f"{where}: {exc}") from exc
