"""What the framework bridges share of approvals: asking the gateway for a set of calls.

A framework pauses on calls that need a person (its own marker, or a name in
`approvals.tools`); `decide` asks each through the turn's `TurnApprovals` (the exact tool name
and arguments, the prompt in the chat, the wait, a restart finding the same approval), marks
the decided ones started before any runs, and says of each whether it may run now or what
refusal the model reads.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessiongate.gateway.approvals import TurnApprovals

__all__ = ["NO_APPROVER", "decide", "resumed_history"]

# The result of a call that needs approval where no gateway can ask for it (a turn run
# outside a gateway).
NO_APPROVER = json.dumps({"error": "denied: nobody can approve this call here"})


async def decide(
    approvals: TurnApprovals | None, calls: list[tuple[str, str, str]]
) -> dict[str, str | None]:
    """Ask every call (call id, tool, arguments) and wait for the decisions; mark them started.
    Each call id maps to None (it may run now) or the refusal the model reads."""
    if approvals is None:
        return {call_id: NO_APPROVER for call_id, _, _ in calls}
    rows = [await approvals.ask(call_id, tool, arguments) for call_id, tool, arguments in calls]
    shown = {call_id: (tool, arguments) for call_id, tool, arguments in calls}
    return {
        decision.approval.call_id: (None if decision.run else decision.result or NO_APPROVER)
        for decision in approvals.start(rows, shown)
    }


def resumed_history(
    messages: list[dict[str, Any]], awaiting: dict[str, Any]
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """A resumed turn's history ending with `awaiting` (the stored message whose calls waited),
    and the results its calls already have (a call that needed no approval may have run
    before the pause: it is never run again)."""
    ids = {str(call.get("id") or "") for call in awaiting.get("tool_calls") or []}
    done = {
        str(m.get("tool_call_id")): m
        for m in messages
        if m.get("role") == "tool" and str(m.get("tool_call_id")) in ids
    }
    history = [m for m in messages if not (m.get("role") == "tool" and m in done.values())]
    last = history[-1] if history else {}
    if (
        last.get("role") == "assistant"
        and not last.get("tool_calls")
        and last.get("content") == awaiting.get("content")
    ):
        history.pop()  # the model context kept its text without the open calls
    return [*history, awaiting], done
