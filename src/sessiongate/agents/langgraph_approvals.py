"""Approvals for the LangGraph bridge: `interrupt()` inside a node or a tool is an approval
request asked through the gateway's approvals, and the decision resumes the graph with
`Command(resume=...)`.

What the approval shows: an interrupt whose value names a tool call (a dict with `name` /
`tool` / `action` and `args` / `arguments`, or `{"tool_call": {...}}`, or LangChain's
`{"action_requests": [...]}`) shows that call, bound to the call's id when the model's
pending message made it; any other value shows as `interrupt(<value as JSON>)`, bound to the
interrupt's id. The graph is resumed, per interrupt, with `{"approved": True}` or
`{"approved": False, "message": <the gateway's denial>}` (`denied: expired` when nobody
decided in time); the node's `interrupt()` returns it.

A tool named in `approvals.tools` has no marker in the graph: the bridge pauses the run
before each `ToolNode` (`interrupt_before`) and, when the pending message calls a named tool,
asks for it. All approved, the graph runs on as it would have; otherwise the bridge answers
the message's calls itself, as the tool node would (each approved call through the node's own
tool, each refused one with the denial as an error `ToolMessage`), writes them to the state as
that node (`aupdate_state`), and the graph runs on from there.

Resuming needs a checkpointer. A graph compiled with its own is resumed by `thread_id` = the
session id. A graph without one gets an in-memory `InMemorySaver` for the turn (a copy of the
graph; the user's object is untouched): across a restart it is gone, so the resumed turn puts
the state back from the transcript (`aupdate_state` with the model context and the stored
message whose calls waited, as the node that produced it), the graph runs on from there, its
`interrupt()` asks again and finds the same approval (no second prompt).
"""

from __future__ import annotations

import importlib
import json
from typing import TYPE_CHECKING, Any

from sessiongate.agents._approvals import decide
from sessiongate.agents._assembly import as_text

if TYPE_CHECKING:
    from sessiongate.agents._assembly import Assembly
    from sessiongate.core.turn_events import TurnEvent
    from sessiongate.gateway.approvals import TurnApprovals

__all__ = [
    "NODE_KEY",
    "Asked",
    "asked_of",
    "named_calls",
    "paused_before",
    "resume_value",
    "tool_nodes",
    "with_memory",
]

# The metadata key of a stored assistant message naming the graph node that produced it.
NODE_KEY = "langgraph_node"


class Asked:
    """One interrupt as the gateway asks it: the call id, tool and arguments shown."""

    def __init__(self, interrupt_id: str, call_id: str, tool: str, arguments: str) -> None:
        self.interrupt_id = interrupt_id
        self.call_id = call_id
        self.tool = tool
        self.arguments = arguments


def with_memory(graph: Any) -> Any:
    """A copy of `graph` with an in-memory checkpointer for one turn."""
    memory = importlib.import_module("langgraph.checkpoint.memory")
    return graph.copy(update={"checkpointer": memory.InMemorySaver()})


def asked_of(interrupts: list[Any], pending: list[dict[str, Any]]) -> list[Asked]:
    """What each interrupt asks; `pending` holds the tool calls of the model's last message
    (chat format), to bind a call-shaped interrupt to its call id."""
    out = []
    for number, interrupt in enumerate(interrupts):
        value = getattr(interrupt, "value", interrupt)
        interrupt_id = str(getattr(interrupt, "id", "") or f"interrupt-{number}")
        named = _named_call(value)
        if named is None:
            out.append(Asked(interrupt_id, interrupt_id, "interrupt", as_text(value)))
            continue
        tool, args, call_id = named
        arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        if call_id is None:
            call_id = _pending_id(pending, tool, args) or interrupt_id
        out.append(Asked(interrupt_id, call_id, tool, arguments))
    return out


