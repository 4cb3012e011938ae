"""The tool itself: `Tool`, how one is made from a function (`make_tool`, `@tool`), what it
gets of the turn (`ToolContext`) and the errors it raises; `sessiongate.agents.tools` exports
all of it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, overload

from sessiongate.agents.tools._schema import read_signature
from sessiongate.errors import SessiongateError

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic import BaseModel

    from sessiongate.core.config import SessionToolsConfig
    from sessiongate.gateway.agent import AgentHost

__all__ = ["Tool", "ToolContext", "ToolError", "ToolLoadError", "Toolset", "make_tool", "tool"]

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
