"""SQL for erasure and retention: a person's records outside the transcripts, receipts, lane
sizes and busy lanes.

`SqliteErasure` is the `ErasureTx` half of `SqliteTx`; `store/erasure.py` and
`store/retention.py` are its callers and state the rules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence

__all__ = ["SqliteErasure"]

_SENDER = (
    "coalesce(json_extract(source, '$.user_id'), '') IN ({ids}) "
    "OR coalesce(json_extract(source, '$.user_id_alt'), '') IN ({ids})"
)


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values) or "NULL"


class SqliteErasure:
    __slots__ = ()
    conn: sqlite3.Connection

    def aliases_of(self, platform: str, canonical: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT alias FROM identity_aliases WHERE platform = ? AND canonical = ?",
            (platform, canonical),
        )
        return [str(r[0]) for r in rows]

    def sessions_forked_from(self, session_ids: Sequence[str]) -> list[tuple[int, str, str | None]]:
        if not session_ids:
            return []
        sql = (
            "SELECT sid, session_id, session_key FROM sessions "  # noqa: S608
            f"WHERE parent_session_id IN ({_marks(session_ids)})"
        )
        return [(r[0], r[1], r[2]) for r in self.conn.execute(sql, list(session_ids))]

    def all_session_ids(self) -> list[tuple[int, str, str | None]]:
        rows = self.conn.execute("SELECT sid, session_id, session_key FROM sessions ORDER BY sid")
        return [(r[0], r[1], r[2]) for r in rows]

    def redact_entry(
        self, entry_id: int, *, role: str | None, content: str | None, payload: str | None
    ) -> None:
        self.conn.execute(
            "UPDATE entries SET role = ?, content = ?, payload = ? WHERE id = ?",
            (role, content, payload, entry_id),
        )

    def erase_person_records(
        self, platform: str, ids: Sequence[str], keys: Sequence[str]
    ) -> dict[str, int]:
        conn = self.conn
        idl, keyl = list(ids), list(keys)
        by_sender = _SENDER.format(ids=_marks(idl))
        in_keys = f"session_key IN ({_marks(keyl)})"
        counts: dict[str, int] = {}
        counts["dedup_rows"] = conn.execute(
            f"DELETE FROM inbound_seen WHERE {in_keys} "  # noqa: S608
            f"OR (platform = ? AND sender_id IN ({_marks(idl)}))",
            [*keyl, platform, *idl],
        ).rowcount
        # In lanes that are not theirs, a row or turn of a turn now running stays (its
        # outcome commits against it); the rest of what they sent goes.
        counts["inbox_rows"] = conn.execute(
            f"DELETE FROM inbox WHERE {in_keys} "  # noqa: S608
            f"OR (state = 'pending' AND ({by_sender}))",
            [*keyl, *idl, *idl],
        ).rowcount
        counts["journal_turns"] = conn.execute(
            f"DELETE FROM turns WHERE {in_keys} "  # noqa: S608
            f"OR (state NOT IN ('accepted', 'running') AND ({by_sender}))",
            [*keyl, *idl, *idl],
        ).rowcount
        conn.execute(f"DELETE FROM restart_counts WHERE {in_keys}", keyl)  # noqa: S608
        conn.execute(f"DELETE FROM tombstones WHERE {in_keys}", keyl)  # noqa: S608
        counts["identity_aliases"] = conn.execute(
            f"DELETE FROM identity_aliases WHERE platform = ? AND "  # noqa: S608
            f"(alias IN ({_marks(idl)}) OR canonical IN ({_marks(idl)}))",
            [platform, *idl, *idl],
        ).rowcount
        counts["pairing_rows"] = conn.execute(
            f"DELETE FROM pairing WHERE platform = ? AND user_id IN ({_marks(idl)})",  # noqa: S608
            [platform, *idl],
        ).rowcount
        # Outbound messages to them or in their lanes, and the webhook events of their lanes.
        counts["deliveries"] = conn.execute(
            f"DELETE FROM deliveries WHERE {in_keys} OR (platform = ? AND ("  # noqa: S608
            f"{_SENDER.format(ids=_marks(idl))} "
            f"OR coalesce(json_extract(source, '$.chat_id'), '') IN ({_marks(idl)})))",
            [*keyl, platform, *idl, *idl, *idl],
        ).rowcount
        counts["webhook_events"] = conn.execute(
            f"DELETE FROM webhook_outbox WHERE {in_keys}",  # noqa: S608
            keyl,
        ).rowcount
        # Inbound webhooks' delivery ids recorded with their lanes.
        counts["hook_receipts"] = conn.execute(
            f"DELETE FROM hook_receipts WHERE {in_keys}",  # noqa: S608
            keyl,
        ).rowcount
        return counts

    def insert_erasure(self, *, at: int, subject_hash: str, counts: str) -> int:
        cur = self.conn.execute(
            "INSERT INTO erasures (erased_at, subject_hash, counts) VALUES (?, ?, ?)",
            (at, subject_hash, counts),
        )
        return int(cur.lastrowid or 0)

    def list_erasures(self, limit: int) -> list[tuple[int, int, str, str]]:
        rows = self.conn.execute(
            "SELECT id, erased_at, subject_hash, counts FROM erasures ORDER BY id DESC LIMIT ?",
            (limit,),
        )
        return [(r[0], r[1], r[2], r[3]) for r in rows]

    def lane_sizes(self) -> dict[str, int]:
        rows = self.conn.execute(
            "SELECT s.session_key, sum(length(coalesce(e.content, '')) "
            "+ length(coalesce(e.payload, '')) + 64) FROM entries AS e "
            "JOIN sessions AS s ON s.sid = e.sid WHERE s.session_key IS NOT NULL "
            "GROUP BY s.session_key"
        )
        return {str(r[0]): int(r[1] or 0) for r in rows}

    def busy_lanes(self) -> set[str]:
        rows = self.conn.execute(
            "SELECT session_key FROM turns WHERE state IN ('accepted', 'running') "
            "UNION SELECT session_key FROM inbox"
        )
        return {str(r[0]) for r in rows}
