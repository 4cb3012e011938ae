"""Markdown (what agents write) to WhatsApp's own markers.

WhatsApp formats `*bold*`, `_italic_`, `~strike~`, ``` ```monospace``` ``` and `` `code` ``;
it has no headings (rendered bold), no links with text (written `text (url)`) and no tables
(kept as a monospace block so columns line up). It never refuses a message for its markers,
so the plain-text resend of other platforms is never needed here. Text limit: 4,096
characters per message.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sessiongate.adapters.kit.formatting import to_plain_text

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["WHATSAPP_LIMIT", "to_plain", "to_whatsapp"]

WHATSAPP_LIMIT = 4096

_FENCE = re.compile(r"```[\w+#.-]*[^\n]*\n(.*?)(?:\n?```|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC_STAR = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
# Placeholders no Markdown rule matches: bold markers and protected code spans.
_B = "\x03"
_SLOT = re.compile("\x02(\\d+)\x02")


def to_whatsapp(markdown: str) -> str:
    kept: list[str] = []

    def keep(text: str) -> str:
        kept.append(text)
        return f"\x02{len(kept) - 1}\x02"

    text = _FENCE.sub(lambda m: keep(f"```{m.group(1)}```"), markdown)
    text = _tables(text, keep)
    text = _INLINE_CODE.sub(lambda m: keep(f"`{m.group(1)}`"), text)
    text = _LINK.sub(r"\1 (\2)", text)
    text = _HEADING.sub(lambda m: f"{_B}{m.group(1)}{_B}", text)
    text = _BOLD.sub(lambda m: f"{_B}{m.group(1) or m.group(2)}{_B}", text)
    text = _ITALIC_STAR.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = text.replace(_B, "*")
    return _SLOT.sub(lambda m: kept[int(m.group(1))], text)


def _tables(text: str, keep: Callable[[str], str]) -> str:
    lines = text.split("\n")
    out: list[str] = []
    table: list[str] = []
    for line in [*lines, None]:
        if line is not None and _TABLE_ROW.match(line):
            table.append(line)
            continue
        if table:
            out.append(keep("```" + "\n".join(table) + "```"))
            table = []
        if line is not None:
            out.append(line)
    return "\n".join(out)


def to_plain(markdown: str) -> str:
    return to_plain_text(markdown)
