"""Identity aliases: two spellings of one person's id (a WhatsApp phone number and its LID) that
must route to one lane. A canonical id, once chosen, never flips.

`IdentityOps` is mixed into `SessionStore`; it only uses the store's database and clock.
`alias_of` is the one-hop lookup routing applies to each id it keys a lane by.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from sessiongate.store.records import to_us

if TYPE_CHECKING:
    from sessiongate.core.clock import Clock
    from sessiongate.store.protocol import Backend, Tx

__all__ = ["IdentityOps", "alias_of"]

log = logging.getLogger(__name__)


class IdentityOps:
    _db: Backend
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
            conn.insert_alias(platform, alias_n, target, at=to_us(self.clock.now()))
            return target

    def resolve_identity(self, platform: str, ident: str) -> str:
        """The id `ident` routes by: its canonical id when it is a learned alias, else its
        normalised self (read only, one hop: stored aliases point straight at the canonical)."""
        from sessiongate.core.identity import normalize_whatsapp_identifier

        normal = normalize_whatsapp_identifier(ident)
        with self._db.read() as conn:
            return alias_of(conn, platform, normal) or normal


# Aliases written before chains were resolved at write time may still form one; a few hops
# resolve any real chain, and the bound stops a cycle.
_MAX_ALIAS_HOPS = 8


def _resolve_alias(conn: Tx, platform: str, ident: str) -> str:
    """The canonical id `ident` resolves to (itself if it is no alias)."""
    current = ident
    for _ in range(_MAX_ALIAS_HOPS):
        found = alias_of(conn, platform, current)
        if found is None or found == current:
            return current
        current = found
    return current


def _is_canonical(conn: Tx, platform: str, ident: str) -> bool:
    """`ident` is the target of an alias, or a lane is keyed by it (as the chat or the
    participant): it must never become an alias, or that lane would move to a new key."""
    return conn.is_alias_target(platform, ident) or conn.keys_a_lane(platform, ident)


def alias_of(conn: Tx, platform: str, alias: str) -> str | None:
    return conn.alias_of(platform, alias)
