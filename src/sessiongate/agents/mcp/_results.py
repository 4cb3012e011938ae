"""An MCP tool result as the text the model reads."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sessiongate.agents.tools import ToolError

if TYPE_CHECKING:
    from mcp_types import CallToolResult

__all__ = ["result_text"]


def result_text(result: CallToolResult) -> str:
    """The result's text content, one block a line; blocks that are no text (an image, a
    resource link) as a short note of what they were; the structured content as JSON when
    there is nothing else. A result the server marks `isError` raises `ToolError` with that
    text, so the model gets it as an error result."""
    parts: list[str] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(str(getattr(block, "text", "")))
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} content ({getattr(block, 'mime_type', '?')}) not shown]")
        elif kind == "resource":
            resource = getattr(block, "resource", None)
            text = getattr(resource, "text", None)
            parts.append(
                text if isinstance(text, str) else f"[resource {getattr(resource, 'uri', '')}]"
            )
        elif kind == "resource_link":
            parts.append(f"[resource link {getattr(block, 'uri', '')}]")
        else:
            parts.append(f"[{kind or 'unknown'} content not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    text = "\n".join(parts)
    if result.is_error:
        raise ToolError(text or "the tool reported an error without a message")
    return text
