"""What a running turn has produced so far, and what a resumed turn finds of its first attempt.

A turn's messages are numbered within the turn: the user message is 0, then each message the
agent completes (assistant messages, tool results) in order. The numbers are the transcript's
idempotency keys (turn id + number, DESIGN decision 5), and the stored part is always a prefix:
once the store refuses one message, the rest wait for the outcome commit, which stores them in
order, so the transcript never holds a later message without an earlier one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sessiongate.core.turn_events import ToolResult, TurnEnd, UsageReport
    from sessiongate.gateway.reply_stream import ReplyStream

__all__ = [
    "INTERRUPTED_TOOL_RESULT",
    "RESUME_NOTE",
    "StoredProgress",
    "TurnProgress",
    "resume_note",
    "resume_progress",
    "tool_message",
]

RESUME_NOTE = (
    "Your previous attempt at answering the last user message was interrupted by a gateway "
    "restart (this is attempt {attempt}). Actions you started then may already have happened: "
    "do NOT re-execute them and do not try to verify them. Answer from the conversation as it "
    "stands, and say briefly that the earlier attempt was interrupted if it matters."
)
# The result stored for a tool call that had none when the gateway stopped: every provider
# rejects an assistant tool call without its result, and the model must know the call may
# or may not have run.
INTERRUPTED_TOOL_RESULT = (
    "Interrupted: the gateway stopped before this tool call returned. It may or may not have "
    "taken effect; do not run it again without checking with the user."
)


def tool_message(result: ToolResult) -> dict[str, Any]:
    """A tool result as the chat-format `tool` message the transcript stores."""
    message: dict[str, Any] = {
        "role": "tool",
        "tool_call_id": result.tool_call_id,
        "name": result.name,
        "content": result.content,
    }
    if result.is_error:
        message["metadata"] = {"is_error": True}
    return message


@dataclass(slots=True)
class TurnProgress:
    """The running turn's messages (`stored` of them durable, counting the user message),
    the text of the message being generated, and the usage so far."""

    user_message: dict[str, Any]
    stored: int = 0
    messages: list[dict[str, Any]] = field(default_factory=list)
    # Delta text since the last completed message: what the user has seen of the next one.
    partial: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    reply_stream: ReplyStream | None = None
    # Times the message being generated started over (`StreamRetry`), over the whole turn.
    retries: int = 0

    def add(self, message: dict[str, Any]) -> int:
        """Record a completed message; returns its number in the turn."""
        self.messages.append(message)
        self.partial.clear()
        return len(self.messages)

    def restart(self) -> None:
        """The message being generated starts over: its text so far is void."""
        self.partial.clear()
        self.retries += 1

    def resume_from(self, messages: Sequence[dict[str, Any]]) -> None:
        """Continue after what the turn's first attempt stored (the user message included)."""
        self.messages = list(messages)
        self.stored = len(self.messages) + 1

    def add_usage(self, usage: UsageReport) -> None:
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        if usage.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + usage.cost_usd

    def unstored(self, tail: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
        """What the outcome commit must store (the turn's messages not yet durable, then
        `tail`), and the number of the first of them."""
        return [self.user_message, *self.messages, *tail][self.stored :], self.stored

    def final_message(self, end: TurnEnd) -> dict[str, Any] | None:
        """The reply to store with the outcome; None when the agent already completed it as
        its last message (the same text, no tool calls)."""
        last = self.messages[-1] if self.messages else None
        if (
            last is not None
            and last.get("role") == "assistant"
            and not last.get("tool_calls")
            and last.get("content") == end.text
        ):
            return None
        message: dict[str, Any] = {"role": "assistant", "content": end.text}
        if end.metadata:
            message["metadata"] = dict(end.metadata)
        return message

    def interrupted_tail(self, reason: str) -> list[dict[str, Any]]:
        """The partial text the user saw, as an assistant message marked interrupted."""
        text = "".join(self.partial)
        if not text:
            return []
        return [{"role": "assistant", "content": text, "metadata": {"interrupted": reason}}]


@dataclass(frozen=True, slots=True)
class StoredProgress:
    """What a turn's earlier attempt stored: its messages after the user message, and a
    synthetic result for each tool call left without one."""

    messages: list[dict[str, Any]]
    interrupted_results: list[dict[str, Any]]

    @property
    def completed_calls(self) -> int:
        return sum(1 for m in self.messages if m.get("role") == "tool")


def resume_progress(stored: Sequence[tuple[int, int, dict[str, Any]]]) -> StoredProgress:
    """`stored` is `(number, entry id, message)` of the turn as the store has it."""
    messages = [message for number, _, message in stored if number > 0]
    return StoredProgress(messages, _interrupted_results(messages))


def _interrupted_results(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    # Only the last assistant message can have calls still open: an agent runs a call's
    # results before it asks the model again. Its results are the tool messages after it.
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") == "tool":
            continue
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            return []
        answered = {m.get("tool_call_id") for m in messages[index + 1 :]}
        return [
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "name": str((call.get("function") or {}).get("name") or ""),
                "content": INTERRUPTED_TOOL_RESULT,
                "metadata": {"interrupted": "restart"},
            }
            for call in calls
            if isinstance(call, dict) and call.get("id") not in answered
        ]
    return []


def resume_note(attempt: int, stored: StoredProgress) -> str:
    """The note a resumed turn's agent gets: the restart, and what of its work is kept."""
    note = RESUME_NOTE.format(attempt=attempt)
    done = stored.completed_calls
    if done:
        note += (
            f" Before the restart, {done} tool call{'s' if done != 1 else ''} of this turn "
            "completed; their results are in the conversation: do not run them again, "
            "continue from them."
        )
    if stored.interrupted_results:
        names = ", ".join(
            sorted({r["name"] or r["tool_call_id"] for r in stored.interrupted_results})
        )
        count = len(stored.interrupted_results)
        note += (
            f" {count} tool call{'s' if count != 1 else ''} ({names}) had no result when the "
            "gateway stopped; each is marked interrupted in the conversation and may or may "
            "not have taken effect."
        )
    return note
