"""SQL for what adapters keep: event claims, pairing, thread participation, sends.

`SqlitePlatformState` is the `PlatformStateTx` half of `SqliteTx`; every method runs inside
the caller's transaction, and `store.platform_state.PlatformState` is the only caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.store.records import PairingRow

if TYPE_CHECKING:
    import sqlite3

__all__ = ["SqlitePlatformState"]

_INSERT_CLAIM = (
    "INSERT INTO platform_events (platform, event_id, state, owner, claimed_at) "
    "VALUES (?, ?, 'claimed', ?, ?) ON CONFLICT DO NOTHING"
)
# A claim still `claimed` under another owner was left by a process that died before handing
# the event off: the redelivery takes it over (the runner's inbound dedup stops a second turn
# if the first process had in fact accepted it).
_TAKE_OVER = (
    "UPDATE platform_events SET owner = ?, claimed_at = ? "
    "WHERE platform = ? AND event_id = ? AND state = 'claimed' AND owner != ?"
)
_PAIRING_COLUMNS = (
    "platform, user_id, code, chat_id, user_name, created_at, expires_at, approved_at"
)


def _pairing(row: tuple[object, ...] | None) -> PairingRow | None:
    if row is None:
        return None
    return PairingRow(*row)  # type: ignore[arg-type]  # columns in declaration order


class SqlitePlatformState:
    __slots__ = ()
    conn: sqlite3.Connection

    # ------------------------------------------------------------------ event claims

    def claim_platform_event(self, platform: str, event_id: str, owner: str, now: int) -> bool:
        """True when this owner now holds the claim (new, or taken over from a dead owner)."""
        if self.conn.execute(_INSERT_CLAIM, (platform, event_id, owner, now)).rowcount:
            return True
        taken = self.conn.execute(_TAKE_OVER, (owner, now, platform, event_id, owner))
        return bool(taken.rowcount)

    def finish_platform_events(self, platform: str, event_ids: list[str]) -> None:
        self.conn.executemany(
            "UPDATE platform_events SET state = 'done' WHERE platform = ? AND event_id = ?",
            [(platform, event_id) for event_id in event_ids],
        )

    def release_platform_event(self, platform: str, event_id: str, owner: str) -> None:
        self.conn.execute(
            "DELETE FROM platform_events WHERE platform = ? AND event_id = ? AND owner = ? "
            "AND state = 'claimed'",
            (platform, event_id, owner),
        )

    def prune_platform_events(self, before: int) -> int:
        return self.conn.execute(
            "DELETE FROM platform_events WHERE claimed_at < ? AND state = 'done'", (before,)
        ).rowcount

    # ------------------------------------------------------------------ pairing

    def get_pairing(self, platform: str, user_id: str) -> PairingRow | None:
        return _pairing(
            self.conn.execute(
                f"SELECT {_PAIRING_COLUMNS} FROM pairing WHERE platform = ? AND user_id = ?",  # noqa: S608  # constant columns
                (platform, user_id),
            ).fetchone()
        )

    def upsert_pairing(self, row: PairingRow) -> None:
        self.conn.execute(
            f"INSERT INTO pairing ({_PAIRING_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "  # noqa: S608  # constant columns
            "ON CONFLICT (platform, user_id) DO UPDATE SET code = excluded.code, "
            "chat_id = excluded.chat_id, user_name = excluded.user_name, "
            "created_at = excluded.created_at, expires_at = excluded.expires_at, "
            "approved_at = excluded.approved_at",
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
        return int(
            self.conn.execute(
                "SELECT count(*) FROM pairing WHERE platform = ? AND approved_at IS NULL "
                "AND expires_at > ?",
                (platform, now),
            ).fetchone()[0]
        )

    def approve_pairing(self, code: str, now: int) -> PairingRow | None:
        """Approve the live request holding `code` and return it as it was before; None when
        no such request (or it expired)."""
        found = _pairing(
            self.conn.execute(
                f"SELECT {_PAIRING_COLUMNS} FROM pairing WHERE code = ? AND approved_at IS NULL "  # noqa: S608  # constant columns
                "AND expires_at > ?",
                (code, now),
            ).fetchone()
        )
        if found is None:
            return None
        self.conn.execute(
            "UPDATE pairing SET approved_at = ? WHERE platform = ? AND user_id = ?",
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
            "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (platform, chat_id, thread_id, now),
        )

    def has_thread(self, platform: str, chat_id: str, thread_id: str) -> bool:
        found = self.conn.execute(
            "SELECT 1 FROM platform_threads WHERE platform = ? AND chat_id = ? AND thread_id = ?",
            (platform, chat_id, thread_id),
        ).fetchone()
        return found is not None

    def record_send(
        self, platform: str, turn_id: int, state: str, detail: str | None, now: int
    ) -> None:
        self.conn.execute(
            "INSERT INTO platform_sends (platform, turn_id, state, detail, at) "
            "VALUES (?, ?, ?, ?, ?) ON CONFLICT (platform, turn_id) DO UPDATE SET "
            "state = excluded.state, detail = excluded.detail, at = excluded.at",
            (platform, turn_id, state, detail, now),
        )

    def begin_send(self, platform: str, turn_id: int, now: int) -> tuple[str, str | None] | None:
        """Record `sending` for a turn not seen before (None); else what was recorded for it."""
        inserted = self.conn.execute(
            "INSERT INTO platform_sends (platform, turn_id, state, detail, at) "
            "VALUES (?, ?, 'sending', NULL, ?) ON CONFLICT DO NOTHING",
            (platform, turn_id, now),
        ).rowcount
        return None if inserted else self.get_send(platform, turn_id)

    def get_send(self, platform: str, turn_id: int) -> tuple[str, str | None] | None:
        row = self.conn.execute(
            "SELECT state, detail FROM platform_sends WHERE platform = ? AND turn_id = ?",
            (platform, turn_id),
        ).fetchone()
        return None if row is None else (str(row[0]), row[1])

    # ------------------------------------------------------------------ receiver cursors

    def get_cursor(self, platform: str, account: str) -> str | None:
        row = self.conn.execute(
            "SELECT cursor FROM platform_cursors WHERE platform = ? AND account = ?",
            (platform, account),
        ).fetchone()
        return None if row is None else str(row[0])

    def set_cursor(self, platform: str, account: str, cursor: str, now: int) -> None:
        self.conn.execute(
            "INSERT INTO platform_cursors (platform, account, cursor, updated_at) "
            "VALUES (?, ?, ?, ?) ON CONFLICT (platform, account) DO UPDATE SET "
            "cursor = excluded.cursor, updated_at = excluded.updated_at",
            (platform, account, cursor, now),
        )
