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
from typing import Any

from sessiongate.agents._assembly import as_text

__all__ = ["NODE_KEY", "Asked", "asked_of", "resume_value", "with_memory"]

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
