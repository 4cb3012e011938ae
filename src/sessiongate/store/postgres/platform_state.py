"""What adapters keep, on PostgreSQL: event claims, pairing, thread participation, sends.

`PostgresPlatformState` is the `PlatformStateTx` half of `PostgresTx`; each method does what
its twin in `sqlite/platform_state.py` does (times cross as microseconds, stored as
`timestamptz`). Several instances may share the database under READ COMMITTED: a claim is
one `INSERT … ON CONFLICT DO NOTHING` (a concurrent claimant waits for the first commit, then
finds the row), and an approval locks the request it approves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.store.records import PairingRow

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresPlatformState"]

_INSERT_CLAIM = (
    "INSERT INTO platform_events (platform, event_id, state, owner, claimed_at) "
    "VALUES (%s, %s, 'claimed', %s, sg_ts(%s)) ON CONFLICT DO NOTHING"
)
# As on SQLite: a claim left `claimed` by another (dead) owner is taken over by the redelivery.
_TAKE_OVER = (
    "UPDATE platform_events SET owner = %s, claimed_at = sg_ts(%s) "
    "WHERE platform = %s AND event_id = %s AND state = 'claimed' AND owner != %s"
)
_PAIRING_COLUMNS = (
    "platform, user_id, code, chat_id, user_name, sg_us(created_at), sg_us(expires_at), "
    "sg_us(approved_at)"
)
_UPSERT_PAIRING = """
INSERT INTO pairing (platform, user_id, code, chat_id, user_name, created_at, expires_at,
    approved_at)
VALUES (%s, %s, %s, %s, %s, sg_ts(%s), sg_ts(%s), sg_ts(%s))
ON CONFLICT (platform, user_id) DO UPDATE SET code = excluded.code,
    chat_id = excluded.chat_id, user_name = excluded.user_name,
    created_at = excluded.created_at, expires_at = excluded.expires_at,
    approved_at = excluded.approved_at
"""
_RECORD_SEND = """
INSERT INTO platform_sends (platform, turn_id, state, detail, at)
VALUES (%s, %s, %s, %s, sg_ts(%s))
ON CONFLICT (platform, turn_id) DO UPDATE SET
    state = excluded.state, detail = excluded.detail, at = excluded.at
