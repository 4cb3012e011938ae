"""The gateway's MCP tools (`agents.<id>.tools: [mcp:<server>:<tool> | mcp:<server>:*]`) in
each framework's own form, made at each turn from the tools the servers list now:

- OpenAI Agents SDK: `FunctionTool`s (the server's JSON schema as is, not strict), added to a
  clone of the root agent;
- pydantic-ai: a `FunctionToolset` of `Tool.from_schema` tools, given to the run.

Every call goes through the gateway's MCP client (`_external_tools.call_tool`), so a server is
started once per gateway whatever the agents' kinds; an approval rule naming
`mcp:<server>:*` applies to them as to the built-in agent's.
"""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING, Any

from sessiongate.agents._external_tools import call_tool

if TYPE_CHECKING:
    from sessiongate.agents.tools import Tool, Toolset
    from sessiongate.gateway.agent import TurnRequest

__all__ = ["pydantic_toolset", "with_sdk_tools"]


def with_sdk_tools(agent: Any, toolset: Toolset | None, request: TurnRequest | None) -> Any:
    """`agent`, with the toolset's tools as SDK `FunctionTool`s (a clone), or itself."""
    tools = toolset.tools() if toolset is not None else []
    if not tools:
        return agent
    sdk = importlib.import_module("agents")
    have = {getattr(t, "name", None) for t in agent.tools}
    added = [_sdk_tool(sdk, tool, request) for tool in tools if tool.name not in have]
    return agent.clone(tools=[*agent.tools, *added])


def _sdk_tool(sdk: Any, tool: Tool, request: TurnRequest | None) -> Any:
    async def invoke(context: Any, arguments: str) -> str:
        result = await call_tool(tool, str(context.tool_call_id), arguments or "{}", request)
        return result.content

    return sdk.FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )


def pydantic_toolset(toolset: Toolset | None, request: TurnRequest | None) -> Any | None:
    """The toolset's tools as a pydantic-ai `FunctionToolset`, or None."""
    tools = toolset.tools() if toolset is not None else []
    if not tools:
        return None
    ai = importlib.import_module("pydantic_ai")
    made = importlib.import_module("pydantic_ai.toolsets")
    return made.FunctionToolset(
        [
            ai.Tool.from_schema(
                _pydantic_function(tool, request),
                name=tool.name,
                description=tool.description,
                json_schema=tool.parameters,
                takes_ctx=True,
            )
            for tool in tools
        ]
    )


def _pydantic_function(tool: Tool, request: TurnRequest | None) -> Any:
    async def call(ctx: Any, **arguments: Any) -> str:
        text = json.dumps(arguments, ensure_ascii=False)
        result = await call_tool(tool, str(ctx.tool_call_id or ""), text, request)
        return result.content

    return call
