"""One streamed chat completion: text deltas as they come, then the whole assistant message.

The message is assembled from the chunks (text pieces, tool-call deltas keyed by their
`index`, the usage chunk that `stream_options.include_usage` adds at the end) and handed out
only when the stream ended cleanly with a `finish_reason`: a stream cut off mid-way raises
`BrokenStreamError` and one with nothing in it `EmptyResponseError`, so no half message is
ever completed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sessiongate.agents._upstream import BrokenStreamError, EmptyResponseError
from sessiongate.core.turn_events import TextDelta, UsageReport

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from openai import AsyncOpenAI

__all__ = ["Completion", "stream_completion", "usage_report"]

# Transport libraries whose errors mean the connection broke while the body was read; the SDK
# raises them unwrapped from inside a stream (its HTTP client has changed name across releases).
_TRANSPORT_MODULES = frozenset({"httpx", "httpx2", "httpcore", "httpcore2", "h11", "anyio"})


@dataclass(frozen=True, slots=True)
class Completion:
    """A finished assistant message (chat format), with the call's usage when reported."""

    message: dict[str, Any]
    finish_reason: str
    usage: UsageReport | None = None


@dataclass(slots=True)
class _CallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


async def stream_completion(
    client: AsyncOpenAI, request: dict[str, Any]
) -> AsyncIterator[TextDelta | Completion]:
    """Run `client.chat.completions.create(**request, stream=True)`; yield each text delta,
    then one `Completion`. Raises the SDK's errors, `BrokenStreamError` or
    `EmptyResponseError`."""
    text: list[str] = []
    calls: dict[int, _CallParts] = {}
    finish: str | None = None
    usage: UsageReport | None = None
    saw_choice = False
    stream = await client.chat.completions.create(
        **request, stream=True, stream_options={"include_usage": True}
    )
    try:
        async with stream:
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = usage_report(chunk.usage)
                for choice in chunk.choices:
                    if choice.index != 0:
                        continue  # we ask for one choice; a server sending more is ignored
                    saw_choice = True
                    delta = getattr(choice, "delta", None)
                    if delta is None:
                        continue  # a chunk without its delta (the SDK builds chunks unchecked)
                    if delta.content:
                        text.append(delta.content)
                        yield TextDelta(delta.content)
                    for call in delta.tool_calls or ():
                        parts = calls.setdefault(call.index, _CallParts())
                        if call.id:
                            parts.id = call.id
                        if call.function is not None:
                            parts.name += call.function.name or ""
                            parts.arguments.append(call.function.arguments or "")
                    if choice.finish_reason:
                        finish = choice.finish_reason
    except json.JSONDecodeError as exc:
        raise BrokenStreamError(f"a chunk that is not JSON: {exc}") from exc
    except Exception as exc:
        if type(exc).__module__.split(".")[0] in _TRANSPORT_MODULES:
            raise BrokenStreamError(f"{type(exc).__name__}: {exc}") from exc
        raise
    if not saw_choice:
        raise EmptyResponseError("the server answered with no choices")
    if finish is None:
        raise BrokenStreamError("the stream ended before the message finished")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": parts.id or f"call_{index}",
                "type": "function",
                "function": {"name": parts.name, "arguments": "".join(parts.arguments)},
            }
            for index, parts in sorted(calls.items())
        ]
    elif message["content"] is None:
        raise EmptyResponseError("the answer holds no text and no tool calls")
    yield Completion(message=message, finish_reason=finish, usage=usage)


def usage_report(usage: Any) -> UsageReport:
    """The SDK's `CompletionUsage` as a `UsageReport` (cache counts where the server gives
    them)."""
    details = getattr(usage, "prompt_tokens_details", None)
    return UsageReport(
        input_tokens=int(usage.prompt_tokens or 0),
        output_tokens=int(usage.completion_tokens or 0),
        cache_read_tokens=int(getattr(details, "cached_tokens", None) or 0),
        cache_write_tokens=int(getattr(details, "cache_write_tokens", None) or 0),
    )
