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
_LID_DOMAIN = "@lid"
# Dropped from a phone number written for humans: `+1 (555) 123-4567`.
_PHONE_SEPARATORS = " -()."


def is_whatsapp_group(identifier: str) -> bool:
    return identifier.strip().lower().endswith(_GROUP_DOMAIN)


def normalize_whatsapp_identifier(identifier: str) -> str:
    """Strip `+`, the domain and the device suffix: `+1 555:3@s.whatsapp.net` → `1555`.

    These decorations are all that is ever dropped, so two ids that differ in anything else stay
    apart: surrounding whitespace, a leading `+`, one device suffix `:N` (ASCII digits) ending
    the local part, the domain (from the first `@`), and the separators ` -().` of a phone
    number (a local part that is otherwise ASCII digits). Case is kept: ids are opaque. The
    result is a fixed point (normalising it again changes nothing), so a stored canonical id
    never re-spells into another lane. An id made only of decorations gives `""`. Never raises.

    Group ids (`…@g.us`) are returned unchanged: they are not people.
    """
    text = identifier.strip()
    if is_whatsapp_group(text):
        return text
    # Trim before looking for the device suffix: `x:3 @lid` must lose `:3` on the first pass,
    # or a second pass would (and the id would not be a fixed point).
    local = text.split("@", 1)[0].strip()
    user, colon, device = local.partition(":")
    if colon and _is_ascii_digits(device):
        local = user
    # `+ +1` and `+ x` lose all their prefix at once, again so one pass is a fixed point.
    while (trimmed := local.strip().lstrip("+")) != local:
        local = trimmed
    compact = "".join(ch for ch in local if ch not in _PHONE_SEPARATORS)
    return compact if _is_ascii_digits(compact) else local


def _is_ascii_digits(text: str) -> bool:
    # `str.isdigit` alone accepts superscript, Arabic-Indic and fullwidth digits; a phone number
    # or device index never holds them, and folding them in would merge ids that differ.
    return text.isascii() and text.isdigit()


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
    """The outbound JID for a canonical id (groups keep their own domain, LIDs stay LIDs).

    The JID addresses the person, never one of their devices: the device suffix and `+` go.
    An id with no user part (`""`, `"+"`, `"@lid"`) gives `""`, as the reference does, so
    nothing is ever sent to a malformed address such as `@s.whatsapp.net`.
    """
    text = identifier.strip()
    if is_whatsapp_group(text):
        return text
    user = normalize_whatsapp_identifier(text)
    if not user:
        return ""
    domain = _LID_DOMAIN if text.lower().endswith(_LID_DOMAIN) else _USER_DOMAIN
    return user + domain
