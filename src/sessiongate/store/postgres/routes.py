"""The `RoutesTx` and `KeysTx` families on PostgreSQL: routes, tombstones and identity aliases.

Each method does what its twin in `sqlite/routes.py` does. Several
instances write one database under READ COMMITTED, so a route read in a write transaction is
locked (and kept) to its end, and a missing one locks its key; a route the caller saw written
(`expect_route`) is checked at the server with the write instead of read again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sessiongate.core.jsontext import json_encoder
from sessiongate.core.keys import KeyParts
from sessiongate.errors import RouteChangedError
from sessiongate.store.postgres._tx_base import TxBase
from sessiongate.store.records import (
    decoded_entry,
    dumps,
    remember_entry,
    to_us,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from datetime import datetime

    from sessiongate.core.entry import SessionEntry

__all__ = ["PostgresRoutes"]

_UPSERT_ROUTE = """
INSERT INTO routes (session_key, session_id, platform, chat_type, chat_id, thread_id,
    participant_id, updated_at, pinned_at, archived_at, suspended, resume_pending, label, data)
VALUES (%(session_key)s, %(session_id)s, %(platform)s, %(chat_type)s, %(chat_id)s,
    %(thread_id)s, %(participant_id)s, sg_ts(%(updated_at)s), sg_ts(%(pinned_at)s),
    sg_ts(%(archived_at)s), %(suspended)s, %(resume_pending)s, %(label)s, %(data)s::jsonb)
ON CONFLICT (session_key) DO UPDATE SET
    session_id = excluded.session_id, updated_at = excluded.updated_at,
    pinned_at = excluded.pinned_at, archived_at = excluded.archived_at,
    suspended = excluded.suspended, resume_pending = excluded.resume_pending,
    label = excluded.label, data = excluded.data
"""

_PUT_ROUTE = (
    "UPDATE routes SET updated_at = sg_ts(%(updated_at)s), "
    "pinned_at = sg_ts(%(pinned_at)s::bigint), "
    "archived_at = sg_ts(%(archived_at)s::bigint), suspended = %(suspended)s, "
    "resume_pending = %(resume_pending)s, label = %(label)s, data = %(data)s::jsonb "
    "WHERE session_key = %(session_key)s AND session_id = %(session_id)s"
)

# `SessionEntry.unread` in SQL: a marker, or activity after the last read (ISO-8601 UTC text
# sorts as time does).
_UNREAD = """(data->>'marked_unread_at' IS NOT NULL
    OR coalesce(data->>'last_read_at' IS NOT NULL
        AND data->>'last_activity_at' > data->>'last_read_at', false))"""

_PAGE_WHERE = f"""
WHERE (%(archived)s::boolean IS NULL OR (archived_at IS NOT NULL) = %(archived)s::boolean)
  AND (%(since)s::bigint IS NULL OR updated_at >= sg_ts(%(since)s::bigint))
  AND (%(platform)s::text IS NULL OR platform = %(platform)s::text)
  AND (%(pinned)s::boolean IS NULL OR (pinned_at IS NOT NULL) = %(pinned)s::boolean)
  AND (%(key_prefix)s::text IS NULL OR starts_with(session_key, %(key_prefix)s::text))
  AND (%(unread)s::boolean IS NULL OR {_UNREAD} = %(unread)s::boolean)
