"""WhatsApp Cloud API webhook bodies (JSON) to the kit's events: pure, no SDK, no I/O.

One POST carries `entry[].changes[].value`, and a `messages` change's value holds `contacts`,
`messages` and `statuses`, any of them batched. The mapping of research/adapters.md section 8:

| Cloud API                                   | SessionSource                                   |
|---------------------------------------------|-------------------------------------------------|
| a message without `group_id`                | chat_type dm, chat_id = the sender's number     |
| a message with `group_id`                   | chat_type group, chat_id = the group id (as is) |
| `from` / the contact's `wa_id`              | user_id (normalised: digits, no `+`)            |
| the contact's `user_id` (BSUID)             | user_id_alt; learned as an alias of the number  |
| `contacts[].profile.name`                   | user_name                                       |
| `id` (`wamid...`)                           | message_id and the claim key                    |
| `context.id`                                | reply_to; `context.from` = us: a reply to the bot |

A sender who hides their number (WhatsApp usernames) arrives with only the BSUID: it is then
the DM's chat id, and the alias learned the first time both were seen keeps one lane.
`statuses` (sent, delivered, read, failed) are returned apart: they are recorded, never
turned into turns. Reactions, edits without `answer_edits`, deletions (`revoke`) and other
housekeeping map to events the kit drops. Changes of other fields (templates, account
updates) and messages to another phone number id are skipped.

A body that is JSON but not this shape raises `PayloadError` naming the first field that is
wrong (`entry[0].changes[0].value.messages[1].id`), so the webhook answers 400 with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessiongate.adapters.kit.events import PlatformEvent
from sessiongate.adapters.kit.gating import MessageFacts
from sessiongate.adapters.kit.media import Attachment
from sessiongate.core.identity import normalize_whatsapp_identifier
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.gateway.messages import MessageType

__all__ = ["PayloadError", "StatusUpdate", "WebhookBatch", "WhatsAppIdentity", "parse_webhook"]

# Inbound media kinds: (message type, the kit's attachment kind).
_MEDIA = {
    "image": (MessageType.PHOTO, "photo"),
    "video": (MessageType.VIDEO, "video"),
    "audio": (MessageType.AUDIO, "audio"),
    "document": (MessageType.DOCUMENT, "document"),
    "sticker": (MessageType.STICKER, "sticker"),
}
# Message types that are housekeeping, never a turn (the kit drops an event without a source).
_IGNORED = frozenset({"reaction", "system", "unsupported", "request_welcome", "ephemeral"})
STATUSES = frozenset({"sent", "delivered", "read", "failed", "played", "deleted"})


class PayloadError(ValueError):
    """A signed body that is not a Cloud API webhook: `field` is where it went wrong."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class WhatsAppIdentity:
    """The business number the adapter answers for."""

    phone_number_id: str
    # Digits only, as `context.from` and mentions spell it; "" until learned.
    display_number: str = ""


@dataclass(frozen=True, slots=True)
class StatusUpdate:
    """A delivery report of a message the bot sent: recorded, never a turn."""

    message_id: str
    status: str
    recipient: str
    timestamp: float | None
    error: str | None = None


@dataclass(slots=True)
class WebhookBatch:
    events: list[PlatformEvent] = field(default_factory=list)
    statuses: list[StatusUpdate] = field(default_factory=list)
    # (BSUID, phone number) pairs seen together: two spellings of one person.
    aliases: list[tuple[str, str]] = field(default_factory=list)
    # The business's display number as the payload's metadata gives it.
    display_number: str | None = None
    skipped: int = 0  # changes or messages for another field or phone number id


def parse_webhook(body: Any, me: WhatsAppIdentity) -> WebhookBatch:
    """Every message and status of one webhook body (see the module docstring)."""
    root = _obj(body, "body")
    batch = WebhookBatch()
    for i, entry in enumerate(_list(root, "entry", "body")):
        where = f"entry[{i}]"
        entry = _obj(entry, where)
        for j, change in enumerate(_list(entry, "changes", where)):
            cwhere = f"{where}.changes[{j}]"
            change = _obj(change, cwhere)
            if change.get("field") != "messages":
                batch.skipped += 1
                continue
            _parse_value(_obj(change.get("value"), f"{cwhere}.value"), f"{cwhere}.value", me, batch)
    return batch


