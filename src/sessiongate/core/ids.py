"""Session ids and the validation every id gets before it can touch a path."""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING

from sessiongate.core.clock import Clock, ensure_utc
from sessiongate.errors import InvalidSessionIdError

if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["is_safe_id", "new_session_id", "validate_session_id"]

# Ids end up in file names (exports, archive blobs), so the alphabet excludes separators and
# the first character cannot be a dot: no "..", no "/", no "\", no "C:".
_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")


def new_session_id(clock: Clock, *, at: datetime | None = None) -> str:
    """`YYYYMMDD_HHMMSS_<8 hex>` in UTC."""
    when = ensure_utc(at or clock.now())
    # Formatted by hand: `strftime` was most of the cost of a new conversation's id.
    return (
        f"{when.year:04d}{when.month:02d}{when.day:02d}_"
        f"{when.hour:02d}{when.minute:02d}{when.second:02d}_{secrets.token_hex(4)}"
    )


def is_safe_id(value: object) -> bool:
    return isinstance(value, str) and bool(_SAFE_ID.fullmatch(value)) and ".." not in value


def validate_session_id(value: object) -> str:
    """Return `value` if it is a safe id, else raise `InvalidSessionIdError` (a `ValueError`)."""
    if not isinstance(value, str) or not is_safe_id(value):
        raise InvalidSessionIdError(f"invalid session id: {value!r}", session_id=value)
    return value
