"""signal-cli receive events (the JSON of `/api/v1/events`) to the kit's `PlatformEvent`: pure.

The mapping of research/adapters.md section 8:

| signal-cli envelope                       | SessionSource                                      |
|-------------------------------------------|----------------------------------------------------|
| dataMessage without groupInfo             | chat_type dm, chat_id = sourceUuid (else number)   |
| dataMessage.groupInfo.groupId             | group, chat_id `group:<groupId>`, chat_id_alt = id |
| sourceNumber / sourceUuid / sourceName    | user_id (number, else uuid) / user_id_alt / name   |
| envelope timestamp                        | message_id; event id `<sender>:<timestamp>`        |

The account UUID is the participant (`SessionSource.participant_id` prefers `user_id_alt`),
and a DM is keyed by it, so a number change does not split a conversation. A sender with no
number (`sourceNumber` null) is named by its UUID everywhere.

Typing, receipts, calls, stories, reactions and sync messages (what the account's other
devices sent) start no turn: they map to an event with no source. An `editMessage` is an edit
and a `remoteDelete` a deletion (the kit's gate decides). Mentions arrive as U+FFFC in the text
with `mentions` ranges in UTF-16 units: a leading mention of the bot is cut out, others become
`@name`.

Anything that is not the shape signal-cli sends raises `MalformedEnvelopeError`, the one error
this module raises, naming the field; the adapter logs it and starts nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.adapters.kit.errors import PlatformError
from sessiongate.adapters.kit.events import PlatformEvent
from sessiongate.adapters.kit.gating import MessageFacts
from sessiongate.adapters.kit.media import Attachment
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.gateway.messages import MessageType

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "GROUP_PREFIX",
    "MalformedEnvelopeError",
    "SignalIdentity",
    "group_chat_id",
    "parse_event",
]

# A group's chat id is `group:<groupId>` (the base64 id signal-cli gives); a DM's is a person.
GROUP_PREFIX = "group:"
_MENTION = "\ufffc"
# Envelope parts that are never a turn, in the order they are looked for.
_OTHER_KINDS = (
    "typingMessage",
    "receiptMessage",
    "syncMessage",
    "callMessage",
    "storyMessage",
)
_MEDIA_KINDS = (
    ("image/", "photo", MessageType.PHOTO),
    ("video/", "video", MessageType.VIDEO),
    ("audio/", "voice", MessageType.VOICE),
)


class MalformedEnvelopeError(PlatformError):
    """An event that is not what signal-cli sends; `field` names the part that is wrong."""

    code = "signal_malformed_envelope"
    field: str

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"malformed signal-cli event: {field} {problem}", field=field)


@dataclass(frozen=True, slots=True)
class SignalIdentity:
    """The bot's own account: its number and, when the daemon told it, its UUID."""

    number: str
    uuid: str | None = None

    def is_me(self, number: str | None, uuid: str | None) -> bool:
        return (number is not None and number == self.number) or (
            uuid is not None and self.uuid is not None and uuid == self.uuid
        )


def group_chat_id(group_id: str) -> str:
    return GROUP_PREFIX + group_id


def parse_event(event: object, me: SignalIdentity) -> PlatformEvent:
    """One receive event (`{"envelope": {...}, "account": ...}`) as the kit's event."""
    envelope = _obj(_obj(event, "event").get("envelope"), "envelope")
    number = _opt_str(envelope, "sourceNumber", "envelope.")
    uuid = _opt_str(envelope, "sourceUuid", "envelope.")
    if number is None and uuid is None:
        # The deprecated `source` is the number or the UUID, whichever signal-cli had.
        legacy = _opt_str(envelope, "source", "envelope.")
        if legacy is not None and legacy.startswith("+"):
            number = legacy
        else:
            uuid = legacy
    timestamp = _int(envelope.get("timestamp"), "envelope.timestamp")
    sender = uuid or number
    event_id = f"{sender}:{timestamp}"
    data = envelope.get("dataMessage")
    edit = envelope.get("editMessage")
    if data is None and edit is not None:
        edit_obj = _obj(edit, "envelope.editMessage")
        data = _obj(edit_obj.get("dataMessage"), "envelope.editMessage.dataMessage")
    if data is None:
        kind = next((k for k in _OTHER_KINDS if envelope.get(k) is not None), "unknown")
        return PlatformEvent(event_id=event_id, source=None, kind=kind)
    message = _obj(data, "envelope.dataMessage")
    if message.get("reaction") is not None:
        _obj(message["reaction"], "envelope.dataMessage.reaction")
        return PlatformEvent(event_id=event_id, source=None, kind="reaction")
    if sender is None:
        raise MalformedEnvelopeError("envelope.source", "is missing: a message needs a sender")
    return _message(event_id, envelope, message, me, number=number, uuid=uuid,
                    timestamp=timestamp, is_edit=edit is not None)  # fmt: skip


