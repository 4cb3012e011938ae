"""Approvals for the pydantic-ai bridge: deferred tools (`requires_approval=True`, a tool that
raises `ApprovalRequired`) and the tools named in `agents.<id>.approvals.tools`, both asked
through the gateway's approvals.

A turn's run may end with a `DeferredToolRequests` output (the bridge adds it to the run's
`output_type` when the agent's does not have it). The model response holding the calls is
stored first; each call in `approvals` is asked (`TurnApprovals.ask`: the exact tool name and
arguments, the prompt in the chat, the wait), the decided approvals are marked started, and the
run goes on with `deferred_tool_results` (`True`, or `ToolDenied(<the gateway's denial>)`) and
the run's messages as its history: an approved tool runs once, a refused one gives the model
the denial. A tool named in `approvals.tools` is wrapped for the turn in pydantic-ai's own
`ApprovalRequiredToolset` (`Agent.override`, which holds for the running task only).

Across a restart nothing of pydantic-ai's is kept: the resumed turn gets the transcript's
model context and the stored response whose calls waited (`TurnRequest.awaiting`), asks again
(finding the same approvals) and runs with `deferred_tool_results`, pydantic-ai's own way of
resuming from a message history.
"""

from __future__ import annotations

import contextlib
import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sessiongate.gateway.approvals import TurnApprovals

__all__ = ["approval_calls", "deferred_results", "gated", "output_types"]


def output_types(agent: Any) -> Any:
    """The run's `output_type`: the agent's, with `DeferredToolRequests` beside it."""
    deferred = importlib.import_module("pydantic_ai").DeferredToolRequests
    current = agent.output_type
    listed = list(current) if isinstance(current, (list, tuple)) else [current]
    return listed if deferred in listed else [*listed, deferred]


@contextlib.contextmanager
def gated(agent: Any, approvals: TurnApprovals | None, extra: Any = None) -> Iterator[None]:
    """While it holds (in this task), the agent's tools named in `approvals.tools` (and those
    of `extra`, the turn's MCP toolset given to the run) require approval, through
    pydantic-ai's `ApprovalRequiredToolset`."""
    if approvals is None or not approvals.named():
        yield
        return
    toolsets = importlib.import_module("pydantic_ai.toolsets")
    wrapped = toolsets.ApprovalRequiredToolset(
        toolsets.CombinedToolset([*agent.toolsets, *([extra] if extra is not None else [])]),
        approval_required_func=lambda ctx, tool_def, args: approvals.needs(tool_def.name),
    )
    with agent.override(tools=[], toolsets=[wrapped]):
        yield


def approval_calls(requests: Any) -> list[tuple[str, str, str]]:
    """The calls of a `DeferredToolRequests` waiting for approval: id, tool, arguments."""
    return [(p.tool_call_id, p.tool_name, p.args_as_json_str()) for p in requests.approvals]


def deferred_results(refusals: dict[str, str | None]) -> Any:
    """The decisions as pydantic-ai's `DeferredToolResults`."""
    ai = importlib.import_module("pydantic_ai")
    return ai.DeferredToolResults(
        approvals={
            call_id: True if refusal is None else ai.ToolDenied(refusal)
            for call_id, refusal in refusals.items()
        }
    )
