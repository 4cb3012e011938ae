"""psycopg's errors as store errors: driver errors never leave `store/postgres/`."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import psycopg
from psycopg import errors as pg_errors

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
    try:
        yield
    except pg_errors.IntegrityError as exc:
        raise ConflictError(f"the write conflicts with stored data: {exc}") from exc
    except pg_errors.UntranslatableCharacter as exc:
        raise InvalidEntryError(f"text the database cannot store: {exc}") from exc
    except pg_errors.DataError as exc:
        # NUL characters and the like: the input, not the database, is at fault.
        raise InvalidEntryError(f"text the database cannot store: {exc}") from exc
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise StoreUnavailableError(f"the database is unavailable: {exc}") from exc
    except psycopg.Error as exc:
        raise StoreCorruptError(f"database error: {exc}") from exc
    except UnicodeEncodeError as exc:
        raise InvalidEntryError(
            "text must be valid Unicode (no lone surrogates such as \\ud800)"
        ) from exc
