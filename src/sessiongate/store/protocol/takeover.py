"""The `takeover` family: lanes an operator took over (`store/takeover.py` states the rules).
SQLite: `sqlite/takeover.py`; PostgreSQL: `postgres/takeover.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sessiongate.store.records import TakeoverRow

__all__ = ["TakeoverTx"]


class TakeoverTx(Protocol):
    """Lanes an operator took over: one row per session key while it is taken over. Every
    method runs in the caller's transaction; times are integer microseconds."""

    def put_takeover(self, row: TakeoverRow) -> bool:
        """Take the lane over; False (nothing changed) when it is taken over already."""
        ...

    def get_takeover(self, session_key: str) -> TakeoverRow | None:
        """The lane's takeover, or None when the agent has it."""
        ...

    def list_takeovers(self) -> list[TakeoverRow]:
        """Every lane taken over, oldest first."""
        ...

    def delete_takeover(self, session_key: str) -> TakeoverRow | None:
        """Give the lane back; the row it had, or None when it was not taken over."""
        ...
