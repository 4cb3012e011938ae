"""WhatsApp identity: one human, one id, however the bridge spells it.

The bridge flips between phone JIDs (`15551234567@s.whatsapp.net`), LIDs (`1234@lid`) and
device-suffixed forms (`15551234567:12@s.whatsapp.net`). `normalize_whatsapp_identifier` is the
pure spelling rule; `canonical_whatsapp_identifier` also resolves learned aliases, which the
store persists so a canonical id, once chosen, never flips.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = [
    "AliasResolver",
    "canonical_whatsapp_identifier",
    "is_whatsapp_group",
    "normalize_whatsapp_identifier",
    "to_whatsapp_jid",
]

AliasResolver = Callable[[str], str | None]

_GROUP_DOMAIN = "@g.us"
_USER_DOMAIN = "@s.whatsapp.net"


def is_whatsapp_group(identifier: str) -> bool:
    return identifier.strip().lower().endswith(_GROUP_DOMAIN)


def normalize_whatsapp_identifier(identifier: str) -> str:
    """Strip `+`, the domain and the device suffix: `+1 555:3@s.whatsapp.net` → `1555`.

    Group ids (`…@g.us`) are returned unchanged: they are not people.
    """
    text = identifier.strip()
    if is_whatsapp_group(text):
        return text
    local = text.split("@", 1)[0]
    local = local.split(":", 1)[0]
    local = local.lstrip("+")
    compact = "".join(ch for ch in local if ch not in " -().")
    return compact if compact.isdigit() else local


def canonical_whatsapp_identifier(
    identifier: str, aliases: Mapping[str, str] | AliasResolver | None = None
) -> str:
    """The canonical id: the normalised form, then a learned alias if one exists."""
    normal = normalize_whatsapp_identifier(identifier)
    if aliases is None or is_whatsapp_group(normal):
        return normal
    found = aliases.get(normal) if isinstance(aliases, Mapping) else aliases(normal)
    return found or normal


def to_whatsapp_jid(identifier: str) -> str:
    """The outbound JID for a canonical id (groups keep their own domain)."""
    text = identifier.strip()
    if is_whatsapp_group(text) or text.endswith("@lid"):
        return text
    return normalize_whatsapp_identifier(text) + _USER_DOMAIN