def resume_value(asked: list[Asked], refusals: dict[str, str | None]) -> Any:
    """The `Command(resume=...)` value: one decision, or a map by interrupt id."""
    values = {
        a.interrupt_id: (
            {"approved": True}
            if refusals.get(a.call_id) is None
            else {"approved": False, "message": refusals[a.call_id]}
        )
        for a in asked
    }
    if len(values) == 1:
        return next(iter(values.values()))
    return values


def _named_call(value: Any) -> tuple[str, Any, str | None] | None:
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("tool_call"), dict):
        value = value["tool_call"]
    elif isinstance(value.get("action_requests"), list) and len(value["action_requests"]) == 1:
        value = value["action_requests"][0]
    name = value.get("name") or value.get("tool") or value.get("action")
    if not isinstance(name, str) or not name:
        return None
    args = value.get("args", value.get("arguments", {}))
    call_id = value.get("id") or value.get("tool_call_id")
    return name, args, str(call_id) if call_id else None


def _pending_id(pending: list[dict[str, Any]], tool: str, args: Any) -> str | None:
    for call in pending:
        function = call.get("function") or {}
        if function.get("name") != tool:
            continue
        given = function.get("arguments")
        try:
            parsed = json.loads(given) if isinstance(given, str) else given
        except ValueError:
            parsed = given
        wanted = json.loads(args) if isinstance(args, str) else args
        if parsed == wanted:
            return str(call.get("id") or "") or None
    return None


def tool_nodes(graph: Any) -> dict[str, Any]:
    """The graph's `ToolNode`s by node name."""
    prebuilt = importlib.import_module("langgraph.prebuilt")
    return {
        name: node.bound
        for name, node in graph.nodes.items()
        if isinstance(getattr(node, "bound", None), prebuilt.ToolNode)
    }


async def paused_before(graph: Any, config: dict[str, Any], nodes: dict[str, Any]) -> str | None:
    """The tool node the run paused before (`interrupt_before`), if it did."""
    if not nodes:
        return None
    state = await graph.aget_state(config)
    return next((name for name in state.next if name in nodes), None)


async def named_calls(
    graph: Any,
    config: dict[str, Any],
    node: str,
    tool_node: Any,
    assembly: Assembly,
    approvals: TurnApprovals | None,
) -> list[TurnEvent]:
    """Ask the pending message's calls of tools `approvals.tools` names; when one is refused,
    answer the message's calls as `node` would and write them to the state (the events to
    store); when all may run, nothing (the graph runs the node itself)."""
    calls = list(assembly.last_calls)
    named = [
        (str(c.get("id") or ""), _name(c), _arguments(c))
        for c in calls
        if approvals is not None and approvals.needs(_name(c))
    ]
    if not named:
        return []
    refusals = await decide(approvals, named)
    if all(refusal is None for refusal in refusals.values()):
        return []
    lc = importlib.import_module("langchain_core.messages")
    answers = []
    events: list[TurnEvent] = []
    for call in calls:
        call_id, name = str(call.get("id") or ""), _name(call)
        refusal = refusals.get(call_id)
        if refusal is not None:
            answer = lc.ToolMessage(refusal, tool_call_id=call_id, name=name, status="error")
        else:
            tool = tool_node.tools_by_name.get(name)
            args = json.loads(_arguments(call) or "{}")
            answer = await tool.ainvoke(
                {"type": "tool_call", "id": call_id, "name": name, "args": args}
            )
        answers.append(answer)
        failed = getattr(answer, "status", "success") == "error"
        events.extend(assembly.result(call_id, answer.content, is_error=failed))
    await graph.aupdate_state(config, {"messages": answers}, as_node=node)
    return events


def _name(call: dict[str, Any]) -> str:
    return str((call.get("function") or {}).get("name") or "")


def _arguments(call: dict[str, Any]) -> str:
    raw = (call.get("function") or {}).get("arguments")
    return raw if isinstance(raw, str) else as_text(raw if raw is not None else {})
