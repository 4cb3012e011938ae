"""Markdown (what agents write) to Matrix's HTML `formatted_body`, and how a chunk is measured.

The kit's HTML renderer emits the tags Matrix clients render too (`b`, `i`, `s`, `code`, `pre`,
`a`, `blockquote`); Matrix adds only that line breaks must be `<br>` outside preformatted
blocks, since HTML folds newlines. The plain `body` beside it is the same text without tags
(`client.html_to_body`), and the plain resend is the kit's `to_plain_text`.
"""

from __future__ import annotations

from sessiongate.adapters.kit.formatting import to_plain_text, to_telegram_html
from sessiongate.adapters.kit.outbound import Rendering

__all__ = ["MATRIX_LIMIT", "MATRIX_RENDERING", "html_len", "to_matrix_html", "utf8_len"]

# Hermes's default. One event carries at most 65,535 bytes, `body` and `formatted_body`
# together, so a chunk is measured as the UTF-8 bytes of the HTML it is sent as (the longer
# of the two): 16,000 leaves room for the plain body and the event's envelope.
MATRIX_LIMIT = 16_000


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


def html_len(markdown: str) -> int:
    """A chunk's size as sent: the UTF-8 bytes of its `formatted_body`."""
    return utf8_len(to_matrix_html(markdown))


def to_matrix_html(markdown: str) -> str:
    """The kit's HTML (the tags Matrix clients render too), with line breaks as `<br>`
    outside preformatted blocks (HTML folds newlines)."""
    rendered = to_telegram_html(markdown)
    parts = rendered.split("<pre>")
    out = [parts[0].replace("\n", "<br>")]
    for part in parts[1:]:
        inside, _, after = part.partition("</pre>")
        out.append(f"<pre>{inside}</pre>{after.replace(chr(10), '<br>')}")
    return "".join(out)


MATRIX_RENDERING = Rendering(
    limit=MATRIX_LIMIT, measure=html_len, render=to_matrix_html, plain=to_plain_text
)
