"""What a streamed agent turn yields: plain data, no I/O (DESIGN round 2, decision 11).

An agent's turn is an async stream of these events. The gateway persists each
`MessageCompleted` and `ToolResult` the moment it arrives, forwards `TextDelta`s to whoever
streams the reply (a `StreamRetry` voids the ones since the last completed message), and
settles the turn on `TurnEnd`. Agents that only implement
`run_turn -> TurnResult` are wrapped into this stream by the gateway.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MessageCompleted",
    "StreamRetry",
    "TextDelta",
    "ToolResult",
    "TurnEnd",
    "TurnEvent",
    "UsageReport",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the assistant text being generated; not durable until its message completes."""

    text: str


@dataclass(frozen=True, slots=True)
class StreamRetry:
    """The message being generated starts over: its model call failed (a stream that broke
    mid-way, a 429) and attempt number `attempt` (2 for the first retry) begins.

    Every `TextDelta` since the last completed message is void: whoever shows the text must
    drop it and show the new attempt's deltas in its place, or the user reads it twice.
    `reason` is the failure's short code (`agent_unavailable`, `agent_empty_response`).
    """

    attempt: int
    reason: str


@dataclass(frozen=True, slots=True)
class MessageCompleted:
    """An assistant message that finished generating, with or without `tool_calls`.

    `message` is an OpenAI chat-format dict (`role` is "assistant"); it is stored as it is.
    An agent may complete its final reply this way too: when its last completed message has
    no `tool_calls` and the `TurnEnd` text as content, the gateway does not store the reply a
    second time. (A `run_turn` agent's returned messages, tool results included, arrive as
    `MessageCompleted`s of the wrapped stream.)
    """

    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The result of one tool call: stored as a `tool` message paired by `tool_call_id`."""

    tool_call_id: str
    name: str
    content: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Token counts for the model calls so far in this turn (each report adds to the total)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """The last event of a turn: the final reply text, or why the turn ended without one.

    `error` is a short machine code (`agent_misconfigured`, `agent_unavailable`,
    `tool_loop_limit`, ...) with a human `detail`; `text` is what the user is told.
    """

    text: str
    error: str | None = None
    detail: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


TurnEvent = TextDelta | StreamRetry | MessageCompleted | ToolResult | UsageReport | TurnEnd
