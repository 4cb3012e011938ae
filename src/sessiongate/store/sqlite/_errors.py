"""SQLite's errors as store errors: `sqlite3` errors never leave `store/sqlite/`."""

from __future__ import annotations

import contextlib
import sqlite3
from typing import TYPE_CHECKING

from sessiongate.errors import (
    ConflictError,
    InvalidEntryError,
    StoreCorruptError,
    StoreUnavailableError,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["SQLITE_ERRORS", "translate_errors", "translated"]


# What `translated` knows how to turn into a store error.
SQLITE_ERRORS = (sqlite3.DatabaseError, UnicodeEncodeError)


def translated(exc: sqlite3.DatabaseError | UnicodeEncodeError) -> Exception:
    """The store error for a `sqlite3` error (or text SQLite could not bind)."""
    if isinstance(exc, UnicodeEncodeError):
        # Python text can hold lone surrogates that no UTF-8 column can store; checked where
        # SQLite binds it, so every write path refuses it without a per-message scan.
        return InvalidEntryError("text must be valid Unicode (no lone surrogates such as \\ud800)")
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        if "full" in text or "readonly" in text or "read-only" in text or "locked" in text:
            return StoreUnavailableError(f"the database refused the write: {exc}")
        return StoreUnavailableError(f"database error: {exc}")
    if isinstance(exc, sqlite3.IntegrityError):
        return ConflictError(f"the write conflicts with stored data: {exc}")
    return StoreCorruptError(
        f"database error: {exc}; run `sessiongate doctor` to inspect the store"
    )


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn the disk's refusals into store errors; `sqlite3` errors never leave `store/`."""
    try:
        yield
    except SQLITE_ERRORS as exc:
        raise translated(exc) from exc
