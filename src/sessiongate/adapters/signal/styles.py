"""Markdown (what agents write) to Signal's text styles: plain text plus body ranges.

Signal has no markup language: a message is plain text and a list of ranges, each a style
(BOLD, ITALIC, STRIKETHROUGH, MONOSPACE, SPOILER) over `start` and `length` counted in UTF-16
code units (an emoji outside the BMP is 2), sent to signal-cli as `"start:length:STYLE"`.

`to_signal_text` removes the Markdown markers and records a range for each span: `**bold**`
and `__bold__`, `*italic*` and `_italic_`, `~~strike~~`, `||spoiler||`, inline code and
fenced code blocks (monospace, the fence lines dropped), headings (bold) and GFM tables (kept
as they are, monospace, so columns line up). Links become `text (url)`. Spans nest (bold inside
italic); code is literal inside. A marker with no partner stays as text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["STYLES", "TextStyle", "to_signal_text", "utf16_units"]

STYLES = ("BOLD", "ITALIC", "STRIKETHROUGH", "MONOSPACE", "SPOILER")

_FENCE = re.compile(r"```[\w+#.-]*[^\n]*\n(.*?)(?:\n?```|\Z)", re.DOTALL)
_TABLE = re.compile(r"(?:^[ \t]*\|.*\|[ \t]*(?:\n|\Z))+", re.MULTILINE)
# (pattern, style, literal): the first match in the text wins; ties go to the earlier entry.
_SPANS: tuple[tuple[re.Pattern[str], str | None, bool], ...] = (
    (re.compile(r"`([^`\n]+)`"), "MONOSPACE", True),
    (re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.MULTILINE), "BOLD", False),
    (re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*", re.DOTALL), "BOLD", False),
    (re.compile(r"(?<!\w)__(?=\S)(.+?)(?<=\S)__(?!\w)", re.DOTALL), "BOLD", False),
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~", re.DOTALL), "STRIKETHROUGH", False),
    (re.compile(r"\|\|(?=\S)(.+?)(?<=\S)\|\|", re.DOTALL), "SPOILER", False),
    (re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])"), "ITALIC", False),
    (re.compile(r"(?<![\w_])_(?=[^\s_])([^_\n]+?)(?<=[^\s_])_(?![\w_])"), "ITALIC", False),
    (re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)"), None, False),
)


@dataclass(frozen=True, slots=True)
class TextStyle:
    start: int
    length: int
    style: str

    def wire(self) -> str:
        """signal-cli's `textStyle` form."""
        return f"{self.start}:{self.length}:{self.style}"


def utf16_units(text: str) -> int:
    """Length in UTF-16 code units; a lone surrogate (JSON may carry one) counts as one."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def to_signal_text(markdown: str) -> tuple[str, list[TextStyle]]:
    """(the text without markers, its style ranges in UTF-16 units)."""
    out = _Builder()
    pos = 0
    blocks = sorted(
        [(m.start(), m.end(), m.group(1)) for m in _FENCE.finditer(markdown)]
        + [(m.start(), m.end(), m.group(0).rstrip("\n")) for m in _TABLE.finditer(markdown)],
    )
    for start, end, body in blocks:
        if start < pos:
            continue  # a table row inside a code block
        _inline(markdown[pos:start], out)
        out.styled(body, "MONOSPACE")
        if end < len(markdown) and markdown[end - 1] == "\n":
            out.plain("\n")
        pos = end
    _inline(markdown[pos:], out)
    return out.text(), out.styles


class _Builder:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.units = 0
        self.styles: list[TextStyle] = []

    def plain(self, text: str) -> None:
        self.parts.append(text)
        self.units += utf16_units(text)

    def styled(self, text: str, style: str) -> None:
        start = self.units
        self.plain(text)
        if self.units > start:
            self.styles.append(TextStyle(start, self.units - start, style))

    def text(self) -> str:
        return "".join(self.parts)


def _inline(text: str, out: _Builder) -> None:
    while text:
        best: tuple[re.Match[str], str | None, bool] | None = None
        for pattern, style, literal in _SPANS:
            match = pattern.search(text)
            if match is not None and (best is None or match.start() < best[0].start()):
                best = (match, style, literal)
        if best is None:
            out.plain(text)
            return
        match, style, literal = best
        out.plain(text[: match.start()])
        if style is None:  # a link: its text, then the address
            _inline(match.group(1), out)
            out.plain(f" ({match.group(2)})")
        elif literal:
            out.styled(match.group(1), style)
        else:
            start = out.units
            _inline(match.group(1), out)
            if out.units > start:
                out.styles.append(TextStyle(start, out.units - start, style))
        text = text[match.end() :]
