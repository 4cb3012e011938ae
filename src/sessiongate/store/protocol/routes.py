"""The `routes` family: one `SessionEntry` per session key, and what else is known of keys
(tombstones of deleted or incognito keys, identity aliases).

SQLite: `sqlite/routes.py`; PostgreSQL: `postgres/routes.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterator
    from datetime import datetime

    from sessiongate.core.entry import SessionEntry
    from sessiongate.core.keys import KeyParts

__all__ = ["KeysTx", "RoutesTx"]


class RoutesTx(Protocol):
    """The routes table: a session key, the session id it routes to, the key's parts
    (platform, chat type, chat id, thread, participant) and the entry as JSON.

    Inside a write transaction on a shared backend a read of a route locks it to the end of
    the transaction, and a missing route locks its key, so two instances cannot both create
    one. A route whose label another route holds is refused with `ConflictError`."""

    def get_route(self, session_key: str) -> SessionEntry | None:
        """The key's entry; None when the key has no route."""
        ...

    def get_route_with_parts(self, session_key: str) -> tuple[SessionEntry, KeyParts] | None:
        """The key's entry and its stored parts; None when the key has no route."""
        ...

    def get_route_parts(self, session_key: str) -> KeyParts | None:
        """The key's stored parts (platform `""` when none was stored); None without a
        route."""
        ...

    def upsert_route(self, entry: SessionEntry, parts: KeyParts | None) -> None:
        """Insert the route of `entry.session_key`, or replace its session id, times, flags,
        label and entry. The parts are written only with a new route (from `parts`, else
        from the entry's own platform and chat type)."""
        ...

    def put_route(self, entry: SessionEntry, parts: KeyParts | None = None) -> None:
        """Write `entry`: one update when its key already routes to its session id, else
        `upsert_route` with `parts` (or the key's stored parts when None)."""
        ...

    def delete_route(self, session_key: str) -> bool:
        """Remove the key's route (its sessions stay); whether there was one."""
        ...

    def route_by_session_id(self, session_id: str) -> SessionEntry | None:
        """The entry routing to `session_id`; None when no key routes to it now."""
        ...

    def iter_routes(self, *, since: datetime | None = None) -> Iterator[SessionEntry]:
        """Every entry (updated at or after `since` when given), the most recently updated
        first."""
        ...

    def count_routes(self) -> int:
        """How many routes there are."""
        ...

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
        """One page of routes, pinned (and not archived) first, then most recently updated,
        then by key; and how many match in all. A filter left at None matches everything;
        `unread` is `SessionEntry.unread` computed in the query."""
        ...

    def label_taken(self, label: str, *, except_key: str | None = None) -> bool:
        """Whether a route other than `except_key`'s holds `label`."""
        ...


class KeysTx(Protocol):
    """What is kept of session keys beside their routes: tombstones (a deleted key stays
    refused; an incognito key never comes back durable) and identity aliases (one person's
    other spellings on a platform, pointing at the canonical id)."""

    def tombstone_reason(self, session_key: str) -> str | None:
        """Why the key was tombstoned (`deleted`, `incognito`, ...); None when it was not."""
        ...

    def add_tombstone(self, session_key: str, *, reason: str, at: int) -> None:
        """Tombstone the key at `at` (microseconds). A `deleted` tombstone is renewed; any
        other keeps the one it had."""
        ...

    def alias_of(self, platform: str, alias: str) -> str | None:
        """The canonical id `alias` points at on `platform`; None when it is no alias."""
        ...

    def is_alias_target(self, platform: str, ident: str) -> bool:
        """Whether some alias on `platform` points at `ident`."""
        ...

    def keys_a_lane(self, platform: str, ident: str) -> bool:
        """Whether a route on `platform` is keyed by `ident` (its DM chat id or its
        participant): an id already in use may not become someone's alias."""
        ...

    def insert_alias(self, platform: str, alias: str, canonical: str, *, at: int) -> None:
        """Point `alias` at `canonical`; an alias already known keeps its first target."""
        ...
