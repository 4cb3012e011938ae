"""Markdown (what agents write) to Slack's mrkdwn, and mrkdwn to Block Kit sections.

Slack's mrkdwn differs from Markdown in its markers: `*bold*`, `_italic_`, `~strike~`,
`<url|text>` links, no headings (rendered bold) and no language after a code fence; `&`, `<`
and `>` must be escaped everywhere, which is also what keeps `<!channel>`, `<!here>` and
`<@U…>` written by an agent from pinging anyone. Tables become code blocks so columns line up.
A chunk is posted as `section` blocks (Slack caps a section's text at 3,000 characters) with a
plain-text `text` fallback for notifications; a refused block is sent again as plain text.
"""

from __future__ import annotations

import re
from typing import Any

from sessiongate.adapters.kit.formatting import to_plain_text
from sessiongate.adapters.kit.splitting import split_text

__all__ = ["SECTION_LIMIT", "escape", "to_blocks", "to_mrkdwn", "to_plain"]

# Slack refuses a section block whose text is longer than this.
SECTION_LIMIT = 3000

_FENCE = re.compile(r"```[\w+#.-]*[^\n]*\n(.*?)(?:\n?```|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(
    r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])|(?<!\w)_(?=\S)([^_\n]+?)(?<=\S)_(?!\w)"
)
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
# Placeholders that no Markdown rule matches: bold markers and protected code spans.
_B = "\x03"
_SLOT = re.compile("\x02(\\d+)\x02")


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    slots: list[str] = []

    def keep(rendered: str) -> str:
        slots.append(rendered)
        return f"\x02{len(slots) - 1}\x02"

    text = _FENCE.sub(lambda m: keep(f"```\n{escape(m.group(1))}\n```"), markdown)
    text = _tables_to_code(text, keep)
    text = _INLINE_CODE.sub(lambda m: keep(f"`{escape(m.group(1))}`"), text)
    text = _LINK.sub(lambda m: keep(f"<{m.group(2)}|{escape(m.group(1))}>"), text)
    lines = []
    for line in text.split("\n"):
        # A block quote's `>` is mrkdwn syntax; every other `>` is text and escaped.
        if line.startswith(">"):
            lines.append(">" + escape(line[1:]))
        else:
            lines.append(escape(line))
    text = "\n".join(lines)
    text = _HEADING.sub(lambda m: f"{_B}{m.group(1)}{_B}", text)
    text = _BOLD.sub(lambda m: f"{_B}{m.group(1) or m.group(2)}{_B}", text)
    text = _ITALIC.sub(lambda m: f"_{m.group(1) or m.group(2)}_", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = text.replace(_B, "*")
    return _SLOT.sub(lambda m: slots[int(m.group(1))], text)


def _tables_to_code(text: str, keep: Any) -> str:
    out: list[str] = []
    table: list[str] = []
    for line in [*text.split("\n"), None]:
        if line is not None and _TABLE_ROW.match(line):
            table.append(line)
            continue
        if table:
            out.append(keep("```\n" + escape("\n".join(table)) + "\n```"))
            table = []
        if line is not None:
            out.append(line)
    return "\n".join(out)


def to_plain(markdown: str) -> str:
    """The text without markers, escaped (Slack parses `<…>` even in plain text)."""
    return escape(to_plain_text(markdown))


def to_blocks(mrkdwn: str) -> list[dict[str, Any]]:
    """One chunk of mrkdwn as `section` blocks of at most SECTION_LIMIT characters each."""
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": part}}
        for part in split_text(mrkdwn, SECTION_LIMIT)
    ]
