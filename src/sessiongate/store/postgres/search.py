"""The `SearchTx` family on PostgreSQL: the generated `tsvector` column of the entries.

The column is written with its row, in the same transaction: there is no side index to fall
behind, go stale or rebuild, so the maintenance methods do nothing (`sqlite/search.py` has
the side index they keep).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from sessiongate.core.keys import FORK_TAG
from sessiongate.store.postgres._tx_base import TxBase
from sessiongate.store.records import (
    iso_from_us,
)

__all__ = ["PostgresSearch"]

log = logging.getLogger(__name__)

_MAX_ENTRY_ID = "SELECT coalesce(max(id), 0) FROM entries"

_SEARCH = """
SELECT s.session_id, s.session_key, e.role,
       ts_headline('simple', e.content, q,
           'StartSel=[, StopSel=], MaxWords=12, MinWords=4, MaxFragments=1, '
           'FragmentDelimiter=…'),
       sg_us(e.ts)
FROM entries e JOIN sessions s ON s.sid = e.sid, plainto_tsquery('simple', %(terms)s) AS q
WHERE e.search @@ q AND e.on_path = 1
  AND (%(prefix)s::text IS NULL OR starts_with(s.session_key, %(prefix)s::text))
  AND (%(tree)s::text IS NULL OR s.session_key = %(tree)s::text
       OR starts_with(s.session_key, %(forks)s::text))
ORDER BY ts_rank(e.search, q) DESC, e.id DESC
LIMIT %(limit)s
"""

_SCAN = """
SELECT s.session_id, s.session_key, e.role, e.content, sg_us(e.ts)
FROM entries e JOIN sessions s ON s.sid = e.sid
WHERE e.on_path = 1 AND e.type = 'message' AND e.role IN ('user', 'assistant')
  AND e.content LIKE %(like)s ESCAPE '\\'
  AND (%(prefix)s::text IS NULL OR starts_with(s.session_key, %(prefix)s::text))
  AND (%(tree)s::text IS NULL OR s.session_key = %(tree)s::text
       OR starts_with(s.session_key, %(forks)s::text))
ORDER BY e.id DESC
LIMIT %(limit)s
"""

_TOKEN = re.compile(r"\w+", re.UNICODE)


def _hit(row: tuple[Any, ...], *, scan: bool = False) -> dict[str, Any]:
    snippet = row[3] or ""
    if scan and len(snippet) > 160:
        snippet = snippet[:160] + "…"
    return {
        "session_id": row[0],
        "session_key": row[1],
        "role": row[2],
        "snippet": snippet,
        "timestamp": iso_from_us(row[4]),
    }


class PostgresSearch(TxBase):
    """Full-text search of `PostgresTx`."""

    __slots__ = ()

    # The `tsvector` column is written with its row, in the same transaction: there is no
    # side index to fall behind, go stale or rebuild, so its maintenance calls do nothing.

    def search_is_stale(self) -> bool:
        return False

    def mark_search_stale(self, reason: BaseException) -> None:
        log.warning("full-text search failed", extra={"error": str(reason)})

    def catch_up_search(self) -> int:
        return 0

    def drop_session_from_search(self, sid: int) -> None:
        return None

    def lower_search_cursor(self) -> None:
        return None

    def search_index(
        self, query: str, limit: int, *, key_prefix: str | None = None, tree_of: str | None = None
    ) -> list[dict[str, Any]]:
        terms = _TOKEN.findall(query)
        if not terms:
            return []
        params = {
            "terms": " ".join(terms[:32]),
            "prefix": key_prefix,
            "limit": limit,
            **_tree(tree_of),
        }
        return [_hit(r) for r in self._all(_SEARCH, params)]

    def search_scan(
        self, query: str, limit: int, *, key_prefix: str | None = None, tree_of: str | None = None
    ) -> list[dict[str, Any]]:
        if not _TOKEN.findall(query):
            return []
        like = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        params = {"like": like, "prefix": key_prefix, "limit": limit, **_tree(tree_of)}
        return [_hit(r, scan=True) for r in self._all(_SCAN, params)]

    def rebuild_search_index(self) -> int:
        self.conn.execute("REINDEX INDEX entries_search")
        row = self._one("SELECT count(*) FROM entries WHERE search IS NOT NULL")
        return int(row[0]) if row else 0

    def search_index_status(self) -> dict[str, Any]:
        row = self._one(_MAX_ENTRY_ID)
        return {"stale": False, "cursor": int(row[0]) if row else 0, "pending": 0}

    def search_integrity_check(self) -> str | None:
        return None


def _tree(tree_of: str | None) -> dict[str, str | None]:
    """The `tree` and `forks` parameters of a search: a key, and the prefix of its forks' keys."""
    return {"tree": tree_of, "forks": None if tree_of is None else f"{tree_of}:{FORK_TAG}"}
