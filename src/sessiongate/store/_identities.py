"""Identity aliases: two spellings of one person's id (a WhatsApp phone number and its LID) that
must route to one lane. A canonical id, once chosen, never flips.

`IdentityOps` is mixed into `SessionStore`; it only uses the store's database and clock.
`alias_of` is the one-hop lookup routing applies to each id it keys a lane by.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sessiongate.store.sqlite._codec import to_us

if TYPE_CHECKING:
    import sqlite3

    from sessiongate.core.clock import Clock
    from sessiongate.store.sqlite.database import Database

__all__ = ["IdentityOps", "alias_of"]

log = logging.getLogger(__name__)


class IdentityOps:
    _db: Database
    clock: Clock

    def learn_identity_alias(self, platform: str, alias: str, canonical: str) -> str:
        """Record that `alias` names the same person as `canonical`; returns the id `alias`
        resolves to afterwards.

        A canonical id, once chosen, never flips: an alias keeps its first mapping, and an id
        that is already canonical (the target of an alias, or the id a lane is keyed by) never
        becomes an alias. Learning such an id as an alias maps the pair the other way round;
        if both ids are canonical, the two are left apart (merging lanes is not automatic).
        Every stored alias points straight at a canonical id, so routing resolves in one hop.
        """
        from sessiongate.core.identity import normalize_whatsapp_identifier

        alias_n = normalize_whatsapp_identifier(alias)
        canon_n = normalize_whatsapp_identifier(canonical)
        with self._db.transaction() as conn:
            existing = _resolve_alias(conn, platform, alias_n)
            if existing != alias_n:
                return existing  # the first mapping wins
            target = _resolve_alias(conn, platform, canon_n)
            if target == alias_n:
                return alias_n
            if _is_canonical(conn, platform, alias_n):
                if target != canon_n or _is_canonical(conn, platform, canon_n):
                    log.warning(
                        "identity alias refused: both ids are already canonical",
                        extra={"platform": platform, "alias": alias_n, "canonical": target},
                    )
                    return alias_n
                alias_n, target = canon_n, alias_n
            conn.execute(
                "INSERT INTO identity_aliases (platform, alias, canonical, created_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (platform, alias_n, target, to_us(self.clock.now())),
            )
            return target


# Aliases written before chains were resolved at write time may still form one; a few hops
# resolve any real chain, and the bound stops a cycle.
_MAX_ALIAS_HOPS = 8


def _resolve_alias(conn: sqlite3.Connection, platform: str, ident: str) -> str:
    """The canonical id `ident` resolves to (itself if it is no alias)."""
    current = ident
    for _ in range(_MAX_ALIAS_HOPS):
        found = alias_of(conn, platform, current)
        if found is None or found == current:
            return current
        current = found
    return current


def _is_canonical(conn: sqlite3.Connection, platform: str, ident: str) -> bool:
    """`ident` is the target of an alias, or a lane is keyed by it (as the chat or the
    participant): it must never become an alias, or that lane would move to a new key."""
    if conn.execute(_IS_ALIAS_TARGET, (platform, ident)).fetchone() is not None:
        return True
    return conn.execute(_KEYS_A_LANE, (platform, ident, ident)).fetchone() is not None


_IS_ALIAS_TARGET = "SELECT 1 FROM identity_aliases WHERE platform = ? AND canonical = ? LIMIT 1"
# A scan of the routes, but aliases are learned rarely (once per person and spelling).
_KEYS_A_LANE = (
    "SELECT 1 FROM routes WHERE platform = ? "
    "AND ((chat_type = 'dm' AND chat_id = ?) OR participant_id = ?) LIMIT 1"
)


def alias_of(conn: sqlite3.Connection, platform: str, alias: str) -> str | None:
    row = conn.execute(
        "SELECT canonical FROM identity_aliases WHERE platform = ? AND alias = ?",
        (platform, alias),
    ).fetchone()
    return None if row is None else str(row[0])
