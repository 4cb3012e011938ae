"""Markdown (what agents write) to a platform's markup, and to plain text for the resend.

`to_telegram_html` renders the common subset: fenced and inline code, bold, italic,
strikethrough, links, headings (as bold), block quotes, and tables (kept monospace, so columns
line up). HTML is Telegram's most forgiving mode: only `<`, `>` and `&` need escaping, where
MarkdownV2 needs eighteen characters escaped outside entities. When the platform still refuses
the markup, the kit resends `to_plain_text` of the same Markdown (markers removed), so a reply
is never lost to formatting. `defuse_mass_mentions` keeps @everyone/@here/@room from pinging.
"""

from __future__ import annotations

import html
import re

__all__ = ["defuse_mass_mentions", "to_plain_text", "to_telegram_html"]

_FENCE = re.compile(r"```([\w+#.-]*)[^\n]*\n(.*?)(?:\n?```|\Z)", re.DOTALL)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(
    r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])|(?<!\w)_(?=\S)([^_\n]+?)(?<=\S)_(?!\w)"
)
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_QUOTE = re.compile(r"^(?:&gt;|>) ?(.*)$", re.MULTILINE)
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_MASS = re.compile(r"@(everyone|here|room|channel)\b", re.IGNORECASE)
# A zero-width space after the @ keeps the text readable but no longer a mention.
_ZWSP = "\u200b"


def to_telegram_html(markdown: str) -> str:
    out: list[str] = []
    pos = 0
    for match in _FENCE.finditer(markdown):
        out.append(_inline_html(markdown[pos : match.start()]))
        lang, body = match.group(1), html.escape(match.group(2), quote=False)
        attr = f' class="language-{html.escape(lang)}"' if lang else ""
        out.append(f"<pre><code{attr}>{body}</code></pre>")
        pos = match.end()
    out.append(_inline_html(markdown[pos:]))
    return "".join(out)


def _inline_html(text: str) -> str:
    text = _tables_to_pre(text)
    parts: list[str] = []
    pos = 0
    for match in _INLINE_CODE.finditer(text):
        parts.append(_spans_html(text[pos : match.start()]))
        parts.append(f"<code>{html.escape(match.group(1), quote=False)}</code>")
        pos = match.end()
    parts.append(_spans_html(text[pos:]))
    return "".join(parts)


def _tables_to_pre(text: str) -> str:
    """GFM table rows stay as they are but monospace (marked for `_spans_html` to keep)."""
    lines = text.split("\n")
    out: list[str] = []
    table: list[str] = []
    for line in [*lines, None]:
        if line is not None and _TABLE_ROW.match(line):
            table.append(line)
            continue
        if table:
            body = "\n".join(table)
            out.append("\x00PRE" + body.replace("`", "\x01") + "\x00")
            table = []
        if line is not None:
            out.append(line)
    return "\n".join(out)


def _spans_html(text: str) -> str:
    pres: list[str] = []

    def keep_pre(match: re.Match[str]) -> str:
        pres.append(match.group(1).replace("\x01", "`"))
        return f"\x02{len(pres) - 1}\x02"

    text = re.sub(r"\x00PRE(.*?)\x00", keep_pre, text, flags=re.DOTALL)
    text = html.escape(text, quote=False)
    # The text is escaped already (`&` is `&amp;`); only a quote could end the attribute.
    text = _LINK.sub(
        lambda m: f'<a href="{m.group(2).replace(chr(34), "&quot;")}">{m.group(1)}</a>', text
    )
    text = _HEADING.sub(r"<b>\1</b>", text)
    text = _BOLD.sub(lambda m: f"<b>{m.group(1) or m.group(2)}</b>", text)
    text = _ITALIC.sub(lambda m: f"<i>{m.group(1) or m.group(2)}</i>", text)
    text = _STRIKE.sub(r"<s>\1</s>", text)
    text = _QUOTE.sub(r"<blockquote>\1</blockquote>", text)
    text = text.replace("</blockquote>\n<blockquote>", "\n")
    return re.sub(
        r"\x02(\d+)\x02",
        lambda m: f"<pre>{html.escape(pres[int(m.group(1))], quote=False)}</pre>",
        text,
    )


def to_plain_text(markdown: str) -> str:
    """The same text with the Markdown markers removed (links as `text (url)`)."""
    text = _FENCE.sub(lambda m: m.group(2), markdown)
    text = _INLINE_CODE.sub(r"\1", text)
    text = _LINK.sub(r"\1 (\2)", text)
    text = _HEADING.sub(r"\1", text)
    text = _BOLD.sub(lambda m: m.group(1) or m.group(2), text)
    text = _ITALIC.sub(lambda m: m.group(1) or m.group(2), text)
    return _STRIKE.sub(r"\1", text)


def defuse_mass_mentions(text: str) -> str:
    return _MASS.sub(lambda m: f"@{_ZWSP}{m.group(1)}", text)