"""

_PAGE = (
    "SELECT data::text FROM routes"  # noqa: S608
    + _PAGE_WHERE
    + "ORDER BY (pinned_at IS NOT NULL AND archived_at IS NULL) DESC, updated_at DESC, "
    "session_key LIMIT %(limit)s OFFSET %(offset)s"
)

_PAGE_COUNT = "SELECT count(*) FROM routes" + _PAGE_WHERE  # noqa: S608

_ADD_TOMBSTONE = {
    True: "INSERT INTO tombstones (session_key, deleted_at, reason) VALUES (%s, sg_ts(%s), %s) "
    "ON CONFLICT (session_key) DO UPDATE SET deleted_at = excluded.deleted_at",
    False: "INSERT INTO tombstones (session_key, deleted_at, reason) VALUES (%s, sg_ts(%s), %s) "
    "ON CONFLICT (session_key) DO NOTHING",
}

_ROUTE = (
    "SELECT data::text, platform, chat_type, chat_id, thread_id, participant_id FROM routes "
    "WHERE session_key = %s"
)

_PUT_ROUTE_SEEN = (
    "SELECT sg_put_route_seen(%(seen)s::jsonb, %(session_key)s, %(session_id)s, "
    "%(updated_at)s, %(pinned_at)s::bigint, %(archived_at)s::bigint, %(suspended)s, "
    "%(resume_pending)s, %(label)s, %(data)s::jsonb)"
)

_ROUTE_SEEN = "SELECT sg_route_seen(%s::jsonb, %s)"

# A lane's first session, made only where the key has no route (`prefetch_lane_creation`):
# sent after the route's read (`_ROUTE_FOR_UPDATE`), which holds the key's lock when there is
# none, so a route made meanwhile shows here too.
_CREATE_IF_UNROUTED = """
INSERT INTO sessions (session_id, session_key, parent_session_id, started_at, header)
SELECT %s, %s, NULL, sg_ts(%s), %s::jsonb
WHERE NOT EXISTS (SELECT 1 FROM routes WHERE session_key = %s)
ON CONFLICT (session_id) DO NOTHING RETURNING sid
"""

# `_ROUTE` for writing, and the key's lock when there is none (migration 17), one round trip.
_ROUTE_FOR_UPDATE = "SELECT * FROM sg_route_for_update(%s)"

# `jsonb`'s own spacing, from one reused encoder (`json.dumps` with options builds one a call).
_JSONB_TEXT = json_encoder()


def _jsonb_order(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonb_order(value[k]) for k in sorted(value, key=_jsonb_key)}
    if isinstance(value, list):
        return [_jsonb_order(item) for item in value]
    return value


def _jsonb_key(key: str) -> tuple[int, bytes]:
    raw = key.encode()
    return len(raw), raw


def _route_data(entry: SessionEntry) -> str:
    """The route's JSON as `jsonb` gives it back (keys by length, then bytes; `", "` and
    `": "`), told to the decoded entries so the next read of it is not decoded again, and
    sent as it is: `jsonb` takes any order and spacing. A text that comes back otherwise (a
    float's digits) is simply decoded."""
    text = _JSONB_TEXT(_jsonb_order(entry.to_dict(compact=True)))
    remember_entry(text, entry)
    return text


def _seen_data(entry: SessionEntry) -> str:
    """A seen route's JSON, for the server to compare as `jsonb`: any key order does, and
    nothing will decode it, so it is not told to the decoded entries as `_route_data` is."""
    return dumps(entry.to_dict(compact=True))


def _route_values(entry: SessionEntry, parts: KeyParts | None) -> dict[str, Any]:
    return {
        "session_key": entry.session_key,
        "session_id": entry.session_id,
        "platform": parts.platform if parts else (str(entry.platform) if entry.platform else None),
        "chat_type": parts.chat_type if parts else str(entry.chat_type),
        "chat_id": parts.chat_id if parts else None,
        "thread_id": parts.thread_id if parts else None,
        "participant_id": parts.participant_id if parts else None,
        "updated_at": to_us(entry.updated_at),
        "pinned_at": _us(entry.pinned_at),
        "archived_at": _us(entry.archived_at),
        "suspended": bool(entry.suspended),
        "resume_pending": bool(entry.resume_pending),
        "label": entry.label,
        "data": _route_data(entry),
    }


def _sure_update(old: SessionEntry, new: SessionEntry, values: dict[str, Any]) -> bool:
    """Whether `_PUT_ROUTE` of `new` over the locked route `old` touches exactly that row and
    cannot be refused: same session, same label (so no other route's), and no NUL, which
    `jsonb` refuses (the text columns' NULs psycopg refuses before sending)."""
    return (
        old.session_id == new.session_id
        and old.label == new.label
        and "\\u0000" not in values["data"]
    )


def _us(value: datetime | None) -> int | None:
    return None if value is None else to_us(value)


class PostgresRoutes(TxBase):
    """Routes, tombstones and identity aliases of `PostgresTx`."""

    __slots__ = ()

    # Several instances write one database under READ COMMITTED, where SQLite's one writer
    # lock serialised everything. A read of a route inside a write transaction therefore
    # locks it (`FOR UPDATE` waits for a concurrent writer and then reads its commit), and a
    # route that does not exist yet is locked by key (an advisory lock to the commit), so two
    # instances routing a new conversation at once cannot both create it.
    #
    # A route read so is kept until the transaction ends (or a savepoint rolls back, or this
    # transaction writes it): the row lock keeps every other writer off it meanwhile, so a
    # second read would only repeat the first.
    def _route(self, session_key: str) -> tuple[Any, ...] | None:
        """(data, platform, chat_type, chat_id, thread_id, participant_id) of the route."""
        if not self.in_transaction:
            return self._one(_ROUTE, (session_key,))
        row = self.locked_routes.get(session_key)
        if row is not None or session_key in self.missing_routes:
            return row
        ahead = self._prefetched.pop(session_key, None)
        raw = (
            ahead.fetchone() if ahead is not None else self._one(_ROUTE_FOR_UPDATE, (session_key,))
        )
        assert raw is not None
        if raw[-1]:  # read again under the key's lock (to the commit): none was there
            self.locked_keys.add(session_key)
        row = None if raw[0] is None else raw[:-1]
        if row is not None:
            self.locked_routes[session_key] = row
        elif session_key in self.locked_keys:
            self.missing_routes.add(session_key)
        return row

    def prefetch_route(self, session_key: str) -> None:
        if (
            self._wire is None
            or not self.in_transaction
            or session_key in self.locked_routes
            or session_key in self._prefetched
        ):
            return
        ahead = self._wire.later()
        ahead.execute(_ROUTE_FOR_UPDATE, (session_key,))
        self._prefetched[session_key] = ahead

    def prefetch_lane_creation(
        self,
        session_key: str,
        make_id: Callable[[], str],
        *,
        started_at: int,
        header: Callable[[str], dict[str, Any]],
    ) -> None:
        wire = self._wire
        if wire is None or session_key in self._seen or session_key in self.missing_routes:
            return
        self.prefetch_route(session_key)
        if session_key not in self._prefetched:
            return  # not in a transaction, or the route is held already
        session_id = make_id()
        ahead = wire.later()
        values = (session_id, session_key, started_at, dumps(header(session_id)), session_key)
        ahead.execute(_CREATE_IF_UNROUTED, values)
        self._fresh_ahead[session_key] = (session_id, ahead)

    def expect_route(self, entry: SessionEntry) -> None:
        key = entry.session_key
        if (
            self._wire is None
            or not self.in_transaction
            or key in self.locked_routes
            or key in self.missing_routes
        ):
            return
        self._seen[key] = entry
        if self._seen_lost is None:
            self._seen_lost = False

    def _check_seen(self, session_key: str) -> None:
        """The seen route, if any, checked at the server now (with the next answer read), and
        the route read as usual from here on."""
        seen = self._seen.pop(session_key, None)
        if seen is not None:
            self._send_seen_check(seen)

    def _send_seen_check(self, seen: SessionEntry) -> None:
        self._send_sure(_ROUTE_SEEN, (_seen_data(seen), seen.session_key))

    def check_seen(self) -> None:
        """Before the commit: the seen routes nothing wrote over are checked too; raises
        `RouteChangedError` (the caller rolls back) when a savepoint rolled back since a route
        was seen."""
        if self._seen_lost:
            raise RouteChangedError("a savepoint rolled back over a route written as seen")
        for key in list(self._seen):
            self._check_seen(key)

    def get_route(self, session_key: str) -> SessionEntry | None:
        seen = self._seen.get(session_key)
        if seen is not None:
            return seen
        row = self._route(session_key)
        return None if row is None else decoded_entry(row[0])

    def get_route_with_parts(self, session_key: str) -> tuple[SessionEntry, KeyParts] | None:
        self._check_seen(session_key)
        row = self._route(session_key)
        if row is None:
            return None
        return decoded_entry(row[0]), KeyParts(row[1] or "", row[2], row[3], row[4], row[5])

    def get_route_parts(self, session_key: str) -> KeyParts | None:
        self._check_seen(session_key)
        row = self._route(session_key)
        return None if row is None else KeyParts(row[1] or "", row[2], row[3], row[4], row[5])

    def upsert_route(self, entry: SessionEntry, parts: KeyParts | None) -> None:
        self._check_seen(entry.session_key)
        self.locked_routes.pop(entry.session_key, None)
        self.missing_routes.discard(entry.session_key)
        self.conn.execute(_UPSERT_ROUTE, _route_values(entry, parts))

    def put_route(self, entry: SessionEntry, parts: KeyParts | None = None) -> None:
        """One UPDATE when the key already routes to this session id, else the upsert."""
        values = _route_values(entry, parts)
        seen = self._seen.pop(entry.session_key, None)
        if seen is not None:
            if _sure_update(seen, entry, values):
                self._send_sure(_PUT_ROUTE_SEEN, {**values, "seen": _seen_data(seen)})
                return
            self._send_seen_check(seen)
        self.missing_routes.discard(entry.session_key)
        locked = self.locked_routes.pop(entry.session_key, None)
        if locked is not None and _sure_update(decoded_entry(locked[0]), entry, values):
            self._send_sure(_PUT_ROUTE, values)
            return
        if not self._count(_PUT_ROUTE, values):
            if parts is None:
                parts = self.get_route_parts(entry.session_key)
            self.upsert_route(entry, parts)

    def delete_route(self, session_key: str) -> bool:
        self._check_seen(session_key)
        self.locked_routes.pop(session_key, None)
        return self._count("DELETE FROM routes WHERE session_key = %s", (session_key,)) > 0

    def route_by_session_id(self, session_id: str) -> SessionEntry | None:
        row = self._one("SELECT data::text FROM routes WHERE session_id = %s", (session_id,))
        return None if row is None else decoded_entry(row[0])

    def iter_routes(self, *, since: datetime | None = None) -> Iterator[SessionEntry]:
        if since is None:
            rows = self._all("SELECT data::text FROM routes ORDER BY updated_at DESC")
        else:
            rows = self._all(
                "SELECT data::text FROM routes WHERE updated_at >= sg_ts(%s) "
                "ORDER BY updated_at DESC",
                (to_us(since),),
            )
        return (decoded_entry(r[0]) for r in rows)

    def count_routes(self) -> int:
        row = self._one("SELECT count(*) FROM routes")
        assert row is not None
        return int(row[0])

    def list_route_page(
        self,
        *,
        limit: int,
        offset: int,
        archived: bool | None,
        since: datetime | None,
        platform: str | None = None,
        pinned: bool | None = None,
        unread: bool | None = None,
        key_prefix: str | None = None,
    ) -> tuple[list[SessionEntry], int]:
        params = {
            "archived": archived,
            "since": _us(since),
            "platform": platform,
            "pinned": pinned,
            "unread": unread,
            "key_prefix": key_prefix,
            "limit": limit,
            "offset": offset,
        }
        rows = self._all(_PAGE, params)
        total = self._one(_PAGE_COUNT, params)
        assert total is not None
        return [decoded_entry(r[0]) for r in rows], int(total[0])

    def label_taken(self, label: str, *, except_key: str | None = None) -> bool:
        row = self._one(
            "SELECT 1 FROM routes WHERE label = %s AND session_key IS DISTINCT FROM %s",
            (label, except_key),
        )
        return row is not None

    def tombstone_reason(self, session_key: str) -> str | None:
        row = self._one("SELECT reason FROM tombstones WHERE session_key = %s", (session_key,))
        return None if row is None else str(row[0])

    def add_tombstone(self, session_key: str, *, reason: str, at: int) -> None:
        # A deleted key's tombstone is renewed; any other (incognito) keeps its first.
        self.conn.execute(_ADD_TOMBSTONE[reason == "deleted"], (session_key, at, reason))

    def alias_of(self, platform: str, alias: str) -> str | None:
        row = self._one(
            "SELECT canonical FROM identity_aliases WHERE platform = %s AND alias = %s",
            (platform, alias),
        )
        return None if row is None else str(row[0])

    def is_alias_target(self, platform: str, ident: str) -> bool:
        row = self._one(
            "SELECT 1 FROM identity_aliases WHERE platform = %s AND canonical = %s LIMIT 1",
            (platform, ident),
        )
        return row is not None

    def keys_a_lane(self, platform: str, ident: str) -> bool:
        row = self._one(
            "SELECT 1 FROM routes WHERE platform = %s "
            "AND ((chat_type = 'dm' AND chat_id = %s) OR participant_id = %s) LIMIT 1",
            (platform, ident, ident),
        )
        return row is not None

    def insert_alias(self, platform: str, alias: str, canonical: str, *, at: int) -> None:
        self.conn.execute(
            "INSERT INTO identity_aliases (platform, alias, canonical, created_at) "
            "VALUES (%s, %s, %s, sg_ts(%s)) ON CONFLICT DO NOTHING",
            (platform, alias, canonical, at),
        )
