"""SQL for what adapters keep: event claims, pairing, thread participation, sends.

Every function runs inside the caller's transaction; `store.platform_state.PlatformState` is
the only caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "PairingRow",
    "approve_pairing",
    "begin_send",
    "claim_event",
    "count_pending",
    "finish_events",
    "get_pairing",
    "get_send",
    "has_thread",
    "list_pairing",
    "mark_thread",
    "prune_events",
    "record_send",
    "release_event",
    "upsert_pairing",
]

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


def claim_event(
    conn: sqlite3.Connection, platform: str, event_id: str, owner: str, now_us: int
) -> bool:
    """True when this owner now holds the claim (new, or taken over from a dead owner)."""
    if conn.execute(_INSERT_CLAIM, (platform, event_id, owner, now_us)).rowcount:
        return True
    return bool(conn.execute(_TAKE_OVER, (owner, now_us, platform, event_id, owner)).rowcount)


def finish_events(conn: sqlite3.Connection, platform: str, event_ids: list[str]) -> None:
    conn.executemany(
        "UPDATE platform_events SET state = 'done' WHERE platform = ? AND event_id = ?",
        [(platform, event_id) for event_id in event_ids],
    )


def release_event(conn: sqlite3.Connection, platform: str, event_id: str, owner: str) -> None:
    conn.execute(
        "DELETE FROM platform_events WHERE platform = ? AND event_id = ? AND owner = ? "
        "AND state = 'claimed'",
        (platform, event_id, owner),
    )


def prune_events(conn: sqlite3.Connection, before_us: int) -> int:
    return conn.execute(
        "DELETE FROM platform_events WHERE claimed_at < ? AND state = 'done'", (before_us,)
    ).rowcount


@dataclass(frozen=True, slots=True)
class PairingRow:
    platform: str
    user_id: str
    code: str
    chat_id: str
    user_name: str | None
    created_at: int
    expires_at: int
    approved_at: int | None


_PAIRING_COLUMNS = (
    "platform, user_id, code, chat_id, user_name, created_at, expires_at, approved_at"
)


def _pairing(row: tuple[object, ...] | None) -> PairingRow | None:
    if row is None:
        return None
    return PairingRow(*row)  # type: ignore[arg-type]  # columns in declaration order


def get_pairing(conn: sqlite3.Connection, platform: str, user_id: str) -> PairingRow | None:
    return _pairing(
        conn.execute(
            f"SELECT {_PAIRING_COLUMNS} FROM pairing WHERE platform = ? AND user_id = ?",  # noqa: S608  # constant columns
            (platform, user_id),
        ).fetchone()
    )


def upsert_pairing(conn: sqlite3.Connection, row: PairingRow) -> None:
    conn.execute(
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


def count_pending(conn: sqlite3.Connection, platform: str, now_us: int) -> int:
    return int(
        conn.execute(
            "SELECT count(*) FROM pairing WHERE platform = ? AND approved_at IS NULL "
            "AND expires_at > ?",
            (platform, now_us),
        ).fetchone()[0]
    )


def approve_pairing(conn: sqlite3.Connection, code: str, now_us: int) -> PairingRow | None:
    """Approve the live request holding `code`; None when no such request (or it expired)."""
    found = _pairing(
        conn.execute(
            f"SELECT {_PAIRING_COLUMNS} FROM pairing WHERE code = ? AND approved_at IS NULL "  # noqa: S608  # constant columns
            "AND expires_at > ?",
            (code, now_us),
        ).fetchone()
    )
    if found is None:
        return None
    conn.execute(
        "UPDATE pairing SET approved_at = ? WHERE platform = ? AND user_id = ?",
        (now_us, found.platform, found.user_id),
    )
    return found


def list_pairing(conn: sqlite3.Connection) -> list[PairingRow]:
    rows = conn.execute(
        f"SELECT {_PAIRING_COLUMNS} FROM pairing ORDER BY platform, created_at"  # noqa: S608  # constant columns
    ).fetchall()
    return [PairingRow(*r) for r in rows]


def mark_thread(
    conn: sqlite3.Connection, platform: str, chat_id: str, thread_id: str, now_us: int
) -> None:
    conn.execute(
        "INSERT INTO platform_threads (platform, chat_id, thread_id, joined_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (platform, chat_id, thread_id, now_us),
    )


def has_thread(conn: sqlite3.Connection, platform: str, chat_id: str, thread_id: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM platform_threads WHERE platform = ? AND chat_id = ? AND thread_id = ?",
            (platform, chat_id, thread_id),
        ).fetchone()
        is not None
    )


def record_send(
    conn: sqlite3.Connection,
    platform: str,
    turn_id: int,
    state: str,
    detail: str | None,
    now_us: int,
) -> None:
    conn.execute(
        "INSERT INTO platform_sends (platform, turn_id, state, detail, at) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (platform, turn_id) DO UPDATE SET state = excluded.state, "
        "detail = excluded.detail, at = excluded.at",
        (platform, turn_id, state, detail, now_us),
    )


def begin_send(
    conn: sqlite3.Connection, platform: str, turn_id: int, now_us: int
) -> tuple[str, str | None] | None:
    """Record `sending` for a turn not seen before (None); else what was recorded for it."""
    inserted = conn.execute(
        "INSERT INTO platform_sends (platform, turn_id, state, detail, at) "
        "VALUES (?, ?, 'sending', NULL, ?) ON CONFLICT DO NOTHING",
        (platform, turn_id, now_us),
    ).rowcount
    return None if inserted else get_send(conn, platform, turn_id)


def get_send(
    conn: sqlite3.Connection, platform: str, turn_id: int
) -> tuple[str, str | None] | None:
    row = conn.execute(
        "SELECT state, detail FROM platform_sends WHERE platform = ? AND turn_id = ?",
        (platform, turn_id),
    ).fetchone()
    return None if row is None else (str(row[0]), row[1])