def _parse_value(
    value: dict[str, Any], where: str, me: WhatsAppIdentity, batch: WebhookBatch
) -> None:
    metadata = _obj(value.get("metadata"), f"{where}.metadata")
    phone_id = _text(metadata, "phone_number_id", f"{where}.metadata")
    if phone_id != me.phone_number_id:
        batch.skipped += 1
        return
    display = normalize_whatsapp_identifier(str(metadata.get("display_phone_number") or ""))
    if display:
        batch.display_number = display
        me = WhatsAppIdentity(me.phone_number_id, display)
    contacts = {}
    for k, contact in enumerate(_list(value, "contacts", where, required=False)):
        contact = _obj(contact, f"{where}.contacts[{k}]")
        number = _number(contact.get("wa_id"))
        bsuid = _optional(contact, "user_id", f"{where}.contacts[{k}]")
        if number and bsuid:
            batch.aliases.append((bsuid, number))
        for key in (number, bsuid):
            if key:
                contacts[key] = contact
    for k, message in enumerate(_list(value, "messages", where, required=False)):
        mwhere = f"{where}.messages[{k}]"
        batch.events.append(_message(_obj(message, mwhere), mwhere, me, contacts))
    for k, status in enumerate(_list(value, "statuses", where, required=False)):
        batch.statuses.append(
            _status(_obj(status, f"{where}.statuses[{k}]"), f"{where}.statuses[{k}]")
        )


def _message(
    message: dict[str, Any], where: str, me: WhatsAppIdentity, contacts: dict[str, dict[str, Any]]
) -> PlatformEvent:
    message_id = _text(message, "id", where)
    kind = _text(message, "type", where)
    sender = _number(message.get("from"))
    bsuid = _optional(message, "from_user_id", where)
    contact = contacts.get(sender or "") or contacts.get(bsuid or "") or {}
    bsuid = bsuid or _optional(contact, "user_id", f"{where}.contact")
    sender = sender or _number(contact.get("wa_id"))
    if not contact and len({id(c) for c in contacts.values()}) == 1:
        # Meta may spell a number differently in `from` and `wa_id` (Brazil's extra 9): the one
        # contact of the body names the sender, but lends no id (ids admit people).
        contact = {"profile": next(iter(contacts.values())).get("profile")}
    if not sender and not bsuid:
        raise PayloadError(f"{where}.from", "missing: no sender number nor user id")
    user_id = sender or bsuid
    assert user_id is not None
    group = _optional(message, "group_id", where)
    chat_type = ChatType.GROUP if group else ChatType.DM
    profile = contact.get("profile")
    name = profile.get("name") if isinstance(profile, dict) else None
    source = SessionSource(
        platform=Platform.WHATSAPP,
        chat_id=group or user_id,
        chat_type=chat_type,
        user_id=user_id,
        user_name=str(name) if name else None,
        user_id_alt=bsuid if bsuid != user_id else None,
        message_id=message_id,
    )
    sent_at = _timestamp(message.get("timestamp"), f"{where}.timestamp")
    if kind in _IGNORED or kind not in (*_MEDIA, "text", "interactive", "button", "edit", "revoke"):
        return PlatformEvent(event_id=message_id, source=None, kind=kind, sent_at=sent_at)
    content = message
    is_edit = kind == "edit"
    if is_edit:
        edit = _obj(message.get("edit"), f"{where}.edit")
        content = _obj(edit.get("message"), f"{where}.edit.message")
        kind = _text(content, "type", f"{where}.edit.message")
    text, attachments, message_type = _content(content, kind, where)
    context = message.get("context")
    context = context if isinstance(context, dict) else {}
    reply_to = context.get("id")
    quoted_from = _number(context.get("from"))
    text, mentions = _addressing(text, me)
    facts = MessageFacts(
        chat_type=chat_type,
        text=text,
        has_media=bool(attachments),
        is_own=bool(me.display_number) and sender == me.display_number,
        is_edit=is_edit,
        is_deletion=kind == "revoke",
        mentions_bot=mentions,
        reply_to_bot=bool(quoted_from) and quoted_from == me.display_number,
        # WhatsApp has no `/cmd@bot`: a command after a mention of the bot is addressed to it.
        command_to_bot=mentions and text.startswith("/"),
    )
    return PlatformEvent(
        event_id=message_id,
        source=source,
        facts=facts,
        text=text,
        attachments=attachments,
        message_type=message_type,
        message_id=message_id,
        reply_to=str(reply_to) if reply_to else None,
        kind=kind if not is_edit else "edit",
        sent_at=sent_at,
    )


