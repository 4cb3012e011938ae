"""The gateway's MCP tools, for a framework bridge: one call of a sessiongate `Tool` (built
from the gateway's MCP client, so each server is started once per gateway) with the same
checks, timeout and result cap the built-in agent's calls get (`tools/_calls.py`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.agents.tools import ToolContext
from sessiongate.agents.tools._calls import ToolLimits, run_tool_calls
from sessiongate.core.config import OpenAIAgentConfig, SessionToolsConfig

if TYPE_CHECKING:
    from sessiongate.agents.tools import Tool
    from sessiongate.core.turn_events import ToolResult
    from sessiongate.gateway.agent import TurnRequest

__all__ = ["call_tool"]

_DEFAULTS = OpenAIAgentConfig()
_LIMITS = ToolLimits(
    timeout_seconds=_DEFAULTS.tool_timeout_seconds,
    per_tool={},
    max_result_chars=_DEFAULTS.max_tool_result_chars,
    parallel=False,
)


async def call_tool(
    tool: Tool, call_id: str, arguments: str, request: TurnRequest | None
) -> ToolResult:
    """One call of `tool` with `arguments` (JSON text): its result, an error result on any
    failure (never an exception)."""
    context = ToolContext(
        session_key=request.session_key if request else "",
        session_id=request.session_id if request else "",
        turn_id=request.turn_id if request else None,
        model=(request.model if request else None) or "",
        settings=SessionToolsConfig(),
        host=request.host if request else None,
    )
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": tool.name, "arguments": arguments},
    }
    (result,) = await run_tool_calls([call], {tool.name: tool}, context, _LIMITS)
    return result
