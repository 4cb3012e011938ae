"""Splitting a reply at the platform's limit, measured the platform's way.

Telegram counts UTF-16 code units (an emoji outside the BMP is 2), Discord 2,000 characters,
Slack about 4,000. A chunk ends at the last paragraph break that fits, else the last sentence
end, else the last line break, else the last space, else hard at the limit; a cut never falls
inside a character (Python strings hold code points, so a surrogate pair is never split). A
chunk that ends inside a ``` fence is closed, and the next chunk reopens it with the same
language, so each message renders on its own.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "DISCORD_LIMIT",
    "SLACK_LIMIT",
    "TELEGRAM_LIMIT",
    "open_fence",
    "split_text",
    "utf16_len",
]

TELEGRAM_LIMIT = 4096
DISCORD_LIMIT = 2000
SLACK_LIMIT = 4000

_FENCE_CLOSE = "\n```"
_SENTENCE_END = re.compile(r"[.!?…][)\"'\]]*\s")
# A break found in the first part of the window would make a needlessly short chunk; below this
# fraction of the window the next, finer kind of break is tried instead.
_MIN_FILL = 0.3


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, Telegram's measure."""
    return len(text.encode("utf-16-le")) // 2


def split_text(text: str, limit: int, *, measure: Callable[[str], int] = len) -> list[str]:
    """`text` as chunks each at most `limit` by `measure`; one chunk when it fits."""
    if limit <= len(_FENCE_CLOSE) + 8:
        raise ValueError(f"limit {limit} is too small to split into")
    chunks: list[str] = []
    piece = text
    while piece:
        if measure(piece) <= limit:
            chunks.append(piece)
            break
        budget = limit - measure(_FENCE_CLOSE)
        end = _fit(piece, budget, measure)
        cut = _best_cut(piece, end, low=_reopened_length(piece) + 1)
        head, rest = piece[:cut].rstrip(), piece[cut:]
        fence = open_fence(head)
        if fence is not None:
            head += _FENCE_CLOSE
            rest = fence + "\n" + rest.lstrip("\n")
        else:
            rest = rest.lstrip("\n ")
        if head.strip():
            chunks.append(head)
        piece = rest
    return chunks


def open_fence(text: str) -> str | None:
    """The opening line (```` ```lang ````) of a fence `text` leaves open, else None."""
    opener: str | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith("```"):
            opener = None if opener is not None else stripped
    return opener


def _reopened_length(piece: str) -> int:
    """A chunk that starts by reopening a fence must hold more than the opener line."""
    if piece.startswith("```"):
        newline = piece.find("\n")
        return newline + 1 if newline >= 0 else 0
    return 0


def _fit(text: str, budget: int, measure: Callable[[str], int]) -> int:
    """The largest n with measure(text[:n]) <= budget (measure grows with n)."""
    low, high = 1, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if measure(text[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


def _best_cut(text: str, end: int, *, low: int) -> int:
    window = text[:end]
    floor = max(low, int(end * _MIN_FILL))
    for sep in ("\n\n",):
        at = window.rfind(sep)
        if at >= floor:
            return at + len(sep)
    sentence = None
    for match in _SENTENCE_END.finditer(window):
        sentence = match
    if sentence is not None and sentence.end() >= floor:
        return sentence.end()
    for sep in ("\n", " "):
        at = window.rfind(sep)
        if at >= floor:
            return at + len(sep)
    return end
