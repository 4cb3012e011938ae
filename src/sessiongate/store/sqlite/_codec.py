"""Conversions between Python values and column values, shared by the SQLite modules."""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import Any

__all__ = ["dumps", "from_us", "iso_from_us", "loads", "to_us"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(value: datetime) -> int:
    """Aware datetime → integer microseconds since the epoch (exact, sortable)."""
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return datetime.fromtimestamp(value // 1_000_000, UTC).replace(microsecond=value % 1_000_000)


@functools.lru_cache(maxsize=4096)
def _iso_second(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def iso_from_us(value: int) -> str:
    """Same text as `from_us(value).isoformat()`, without building a datetime per row.

    Transcript loads format one timestamp per message; consecutive messages share a second.
    """
    seconds, micros = divmod(value, 1_000_000)
    base = _iso_second(seconds)
    return f"{base}.{micros:06d}+00:00" if micros else f"{base}+00:00"


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(text: str) -> Any:
    return json.loads(text)
