"""Conversions between Python values and column values, shared by the SQLite modules."""

from __future__ import annotations

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


def iso_from_us(value: int) -> str:
    return from_us(value).isoformat()


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def loads(text: str) -> Any:
    return json.loads(text)
