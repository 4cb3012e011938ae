"""Approvals for the OpenAI Agents SDK bridge: the SDK's own `needs_approval`, and the tools
named in `agents.<id>.approvals.tools`, both asked through the gateway's approvals.

A tool named in `approvals.tools` is given `needs_approval=True` on a clone of the agent (its
handoff agents too), so the SDK pauses on it exactly as on a tool marked in code. A run that
pauses ends its stream with `result.interruptions` (`ToolApprovalItem`s); the assistant message
holding the calls is stored first, then each call is asked (`TurnApprovals.ask`: the exact tool
name and arguments, the prompt in the chat, the wait), the decided approvals are marked started,
and the run resumes from `result.to_state()` with `state.approve(item)` or
`state.reject(item, rejection_message=<the gateway's denial>)`: an approved tool runs once, a
refused one gives the model the denial (`denied: expired` when nobody decided in time).

Across a restart the SDK's `RunState` is not kept (the transcript is the one history, DESIGN
decision 17): the turn is resumed from the transcript with the assistant message whose calls
waited (`TurnRequest.awaiting`). `take_up` asks again (finding the same approvals, no second
prompt), runs each approved call once through the SDK's own `FunctionTool.on_invoke_tool`, and
the run then continues from the transcript with the calls' results. A call already started is
never run again (`ApprovalBook.use`).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from typing import TYPE_CHECKING, Any

from sessiongate.agents._assembly import as_text

if TYPE_CHECKING:
    from sessiongate.gateway.approvals import TurnApprovals

__all__ = ["agent_named", "gated", "invoke_tool"]


def gated(agent: Any, approvals: TurnApprovals | None) -> Any:
    """`agent`, with the function tools `approvals` names marked `needs_approval` (on clones,
    handoff agents included); `agent` itself when none is named."""
    if approvals is None:
        return agent
    sdk = importlib.import_module("agents")
    made: dict[int, Any] = {}

    def visit(current: Any) -> Any:
        if id(current) in made:
            return made[id(current)]
        tools = [
            dataclasses.replace(tool, needs_approval=True)
            if isinstance(tool, sdk.FunctionTool)
            and tool.needs_approval is False
            and approvals.needs(tool.name)
            else tool
            for tool in current.tools
        ]
        clone = current.clone(tools=tools)
        made[id(current)] = clone
        clone.handoffs = [
            visit(h) if isinstance(h, sdk.Agent) else h for h in list(current.handoffs)
        ]
        return clone

    return visit(agent)


def agent_named(agent: Any, name: str | None) -> Any:
    """The agent called `name` among `agent` and the agents it hands off to (else `agent`)."""
    sdk = importlib.import_module("agents")
    seen: set[int] = set()
    stack = [agent]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if current.name == name:
            return current
        stack.extend(h for h in current.handoffs if isinstance(h, sdk.Agent))
    return agent


async def invoke_tool(agent: Any, call: dict[str, Any]) -> tuple[str, bool]:
    """Run one stored call through the SDK's own tool (a turn resumed after a restart): its
    output as text, and whether it failed."""
    sdk = importlib.import_module("agents")
    function = call.get("function") or {}
    name = str(function.get("name") or "")
    arguments = function.get("arguments") or "{}"
    arguments = arguments if isinstance(arguments, str) else as_text(arguments)
    tool = next(
        (t for t in agent.tools if isinstance(t, sdk.FunctionTool) and t.name == name), None
    )
    if tool is None:
        return json.dumps({"error": f"no tool {name!r}"}), True
    context = importlib.import_module("agents.tool_context").ToolContext(
        context=None,
        tool_name=name,
        tool_call_id=str(call.get("id") or ""),
        tool_arguments=arguments,
        agent=agent,
    )
    try:
        output = await tool.on_invoke_tool(context, arguments)
    except Exception as exc:
        return json.dumps({"error": f"{type(exc).__name__}: {exc}"}), True
    return as_text(output), False