"""


def _pairing(row: tuple[Any, ...] | None) -> PairingRow | None:
    return None if row is None else PairingRow(*row)


class PostgresPlatformState:
    __slots__ = ()
    conn: psycopg.Connection[Any]

    # ------------------------------------------------------------------ event claims

    def claim_platform_event(self, platform: str, event_id: str, owner: str, now: int) -> bool:
        if self.conn.execute(_INSERT_CLAIM, (platform, event_id, owner, now)).rowcount:
            return True
        taken = self.conn.execute(_TAKE_OVER, (owner, now, platform, event_id, owner))
        return bool(taken.rowcount)

    def finish_platform_events(self, platform: str, event_ids: list[str]) -> None:
        self.conn.execute(
            "UPDATE platform_events SET state = 'done' WHERE platform = %s AND event_id = ANY(%s)",
            (platform, event_ids),
        )

    def release_platform_event(self, platform: str, event_id: str, owner: str) -> None:
        self.conn.execute(
            "DELETE FROM platform_events WHERE platform = %s AND event_id = %s AND owner = %s "
            "AND state = 'claimed'",
            (platform, event_id, owner),
        )

    def prune_platform_events(self, before: int) -> int:
        return self.conn.execute(
            "DELETE FROM platform_events WHERE claimed_at < sg_ts(%s) AND state = 'done'",
            (before,),
        ).rowcount

    # ------------------------------------------------------------------ pairing

    def get_pairing(self, platform: str, user_id: str) -> PairingRow | None:
        return _pairing(
            self.conn.execute(
                f"SELECT {_PAIRING_COLUMNS} FROM pairing WHERE platform = %s AND user_id = %s",  # noqa: S608  # constant columns
                (platform, user_id),
            ).fetchone()
        )

    def upsert_pairing(self, row: PairingRow) -> None:
        self.conn.execute(
            _UPSERT_PAIRING,
            (
                row.platform,
                row.user_id,
                row.code,
                row.chat_id,
                row.user_name,
                row.created_at,
                row.expires_at,
                row.approved_at,
            ),
        )

    def count_pending_pairing(self, platform: str, now: int) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM pairing WHERE platform = %s AND approved_at IS NULL "
            "AND expires_at > sg_ts(%s)",
            (platform, now),
        ).fetchone()
        return 0 if row is None else int(row[0])

    def approve_pairing(self, code: str, now: int) -> PairingRow | None:
        found = _pairing(
            self.conn.execute(
                f"SELECT {_PAIRING_COLUMNS} FROM pairing WHERE code = %s "  # noqa: S608  # constant columns
                "AND approved_at IS NULL AND expires_at > sg_ts(%s) FOR UPDATE",
                (code, now),
            ).fetchone()
        )
        if found is None:
            return None
        self.conn.execute(
            "UPDATE pairing SET approved_at = sg_ts(%s) WHERE platform = %s AND user_id = %s",
            (now, found.platform, found.user_id),
        )
        return found

    def list_pairing(self) -> list[PairingRow]:
        rows = self.conn.execute(
            f"SELECT {_PAIRING_COLUMNS} FROM pairing ORDER BY platform, created_at"  # noqa: S608  # constant columns
        ).fetchall()
        return [PairingRow(*r) for r in rows]

    # ------------------------------------------------------------------ threads and sends

    def mark_thread(self, platform: str, chat_id: str, thread_id: str, now: int) -> None:
        self.conn.execute(
            "INSERT INTO platform_threads (platform, chat_id, thread_id, joined_at) "
            "VALUES (%s, %s, %s, sg_ts(%s)) ON CONFLICT DO NOTHING",
            (platform, chat_id, thread_id, now),
        )

    def has_thread(self, platform: str, chat_id: str, thread_id: str) -> bool:
        found = self.conn.execute(
            "SELECT 1 FROM platform_threads "
            "WHERE platform = %s AND chat_id = %s AND thread_id = %s",
            (platform, chat_id, thread_id),
        ).fetchone()
        return found is not None

    def record_send(
        self, platform: str, turn_id: int, state: str, detail: str | None, now: int
    ) -> None:
        self.conn.execute(_RECORD_SEND, (platform, turn_id, state, detail, now))

    def begin_send(self, platform: str, turn_id: int, now: int) -> tuple[str, str | None] | None:
        inserted = self.conn.execute(
            "INSERT INTO platform_sends (platform, turn_id, state, detail, at) "
            "VALUES (%s, %s, 'sending', NULL, sg_ts(%s)) ON CONFLICT DO NOTHING",
            (platform, turn_id, now),
        ).rowcount
        return None if inserted else self.get_send(platform, turn_id)

    def get_send(self, platform: str, turn_id: int) -> tuple[str, str | None] | None:
        row = self.conn.execute(
            "SELECT state, detail FROM platform_sends WHERE platform = %s AND turn_id = %s",
            (platform, turn_id),
        ).fetchone()
        return None if row is None else (str(row[0]), row[1])

    # ------------------------------------------------------------------ receiver cursors

    def get_cursor(self, platform: str, account: str) -> str | None:
        row = self.conn.execute(
            "SELECT cursor FROM platform_cursors WHERE platform = %s AND account = %s",
            (platform, account),
        ).fetchone()
        return None if row is None else str(row[0])

    def set_cursor(self, platform: str, account: str, cursor: str, now: int) -> None:
        self.conn.execute(
            "INSERT INTO platform_cursors (platform, account, cursor, updated_at) "
            "VALUES (%s, %s, %s, sg_ts(%s)) ON CONFLICT (platform, account) DO UPDATE SET "
            "cursor = excluded.cursor, updated_at = excluded.updated_at",
            (platform, account, cursor, now),
        )
