"""What the framework bridges share: the turn's messages in the transcript's chat format.

A framework reports a model response piece by piece (its text, then each tool call, then
each tool's output). `Assembly` turns that into the turn events the gateway stores: one
assistant `MessageCompleted` per model response (its text and its `tool_calls` together, as
the transcript pairs them), emitted before the first result of its calls, then one
`ToolResult` per call. Content is always text; anything else is JSON.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sessiongate.core.transcript import deterministic_summary
from sessiongate.core.turn_events import MessageCompleted, ToolResult

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["Assembly", "as_text", "split_request", "summary_of"]


def as_text(value: object) -> str:
    """A tool output or message content as the text the transcript stores."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) for p in value):
        # Chat-format content parts: the text ones.
        return "".join(str(p.get("text") or "") for p in value if p.get("type") == "text")
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def split_request(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
    """The model context before the new user message, and that message's text."""
    if not messages or messages[-1].get("role") != "user":
        return list(messages), ""
    return list(messages[:-1]), as_text(messages[-1].get("content"))


def summary_of(messages: list[dict[str, Any]]) -> str:
    """The compaction summary the bridges give: deterministic, needing no model call."""
    return deterministic_summary(messages)


class Assembly:
    """The assistant message being assembled, and the names of the calls it made."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: list[dict[str, Any]] = []
        self._name: str | None = None
        self._names: dict[str, str] = {}
        self._metadata: dict[str, Any] = {}
        # The calls of the last message flushed (the ones a pause for approval is about).
        self.last_calls: list[dict[str, Any]] = []

    def text(self, text: str, *, name: str | None = None) -> Iterator[MessageCompleted]:
        """A complete text of the model's response (a new one flushes the previous)."""
        if self._calls:
            yield from self.flush()
        self._text.append(text)
        self._name = name or self._name

    def call(self, call_id: str, name: str, arguments: object, *, agent: str | None = None) -> None:
        self._calls.append(
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else as_text(arguments),
                },
            }
        )
        self._names[call_id] = name
        self._name = agent or self._name

    def note(self, key: str, value: object) -> None:
        """A metadata field of the message being assembled (stored with it)."""
        self._metadata[key] = value

    def known(self, call_id: str, name: str) -> None:
        """A call of a message stored before (its result is still to come)."""
        self._names[call_id] = name

    def result(
        self, call_id: str, output: object, *, is_error: bool = False
    ) -> Iterator[MessageCompleted | ToolResult]:
        yield from self.flush()
        name = self._names.get(call_id, "")
        yield ToolResult(call_id, name, as_text(output), is_error=is_error)

    def flush(self) -> Iterator[MessageCompleted]:
        """The assembled message, if anything was assembled."""
        if not self._text and not self._calls:
            return
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._calls:
            message["tool_calls"] = self._calls
        if self._name:
            message["name"] = self._name
        if self._metadata:
            message["metadata"] = self._metadata
        self.last_calls = self._calls
        self._text, self._calls, self._metadata = [], [], {}
        yield MessageCompleted(message)
