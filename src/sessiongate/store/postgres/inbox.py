"""The `InboxTx` family on PostgreSQL: each lane's inbound queue and the seen message ids.

Each method does what its twin in `sqlite/inbox.py` does. Several instances accept into one
lane, so accepts take the lane's writer lock (`lock_lane`, a row lock in `leases.py`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from sessiongate.store.postgres import leases
from sessiongate.store.postgres._tx_base import TxBase
from sessiongate.store.records import (
    InboxKind,
    InboxRow,
    InboxState,
    SeenRow,
    dumps,
    loads,
    merged_slot,
)

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = ["PostgresInbox", "inbox_values"]

_INBOX = (
    "id, session_key, kind, state, turn_id, text, parts::text, media::text, message_id, "
    "message_ids::text, source::text, message_type, reply_to, event_kind, internal, "
    "sg_us(accepted_at), sg_us(updated_at)"
)

_SEEN = (
    "platform, chat_id, message_id, session_key, sender_id, content_hash, session_id, inbox_id, "
    "turn_id, status, reply, sg_us(seen_at)"
)

_COUNT_PENDING = "SELECT count(*) FROM inbox WHERE session_key = %s AND state = 'pending'"

_INSERT_INBOX = (
    "INSERT INTO inbox (session_key, kind, text, parts, media, message_id, message_ids, source, "
    "message_type, reply_to, event_kind, internal, accepted_at, updated_at) "
    "VALUES (%s, %s, %s, %s::jsonb, %s::jsonb, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, "
    "sg_ts(%s), sg_ts(%s)) RETURNING id"
)

# `count_pending` and, when it is 0, `_INSERT_INBOX`, in one statement: (count, new id).
_INSERT_INBOX_IF_IDLE = (
    "WITH d AS (SELECT count(*) AS n FROM inbox WHERE session_key = %s AND state = 'pending'), "
    "ins AS (INSERT INTO inbox (session_key, kind, text, parts, media, message_id, message_ids, "
    "source, message_type, reply_to, event_kind, internal, accepted_at, updated_at) "
    "SELECT %s, %s, %s, %s::jsonb, %s::jsonb, %s, %s::jsonb, %s::jsonb, %s, %s, %s, %s, "
    "sg_ts(%s), sg_ts(%s) FROM d WHERE d.n = 0 RETURNING id) "
    "SELECT d.n, (SELECT id FROM ins) FROM d"
)

_MERGE = (
    "UPDATE inbox SET text = %s, parts = %s::jsonb, media = %s::jsonb, message_id = %s, "
    "message_ids = %s::jsonb, source = %s::jsonb, message_type = %s, reply_to = %s, "
    "updated_at = sg_ts(%s) WHERE id = %s AND state = 'pending' AND kind = 'slot'"
)

_HAS_PENDING = "SELECT 1 FROM inbox WHERE session_key = %s AND state = 'pending' LIMIT 1"


def inbox_values(
    session_key: str,
    kind: InboxKind,
    part: dict[str, Any],
    media: list[str],
    message_id: str | None,
    source: dict[str, Any],
    message_type: str,
    reply_to: str | None,
    event_kind: str | None,
    internal: bool,
    at: int,
) -> tuple[Any, ...]:
    return (
        session_key,
        str(kind),
        part["text"],
        dumps([part]),
        dumps(media),
        message_id,
        dumps([message_id] if message_id else []),
        dumps(source),
        message_type,
        reply_to,
        event_kind,
        bool(internal),
        at,
        at,
    )


def _inbox(raw: tuple[Any, ...]) -> InboxRow:
    return InboxRow(
        id=raw[0],
        session_key=raw[1],
        kind=InboxKind(raw[2]),
        state=InboxState(raw[3]),
        turn_id=raw[4],
        text=raw[5],
        parts=loads(raw[6]),
        media=loads(raw[7]),
        message_id=raw[8],
        message_ids=loads(raw[9]),
        source=loads(raw[10]),
        message_type=raw[11],
        reply_to=raw[12],
        event_kind=raw[13],
        internal=bool(raw[14]),
        accepted_at=raw[15],
        updated_at=raw[16],
    )


class PostgresInbox(TxBase):
    """The inbound queue and dedup records of `PostgresTx`."""

    __slots__ = ()

    def get_inbox_row(self, inbox_id: int) -> InboxRow | None:
        raw = self._one(f"SELECT {_INBOX} FROM inbox WHERE id = %s", (inbox_id,))  # noqa: S608
        return None if raw is None else _inbox(raw)

    def pending_slot(self, session_key: str) -> InboxRow | None:
        raw = self._one(
            f"SELECT {_INBOX} FROM inbox "  # noqa: S608
            "WHERE session_key = %s AND state = 'pending' AND kind = 'slot'",
            (session_key,),
        )
        return None if raw is None else _inbox(raw)

    def next_pending(self, session_key: str) -> InboxRow | None:
        raw = self._one(
            f"SELECT {_INBOX} FROM inbox "  # noqa: S608
            "WHERE session_key = %s AND state = 'pending' "
            "ORDER BY CASE kind WHEN 'slot' THEN 0 ELSE 1 END, id LIMIT 1",
            (session_key,),
        )
        return None if raw is None else _inbox(raw)

    def insert_inbox_row(
        self,
        *,
        session_key: str,
        kind: InboxKind,
        part: dict[str, Any],
        media: list[str],
        message_id: str | None,
        source: dict[str, Any],
        message_type: str,
        reply_to: str | None,
        event_kind: str | None,
        internal: bool,
        at: int,
    ) -> int:
        row = self._one(
            _INSERT_INBOX,
            inbox_values(
                session_key, kind, part, media, message_id, source, message_type, reply_to,
                event_kind, internal, at,
            ),
        )  # fmt: skip
        assert row is not None
        return int(row[0])

    def insert_inbox_row_if_idle(
        self,
        *,
        session_key: str,
        kind: InboxKind,
        part: dict[str, Any],
        media: list[str],
        message_id: str | None,
        source: dict[str, Any],
        message_type: str,
        reply_to: str | None,
        event_kind: str | None,
        internal: bool,
        at: int,
    ) -> tuple[int, int | None]:
        values = inbox_values(
            session_key, kind, part, media, message_id, source, message_type, reply_to,
            event_kind, internal, at,
        )  # fmt: skip
        row = self._one(_INSERT_INBOX_IF_IDLE, (session_key, *values))
        assert row is not None
        return int(row[0]), row[1]

    def merge_into_slot(
        self,
        slot: InboxRow,
        *,
        part: dict[str, Any],
        media: list[str],
        message_id: str | None,
        source: dict[str, Any],
        message_type: str,
        reply_to: str | None,
        at: int,
    ) -> None:
        count = self._count(
            _MERGE,
            merged_slot(
                slot,
                part=part,
                media=media,
                message_id=message_id,
                source=source,
                message_type=message_type,
                reply_to=reply_to,
                at=at,
            ),
        )
        if count != 1:
            raise LookupError(f"inbox row {slot.id} is no longer a pending slot")

    def claim_inbox_row(self, inbox_id: int, turn_id: int) -> None:
        count = self._count(
            "UPDATE inbox SET state = 'claimed', turn_id = %s WHERE id = %s AND state = 'pending'",
            (turn_id, inbox_id),
        )
        if count != 1:
            raise LookupError(f"inbox row {inbox_id} is not pending")

    def delete_inbox_row(self, inbox_id: int) -> None:
        # By key, of a row its turn holds: nothing of the input can make it fail.
        self._send_sure("DELETE FROM inbox WHERE id = %s", (inbox_id,))

    def delete_pending_row(self, inbox_id: int) -> bool:
        return (
            self._count("DELETE FROM inbox WHERE id = %s AND state = 'pending'", (inbox_id,)) == 1
        )

    def delete_pending(self, session_key: str) -> list[int]:
        rows = self._all(
            "DELETE FROM inbox WHERE session_key = %s AND state = 'pending' RETURNING id",
            (session_key,),
        )
        return sorted(r[0] for r in rows)

    def delete_pending_events(self, session_key: str, *, keep: int | None = None) -> list[int]:
        rows = self._all(
            "DELETE FROM inbox WHERE session_key = %s AND state = 'pending' "
            "AND event_kind IS NOT NULL AND id IS DISTINCT FROM %s::bigint RETURNING id",
            (session_key, keep),
        )
        return sorted(r[0] for r in rows)

    def has_pending(self, session_key: str) -> bool:
        return self._one(_HAS_PENDING, (session_key,)) is not None

    def pending_later(self, session_key: str) -> Callable[[], bool]:
        ahead = self._sent_ahead(_HAS_PENDING, (session_key,))
        if ahead is None:
            pending = self.has_pending(session_key)
            return lambda: pending
        return lambda: ahead.fetchone() is not None

    def count_pending(self, session_key: str) -> int:
        row = self._one(_COUNT_PENDING, (session_key,))
        return int(row[0]) if row else 0

    def count_pending_later(self, session_key: str) -> Callable[[], int]:
        ahead = self._sent_ahead(_COUNT_PENDING, (session_key,))
        if ahead is None:
            count = self.count_pending(session_key)
            return lambda: count

        @functools.cache
        def counted() -> int:
            row = ahead.fetchone()
            return int(row[0]) if row else 0

        return counted

    def count_pending_all(self) -> int:
        row = self._one("SELECT count(*) FROM inbox WHERE state = 'pending'")
        return int(row[0]) if row else 0

    def lanes_with_pending(self) -> list[str]:
        rows = self._all(
            "SELECT session_key FROM inbox WHERE state = 'pending' GROUP BY session_key "
            "ORDER BY min(id)"
        )
        return [r[0] for r in rows]

    def lock_lane(self, session_key: str) -> None:
        # Once per transaction: the lock lasts to its end (a savepoint rolled back may take
        # it with it, and then `forget_locks` forgets it here too).
        if session_key not in self.locked_lanes:
            leases.lock_lane(self._sure or self.conn, session_key)
            self.locked_lanes.add(session_key)

    def select_seen(
        self, platform: str, chat_id: str, message_id: str, *, session_key: str, sender_id: str
    ) -> SeenRow | None:
        raw = self._one(
            f"SELECT {_SEEN} FROM inbound_seen "  # noqa: S608
            "WHERE platform = %s AND chat_id = %s AND message_id = %s AND session_key = %s "
            "AND sender_id = %s",
            (platform, chat_id, message_id, session_key, sender_id),
        )
        return None if raw is None else SeenRow(*raw)

    def insert_seen(self, row: SeenRow) -> bool:
        count = self._count(
            "INSERT INTO inbound_seen (platform, chat_id, message_id, session_key, sender_id, "
            "content_hash, session_id, inbox_id, turn_id, status, reply, seen_at) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, sg_ts(%s)) "
            "ON CONFLICT DO NOTHING",
            (
                row.platform,
                row.chat_id,
                row.message_id,
                row.session_key,
                row.sender_id,
                row.content_hash,
                row.session_id,
                row.inbox_id,
                row.turn_id,
                row.status,
                row.reply,
                row.seen_at,
            ),
        )
        return count == 1

    def link_seen_to_turn(self, inbox_id: int, turn_id: int) -> None:
        self.conn.execute(
            "UPDATE inbound_seen SET turn_id = %s WHERE inbox_id = %s AND turn_id IS NULL",
            (turn_id, inbox_id),
        )

    def delete_seen_of_row(self, inbox_id: int) -> int:
        return self._count("DELETE FROM inbound_seen WHERE inbox_id = %s", (inbox_id,))

    def prune_seen(self, before: int) -> int:
        return self._count(
            "DELETE FROM inbound_seen WHERE seen_at < sg_ts(%s) "
            "AND (inbox_id IS NULL OR NOT EXISTS (SELECT 1 FROM inbox WHERE id = inbox_id))",
            (before,),
        )
