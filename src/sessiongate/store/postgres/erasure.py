"""Erasure and retention on PostgreSQL: each method does what its twin in
`sqlite/erasure.py` does (times cross as microseconds, JSON as text)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

    import psycopg

__all__ = ["PostgresErasure"]

_SENDER = (
    "coalesce(source->>'user_id', '') = ANY(%(ids)s) "
    "OR coalesce(source->>'user_id_alt', '') = ANY(%(ids)s)"
)


class PostgresErasure:
    __slots__ = ()
    conn: psycopg.Connection[Any]

    def aliases_of(self, platform: str, canonical: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT alias FROM identity_aliases WHERE platform = %s AND canonical = %s",
            (platform, canonical),
        ).fetchall()
        return [str(r[0]) for r in rows]

    def sessions_forked_from(self, session_ids: Sequence[str]) -> list[tuple[int, str, str | None]]:
        if not session_ids:
            return []
        rows = self.conn.execute(
            "SELECT sid, session_id, session_key FROM sessions WHERE parent_session_id = ANY(%s)",
            (list(session_ids),),
        ).fetchall()
        return [(int(r[0]), str(r[1]), None if r[2] is None else str(r[2])) for r in rows]

    def all_session_ids(self) -> list[tuple[int, str, str | None]]:
        rows = self.conn.execute(
            "SELECT sid, session_id, session_key FROM sessions ORDER BY sid"
        ).fetchall()
        return [(int(r[0]), str(r[1]), None if r[2] is None else str(r[2])) for r in rows]

    def redact_entry(
        self, entry_id: int, *, role: str | None, content: str | None, payload: str | None
    ) -> None:
        self.conn.execute(
            "UPDATE entries SET role = %s, content = %s, payload = %s::jsonb WHERE id = %s",
            (role, content, payload, entry_id),
        )

    def erase_person_records(
        self, platform: str, ids: Sequence[str], keys: Sequence[str]
    ) -> dict[str, int]:
        params = {"ids": list(ids), "keys": list(keys), "platform": platform}
        execute = self.conn.execute
        counts: dict[str, int] = {}
        counts["dedup_rows"] = execute(
            "DELETE FROM inbound_seen WHERE session_key = ANY(%(keys)s) "
            "OR (platform = %(platform)s AND sender_id = ANY(%(ids)s))",
            params,
        ).rowcount
        counts["inbox_rows"] = execute(
            "DELETE FROM inbox WHERE session_key = ANY(%(keys)s) "  # noqa: S608
            f"OR (state = 'pending' AND ({_SENDER}))",
            params,
        ).rowcount
        counts["journal_turns"] = execute(
            "DELETE FROM turns WHERE session_key = ANY(%(keys)s) "  # noqa: S608
            f"OR (state NOT IN ('accepted', 'running') AND ({_SENDER}))",
            params,
        ).rowcount
        execute("DELETE FROM restart_counts WHERE session_key = ANY(%(keys)s)", params)
        execute("DELETE FROM tombstones WHERE session_key = ANY(%(keys)s)", params)
        # A lease names its lane's key; the lane is gone (an owner's next fence fails, as it
        # would after a takeover, and a new claim starts a new row).
        execute("DELETE FROM lane_lease WHERE session_key = ANY(%(keys)s)", params)
        execute("DELETE FROM lane_seq WHERE session_key = ANY(%(keys)s)", params)
        counts["identity_aliases"] = execute(
            "DELETE FROM identity_aliases WHERE platform = %(platform)s "
            "AND (alias = ANY(%(ids)s) OR canonical = ANY(%(ids)s))",
            params,
        ).rowcount
        counts["pairing_rows"] = execute(
            "DELETE FROM pairing WHERE platform = %(platform)s AND user_id = ANY(%(ids)s)",
            params,
        ).rowcount
        # Outbound messages to them or in their lanes, and the webhook events of their lanes.
        counts["deliveries"] = execute(
            "DELETE FROM deliveries WHERE session_key = ANY(%(keys)s) "
            "OR (platform = %(platform)s AND ("
            "coalesce(source::jsonb->>'user_id', '') = ANY(%(ids)s) "
            "OR coalesce(source::jsonb->>'user_id_alt', '') = ANY(%(ids)s) "
            "OR coalesce(source::jsonb->>'chat_id', '') = ANY(%(ids)s)))",
            params,
        ).rowcount
        counts["webhook_events"] = execute(
            "DELETE FROM webhook_outbox WHERE session_key = ANY(%(keys)s)", params
        ).rowcount
        # Inbound webhooks' delivery ids recorded with their lanes.
        counts["hook_receipts"] = execute(
            "DELETE FROM hook_receipts WHERE session_key = ANY(%(keys)s)", params
        ).rowcount
        return counts

    def insert_erasure(self, *, at: int, subject_hash: str, counts: str) -> int:
        row = self.conn.execute(
            "INSERT INTO erasures (erased_at, subject_hash, counts) "
            "VALUES (sg_ts(%s), %s, %s::jsonb) RETURNING id",
            (at, subject_hash, counts),
        ).fetchone()
        return int(row[0]) if row else 0

    def list_erasures(self, limit: int) -> list[tuple[int, int, str, str]]:
        rows = self.conn.execute(
            "SELECT id, sg_us(erased_at), subject_hash, counts::text FROM erasures "
            "ORDER BY id DESC LIMIT %s",
            (limit,),
        ).fetchall()
        return [(int(r[0]), int(r[1]), str(r[2]), str(r[3])) for r in rows]

    def lane_sizes(self) -> dict[str, int]:
        rows = self.conn.execute(
            "SELECT s.session_key, sum(octet_length(coalesce(e.content, '')) "
            "+ octet_length(coalesce(e.payload::text, '')) + 64) FROM entries AS e "
            "JOIN sessions AS s ON s.sid = e.sid WHERE s.session_key IS NOT NULL "
            "GROUP BY s.session_key"
        ).fetchall()
        return {str(r[0]): int(r[1] or 0) for r in rows}

    def busy_lanes(self) -> set[str]:
        rows = self.conn.execute(
            "SELECT session_key FROM turns WHERE state IN ('accepted', 'running') "
            "UNION SELECT session_key FROM inbox"
        ).fetchall()
        return {str(r[0]) for r in rows}
