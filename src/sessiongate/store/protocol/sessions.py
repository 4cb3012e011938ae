"""The `sessions` family: one row per incarnation of a conversation (`SessionRow`), its
header, saved counters and end.

SQLite: `sqlite/sessions.py`; PostgreSQL: `postgres/sessions.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from sessiongate.store.records import SessionRow

__all__ = ["SessionsTx"]


class SessionsTx(Protocol):
    """Session rows. `sid` is the row's internal number (entries hang off it); the session id
    is the public name. Times are integer microseconds; headers and counters are JSON."""

    def get_session_row(self, session_id: str) -> SessionRow | None:
        """The session with its active leaf (id, depth, message depth); None when unknown."""
        ...

    def unused_session_id(self, make: Callable[[], str]) -> str:
        """An id from `make` that no session has (drawn again while taken); `RuntimeError`
        after 16 draws that were all taken."""
        ...

    def create_session_row(
        self,
        *,
        session_id: str,
        session_key: str | None,
        parent_session_id: str | None,
        started_at: int,
        header: dict[str, Any],
    ) -> SessionRow:
        """Write a new, empty session and return it as `get_session_row` would read it;
        `ConflictError` when the id is taken."""
        ...

    def create_fresh_session_row(
        self,
        make_id: Callable[[], str],
        *,
        session_key: str | None,
        parent_session_id: str | None,
        started_at: int,
        header: Callable[[str], dict[str, Any]],
    ) -> str:
        """`create_session_row` under a fresh id from `make_id` (its header `header(id)`),
        drawn again when taken; the id. `RuntimeError` after 16 draws that were all taken."""
        ...

    def end_session_row(self, sid: int, *, at: int | None, reason: str | None) -> None:
        """Mark the session ended at `at` for `reason`; None and None reopen it."""
        ...

    def save_counters(self, sid: int, counters: dict[str, Any]) -> None:
        """Keep a left incarnation's usage counters with it."""
        ...

    def load_counters(self, sid: int) -> dict[str, Any] | None:
        """An incarnation's saved usage counters; None when it was never left."""
        ...

    def has_any_sessions(self) -> bool:
        """Whether the database holds any session at all."""
        ...

    def key_has_history(self, session_key: str) -> bool:
        """Whether any session was ever keyed by `session_key` (a key with sessions but no
        route had its route pruned)."""
        ...

    def session_ids_of_key(self, session_key: str) -> list[str]:
        """The ids of the key's sessions, the latest started first."""
        ...

    def sessions_of_lane(self, session_key: str, session_id: str) -> list[tuple[int, str, str]]:
        """(sid, session id, header JSON) of the key's sessions and of `session_id`, in no
        particular order: what deleting the lane removes."""
        ...

    def delete_session_rows(self, sid: int) -> None:
        """Delete the session, its entries and its branch tips (the search index is the
        caller's to update first: `SearchTx.drop_session_from_search`)."""
        ...
