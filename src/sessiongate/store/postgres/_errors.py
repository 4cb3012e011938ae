"""psycopg's errors as store errors: driver errors never leave `store/postgres/`."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import psycopg
from psycopg import errors as pg_errors

from sessiongate.errors import (
    ConflictError,
    InvalidEntryError,
    LeaseLostError,
    RouteChangedError,
    StoreCorruptError,
    StoreUnavailableError,
)
from sessiongate.store.records import TurnState, refused_turn

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["LEASE_LOST", "ROUTE_CHANGED", "TURN_REFUSED", "store_error", "translate_errors"]

# What `sg_fence_lane` raises when the lane's lease is no longer the transaction's to renew.
LEASE_LOST = "SGL01"
# What `sg_finish_reply` raises for a turn that is not running: the message is its state.
TURN_REFUSED = "SGT01"
# What `sg_put_route_seen` and `sg_route_seen` raise for a route that is no longer as seen.
ROUTE_CHANGED = "SGR01"


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    try:
        yield
    except (psycopg.Error, UnicodeEncodeError) as exc:
        raise store_error(exc) from exc


def store_error(exc: psycopg.Error | UnicodeEncodeError) -> Exception:
    """The store's error for what psycopg raised."""
    if isinstance(exc, UnicodeEncodeError):
        return InvalidEntryError("text must be valid Unicode (no lone surrogates such as \\ud800)")
    return _translated(exc)


def _translated(exc: psycopg.Error) -> Exception:
    if exc.sqlstate == LEASE_LOST:
        return LeaseLostError(exc.diag.message_primary or "the lane's lease moved on")
    if exc.sqlstate == ROUTE_CHANGED:
        return RouteChangedError(exc.diag.message_primary or "the route changed")
    if exc.sqlstate == TURN_REFUSED:
        state = exc.diag.message_primary or None
        turn_id = int(exc.diag.message_detail or 0)
        return refused_turn(turn_id, TurnState.REPLIED, [str(TurnState.RUNNING)], state)
    if isinstance(exc, pg_errors.IntegrityError):
        return ConflictError(f"the write conflicts with stored data: {exc}")
    if isinstance(exc, pg_errors.DataError):
        # NUL characters and the like: the input, not the database, is at fault.
        return InvalidEntryError(f"text the database cannot store: {exc}")
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return StoreUnavailableError(f"the database is unavailable: {exc}")
    return StoreCorruptError(f"database error: {exc}")