def _message(
    event_id: str,
    envelope: Mapping[str, Any],
    message: Mapping[str, Any],
    me: SignalIdentity,
    *,
    number: str | None,
    uuid: str | None,
    timestamp: int,
    is_edit: bool,
) -> PlatformEvent:
    group = message.get("groupInfo")
    group_id: str | None = None
    group_name: str | None = None
    if group is not None:
        info = _obj(group, "envelope.dataMessage.groupInfo")
        group_id = _str(info.get("groupId"), "envelope.dataMessage.groupInfo.groupId")
        group_name = _opt_str(info, "groupName", "envelope.dataMessage.groupInfo.")
    chat_type = ChatType.GROUP if group_id is not None else ChatType.DM
    user_id = number or uuid
    chat_id = group_chat_id(group_id) if group_id is not None else str(uuid or number)
    name = _opt_str(envelope, "sourceName", "envelope.")
    text = _opt_str(message, "message", "envelope.dataMessage.") or ""
    mentions_bot, text = _mentions(text, message.get("mentions"), me)
    command = text.lstrip().startswith("/")
    quote = message.get("quote")
    reply_to: str | None = None
    reply_to_bot = False
    if quote is not None:
        quoted = _obj(quote, "envelope.dataMessage.quote")
        reply_to = str(_int(quoted.get("id"), "envelope.dataMessage.quote.id"))
        prefix = "envelope.dataMessage.quote."
        author_number = _opt_str(quoted, "authorNumber", prefix)
        author_uuid = _opt_str(quoted, "authorUuid", prefix)
        legacy = _opt_str(quoted, "author", prefix)
        reply_to_bot = me.is_me(author_number or legacy, author_uuid or legacy)
    attachments, message_type = _attachments(message.get("attachments"))
    source = SessionSource(
        platform=Platform.SIGNAL,
        chat_id=chat_id,
        chat_name=group_name if group_id is not None else name,
        chat_type=chat_type,
        user_id=user_id,
        user_name=name,
        user_id_alt=uuid,
        chat_id_alt=group_id,
    )
    addressed = chat_type is ChatType.DM or mentions_bot
    facts = MessageFacts(
        chat_type=chat_type,
        text=text,
        has_media=bool(attachments),
        is_own=me.is_me(number, uuid),
        is_edit=is_edit,
        is_deletion=message.get("remoteDelete") is not None,
        mentions_bot=mentions_bot,
        reply_to_bot=reply_to_bot,
        # Signal has no bot commands: `/cmd` said to the bot (a DM, or after its mention).
        command_to_bot=command and addressed,
    )
    return PlatformEvent(
        event_id=event_id,
        source=source,
        facts=facts,
        text=text,
        attachments=attachments,
        message_type=message_type,
        message_id=str(timestamp),
        reply_to=reply_to,
        kind="edit" if is_edit else "message",
        sent_at=timestamp / 1000.0,
    )


def _mentions(text: str, raw: object, me: SignalIdentity) -> tuple[bool, str]:
    """(the bot is mentioned, the text with mention placeholders written out)."""
    if raw is None:
        return False, text
    if not isinstance(raw, list):
        raise MalformedEnvelopeError("envelope.dataMessage.mentions", "is not a list")
    units = text.encode("utf-16-le", "surrogatepass")
    spans: list[tuple[int, int, str, bool]] = []
    for n, item in enumerate(raw):
        field = f"envelope.dataMessage.mentions[{n}]"
        mention = _obj(item, field)
        start = _int(mention.get("start"), field + ".start")
        length = _int(mention.get("length"), field + ".length")
        if start < 0 or length < 0 or (start + length) * 2 > len(units):
            raise MalformedEnvelopeError(field, "is outside the text")
        who_number = _opt_str(mention, "number", field + ".")
        who_uuid = _opt_str(mention, "uuid", field + ".")
        label = _opt_str(mention, "name", field + ".") or who_number or who_uuid or "someone"
        spans.append((start, length, label, me.is_me(who_number, who_uuid)))
    mentions_bot = any(is_bot for *_, is_bot in spans)
    leading = any(is_bot and start == 0 for start, _, _, is_bot in spans)
    out = units
    # From the end, so earlier offsets stay valid.
    for start, length, label, is_bot in sorted(spans, reverse=True):
        replacement = (
            b"" if is_bot and start == 0 else f"@{label}".encode("utf-16-le", "surrogatepass")
        )
        out = out[: start * 2] + replacement + out[(start + length) * 2 :]
    written = out.decode("utf-16-le", errors="surrogatepass")
    # "@bot do this" is addressed to the bot: the agent gets "do this".
    return mentions_bot, written.lstrip() if leading else written


def _attachments(raw: object) -> tuple[tuple[Attachment, ...], MessageType]:
    if raw is None:
        return (), MessageType.TEXT
    if not isinstance(raw, list):
        raise MalformedEnvelopeError("envelope.dataMessage.attachments", "is not a list")
    found: list[Attachment] = []
    message_type = MessageType.TEXT
    for n, item in enumerate(raw):
        field = f"envelope.dataMessage.attachments[{n}]"
        attachment = _obj(item, field)
        mime = _opt_str(attachment, "contentType", field + ".") or "application/octet-stream"
        kind, kind_type = next(
            ((k, t) for prefix, k, t in _MEDIA_KINDS if mime.startswith(prefix)),
            ("document", MessageType.DOCUMENT),
        )
        if message_type is MessageType.TEXT:
            message_type = kind_type
        size = attachment.get("size")
        found.append(
            Attachment(
                platform="signal",
                file_id=_str(attachment.get("id"), field + ".id"),
                kind=kind,
                size=_int(size, field + ".size") if size is not None else None,
                name=_opt_str(attachment, "filename", field + "."),
                mime_type=mime,
            )
        )
    return tuple(found), message_type


# ---------------------------------------------------------------------------- field access


def _obj(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise MalformedEnvelopeError(field, "is not an object")
    return value


def _str(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise MalformedEnvelopeError(field, "is not a non-empty string")
    return value


def _opt_str(obj: Mapping[str, Any], key: str, prefix: str) -> str | None:
    value = obj.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise MalformedEnvelopeError(prefix + key, "is not a string")
    return value


def _int(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedEnvelopeError(field, "is not an integer")
    if value < 0:
        raise MalformedEnvelopeError(field, "is negative")
    return value
