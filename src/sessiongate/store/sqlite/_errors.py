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

__all__ = ["translate_errors"]


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn the disk's refusals into store errors; `sqlite3` errors never leave `store/`."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        text = str(exc).lower()
        if "full" in text or "readonly" in text or "read-only" in text or "locked" in text:
            raise StoreUnavailableError(f"the database refused the write: {exc}") from exc
        raise StoreUnavailableError(f"database error: {exc}") from exc
    except sqlite3.IntegrityError as exc:
        raise ConflictError(f"the write conflicts with stored data: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise StoreCorruptError(
            f"database error: {exc}; run `sessiongate doctor` to inspect the store"
        ) from exc
    except UnicodeEncodeError as exc:
        # Python text can hold lone surrogates that no UTF-8 column can store; checked where
        # SQLite binds it, so every write path refuses it without a per-message scan.
        raise InvalidEntryError(
            "text must be valid Unicode (no lone surrogates such as \\ud800)"
        ) from exc
