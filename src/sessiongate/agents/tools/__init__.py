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
from typing import TYPE_CHECKING

from sessiongate.agents.tools.base import (
    _MARK,
    Tool,
    ToolContext,
    ToolError,
    ToolLoadError,
    Toolset,
    make_tool,
    tool,
)
from sessiongate.agents.tools.schedule import SCHEDULE_TOOLS
from sessiongate.agents.tools.sessions import BUILTIN_TOOLS as SESSION_TOOLS
from sessiongate.core.mcp import is_mcp_tool_spec

if TYPE_CHECKING:
    from collections.abc import Sequence

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


def load_tools(names: Sequence[str], *, setting: str = "agent.openai.tools") -> list[Tool]:
    """The tools `names` names, in order; raises `ToolLoadError` naming the entry of `setting`
    (the configuration key they come from) that is no tool, and for two tools of one name.

    Entries `mcp:<server>:...` are skipped: those tools come from the MCP servers at run time
    (`sessiongate.agents.mcp`)."""
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