def _addressing(text: str, me: WhatsAppIdentity) -> tuple[str, bool]:
    """(the text for the agent, whether it mentions the bot): a mention is `@<the business
    number>` (WhatsApp writes mentions as the number); a leading one is cut."""
    if not me.display_number:
        return text, False
    handles = (f"@{me.display_number}", f"@+{me.display_number}")
    if not any(h in text for h in handles):
        return text, False
    stripped = text.lstrip()
    for handle in handles:
        if stripped.startswith(handle):
            return stripped[len(handle) :].lstrip(), True
    return text, True


def _content(
    content: dict[str, Any], kind: str, where: str
) -> tuple[str, tuple[Attachment, ...], MessageType]:
    if kind == "text":
        body = _obj(content.get("text"), f"{where}.text")
        return _text(body, "body", f"{where}.text", empty=True), (), MessageType.TEXT
    if kind == "interactive":
        # A tapped reply button or list row: its title is what the user said.
        inner = _obj(content.get("interactive"), f"{where}.interactive")
        reply = inner.get("button_reply") or inner.get("list_reply") or {}
        title = reply.get("title") if isinstance(reply, dict) else None
        return str(title or ""), (), MessageType.TEXT
    if kind == "button":
        inner = _obj(content.get("button"), f"{where}.button")
        return str(inner.get("text") or ""), (), MessageType.TEXT
    if kind == "revoke":
        return "", (), MessageType.TEXT
    message_type, attachment_kind = _MEDIA[kind]
    media = _obj(content.get(kind), f"{where}.{kind}")
    media_id = _text(media, "id", f"{where}.{kind}")
    size = media.get("file_size")
    if kind == "audio" and media.get("voice"):
        message_type, attachment_kind = MessageType.VOICE, "voice"
    attachment = Attachment(
        platform="whatsapp",
        file_id=media_id,
        kind=attachment_kind,
        size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        name=str(media["filename"]) if media.get("filename") else None,
        mime_type=str(media["mime_type"]) if media.get("mime_type") else None,
    )
    return str(media.get("caption") or ""), (attachment,), message_type


def _status(status: dict[str, Any], where: str) -> StatusUpdate:
    state = _text(status, "status", where)
    if state not in STATUSES:
        raise PayloadError(f"{where}.status", f"unknown status {state[:40]!r}")
    errors = status.get("errors")
    error = None
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        first = errors[0]
        error = f"{first.get('code', '?')}: {first.get('title') or first.get('message') or ''}"
    recipient = _number(status.get("recipient_id")) or str(status.get("recipient_user_id") or "")
    return StatusUpdate(
        message_id=_text(status, "id", where),
        status=state,
        recipient=recipient,
        timestamp=_timestamp(status.get("timestamp"), f"{where}.timestamp"),
        error=error,
    )


# ---------------------------------------------------------------------------- strict readers


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PayloadError(where, f"expected an object, got {_kind(value)}")
    return value


def _list(value: dict[str, Any], key: str, where: str, *, required: bool = True) -> list[Any]:
    found = value.get(key)
    if found is None and not required:
        return []
    if not isinstance(found, list):
        raise PayloadError(f"{where}.{key}", f"expected a list, got {_kind(found)}")
    return found


def _text(value: dict[str, Any], key: str, where: str, *, empty: bool = False) -> str:
    found = value.get(key)
    if isinstance(found, int) and not isinstance(found, bool):
        found = str(found)
    if not isinstance(found, str) or (not found and not empty):
        raise PayloadError(f"{where}.{key}", f"expected text, got {_kind(found)}")
    return found


def _optional(value: dict[str, Any], key: str, where: str) -> str | None:
    found = value.get(key)
    if found is None or found == "":
        return None
    if not isinstance(found, str):
        raise PayloadError(f"{where}.{key}", f"expected text, got {_kind(found)}")
    return found


def _number(value: Any) -> str | None:
    """A phone number as the core's identity rule spells it (digits, no `+`)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    return normalize_whatsapp_identifier(value) or None


def _timestamp(value: Any, where: str) -> float | None:
    if value is None:
        return None
    try:
        return float(value)  # epoch seconds, sent as text
    except (TypeError, ValueError):
        raise PayloadError(where, "expected epoch seconds") from None


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )
