"""The `search` family: full-text search over the active paths' messages.

SQLite keeps a side index (FTS5) with a cursor that can fall behind, go stale or be
damaged; PostgreSQL's generated `tsvector` column is written with its row, so its
maintenance methods do nothing. SQLite: `sqlite/search.py`; PostgreSQL:
`postgres/search.py`.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["SearchTx"]


class SearchTx(Protocol):
    """A hit is a dict of `session_id`, `session_key`, `role`, `snippet` and `timestamp`
    (ISO-8601). A damaged index raises `StoreCorruptError`, which the store answers by
    marking it stale and scanning instead."""

    def search_is_stale(self) -> bool:
        """Whether the index was marked stale (and should not be queried until rebuilt)."""
        ...

    def mark_search_stale(self, reason: BaseException) -> None:
        """Record that the index failed with `reason` (it is logged; SQLite marks the index
        stale until a rebuild)."""
        ...

    def catch_up_search(self) -> int:
        """Index the entries written since the cursor; how many ids the cursor moved over."""
        ...

    def drop_session_from_search(self, sid: int) -> None:
        """Remove the session's entries from the index, before the entries are deleted."""
        ...

    def lower_search_cursor(self) -> None:
        """After entries were deleted: pull the cursor back to the newest remaining id, so
        entries that reuse freed ids are indexed."""
        ...

    # `key_prefix` keeps only the sessions whose key starts with it (one agent's, `agent:<id>:`);
    # `tree_of` only that key's session and its forks' (keys starting `<key>:%f`). Both filter
    # in the query itself, so `limit` hits are the best-ranked of what may be seen.
    def search_index(
        self, query: str, limit: int, *, key_prefix: str | None = None, tree_of: str | None = None
    ) -> list[dict[str, Any]]:
        """The best-ranked `limit` hits of the query's words (operators are plain words);
        [] for a query without a word."""
        ...

    def search_scan(
        self, query: str, limit: int, *, key_prefix: str | None = None, tree_of: str | None = None
    ) -> list[dict[str, Any]]:
        """The fallback: the newest `limit` messages holding `query` as a substring, found
        without the index (slower, but independent of it)."""
        ...

    def rebuild_search_index(self) -> int:
        """Rebuild the index from the entries and clear the stale mark; how many entries it
        holds."""
        ...

    def search_index_status(self) -> dict[str, Any]:
        """`stale`, `cursor` (the newest indexed id) and `pending` (entries not yet
        indexed)."""
        ...

    def search_integrity_check(self) -> str | None:
        """None when the index agrees with the entries, else the error text."""
        ...
