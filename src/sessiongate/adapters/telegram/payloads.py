"""Telegram Bot API updates (JSON) to the kit's `PlatformEvent`: pure, no SDK, no I/O.

The mapping of research/adapters.md section 8:

| Telegram                         | SessionSource                                          |
|----------------------------------|--------------------------------------------------------|
| chat.type private                | chat_type dm, chat_id = the chat (= the user's id)     |
| group / supergroup               | group                                                  |
| forum supergroup, in a topic     | group + thread_id = message_thread_id                  |
| forum supergroup, General topic  | group + thread_id "1" (left out on sends, kept typing) |
| channel (channel_post)           | channel                                                |
| from.id / from.username          | user_id / user_name; from.is_bot -> is_bot             |

Ids become text. Entity offsets are UTF-16 code units (the Bot API's measure), so mentions and
commands are cut out of the text in those units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sessiongate.adapters.kit.approval_buttons import (
    APPROVAL_BUTTONS,
    button_value,
    pressed_command,
)
from sessiongate.adapters.kit.events import PlatformEvent
from sessiongate.adapters.kit.fields import (
    PayloadError,
    child,
    ident,
    integer,
    items,
    maybe_child,
    maybe_ident,
    maybe_text,
)
from sessiongate.adapters.kit.gating import MessageFacts
from sessiongate.adapters.kit.media import Attachment
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.gateway.messages import MessageType

__all__ = [
    "APPROVAL_BUTTONS",
    "GENERAL_TOPIC",
    "BotIdentity",
    "PayloadError",
    "approval_keyboard",
    "parse_update",
]

# Telegram's General topic of a forum: its messages carry no thread id, and sends to it must
# leave `message_thread_id` out (Telegram rejects 1) while `sendChatAction` needs it.
GENERAL_TOPIC = "1"

_CHAT_TYPES = {
    "private": ChatType.DM,
    "group": ChatType.GROUP,
    "supergroup": ChatType.GROUP,
    "channel": ChatType.CHANNEL,
}
# Longer than any text or caption Telegram sends (4,096), with room for its entities' ends.
_MAX_UTF16_UNITS = 65_536
_MESSAGE_KINDS = ("message", "edited_message", "channel_post", "edited_channel_post")
# (field, message type) in the order a message is checked; `photo` is a list of sizes.
_MEDIA = (
    ("photo", MessageType.PHOTO),
    ("document", MessageType.DOCUMENT),
    ("video", MessageType.VIDEO),
    ("animation", MessageType.VIDEO),
    ("video_note", MessageType.VIDEO),
    ("voice", MessageType.VOICE),
    ("audio", MessageType.AUDIO),
    ("sticker", MessageType.STICKER),
)


@dataclass(frozen=True, slots=True)
class BotIdentity:
    id: str
    username: str


def approval_keyboard(approval_id: str) -> dict[str, Any]:
    """The `reply_markup` of an approval prompt: Approve and Deny, one row."""
    row = [
        {"text": text, "callback_data": button_value(verb, approval_id)}
        for text, verb in APPROVAL_BUTTONS
    ]
    return {"inline_keyboard": [row]}


def parse_update(update: object, me: BotIdentity) -> PlatformEvent:
    """One update as an event; `PayloadError` (naming the field) for any other shape."""
    if not isinstance(update, Mapping):
        raise PayloadError("update", "expected an object")
    event_id = ident(update, "update_id", "update")
    if "callback_query" in update:
        return _button_press(event_id, child(update, "callback_query", "update"))
    kind = next((k for k in _MESSAGE_KINDS if k in update), None)
    if kind is None:
        other = next((k for k in update if k != "update_id"), "unknown")
        return PlatformEvent(event_id=event_id, source=None, kind=str(other))
    where = f"update.{kind}"
    message = child(update, kind, "update")
    chat = child(message, "chat", where)
    chat_id = ident(chat, "id", f"{where}.chat")
    chat_type = _CHAT_TYPES.get(str(chat.get("type")), ChatType.GROUP)
    sender = maybe_child(message, "from", where)
    user_id = maybe_ident(sender, "id", f"{where}.from")
    thread_id = _thread_id(message, chat, where)
    text_field = "text" if message.get("text") else "caption"
    text = maybe_text(message, text_field, where) or ""
    entities_field = "entities" if message.get("entities") else "caption_entities"
    entities = items(message, entities_field, where)
    mentions, command_to_bot, command_to_other, text = _addressing(
        text, entities, me, f"{where}.{entities_field}"
    )
    reply = maybe_child(message, "reply_to_message", where)
    # In a forum every topic message "replies" to the topic's creation notice: not a reply.
    real_reply = bool(reply) and "forum_topic_created" not in reply
    reply_from = maybe_child(reply, "from", f"{where}.reply_to_message")
    attachments, message_type = _attachments(message, where)
    user_name = maybe_text(sender, "username", f"{where}.from") or _name(sender, f"{where}.from")
    source = SessionSource(
        platform=Platform.TELEGRAM,
        chat_id=chat_id,
        chat_name=maybe_text(chat, "title", f"{where}.chat")
        or _name(chat, f"{where}.chat")
        or None,
        chat_type=chat_type,
        user_id=user_id,
        user_name=user_name or None,
        thread_id=thread_id,
        chat_topic=None,
        is_bot=bool(sender.get("is_bot")),
    )
    facts = MessageFacts(
        chat_type=chat_type,
        text=text,
        has_media=bool(attachments),
        is_own=user_id is not None and user_id == me.id,
        is_bot=bool(sender.get("is_bot")),
        is_edit=kind.startswith("edited_"),
        mentions_bot=mentions,
        reply_to_bot=real_reply
        and maybe_ident(reply_from, "id", f"{where}.reply_to_message.from") == me.id,
        command_to_bot=command_to_bot,
        command_to_other=command_to_other,
    )
    parent = None
    if thread_id is not None and thread_id != GENERAL_TOPIC:
        parent = SessionSource(
            platform=Platform.TELEGRAM,
            chat_id=source.chat_id,
            chat_name=source.chat_name,
            chat_type=chat_type,
            user_id=source.user_id,
            user_name=source.user_name,
        )
    reply_id = maybe_ident(reply, "message_id", f"{where}.reply_to_message")
    date = message.get("date")
    group_id = maybe_ident(message, "media_group_id", where)
    return PlatformEvent(
        event_id=event_id,
        source=source,
        facts=facts,
        text=text,
        attachments=attachments,
        message_type=message_type,
        message_id=ident(message, "message_id", where),
        reply_to=reply_id if real_reply else None,
        parent=parent,
        kind=kind,
        sent_at=float(integer(date, f"{where}.date")) if date is not None else None,
        group_id=group_id or None,
    )


def _button_press(event_id: str, query: Mapping[str, Any]) -> PlatformEvent:
    """A press of an approval button, as the command it stands for (`/approve <id>`) sent by
    the person who pressed it, in the prompt's chat; any other button is ignored."""
    where = "callback_query"
    command = pressed_command(maybe_text(query, "data", where))
    message = maybe_child(query, "message", where)
    chat = maybe_child(message, "chat", f"{where}.message")
    sender = maybe_child(query, "from", where)
    chat_id = maybe_ident(chat, "id", f"{where}.message.chat")
    user_id = maybe_ident(sender, "id", f"{where}.from")
    if command is None or chat_id is None or user_id is None:
        return PlatformEvent(event_id=event_id, source=None, kind="callback_query")
    chat_type = _CHAT_TYPES.get(str(chat.get("type")), ChatType.GROUP)
    text = command
    is_bot = sender.get("is_bot") is True
    source = SessionSource(
        platform=Platform.TELEGRAM,
        chat_id=chat_id,
        chat_name=maybe_text(chat, "title", f"{where}.message.chat")
        or _name(chat, f"{where}.message.chat")
        or None,
        chat_type=chat_type,
        user_id=user_id,
        user_name=maybe_text(sender, "username", f"{where}.from")
        or _name(sender, f"{where}.from")
        or None,
        thread_id=_thread_id(message, chat, f"{where}.message"),
        is_bot=is_bot,
    )
    facts = MessageFacts(
        chat_type=chat_type,
        text=text,
        has_media=False,
        is_own=False,
        is_bot=is_bot,
        is_edit=False,
        mentions_bot=False,
        reply_to_bot=False,
        command_to_bot=True,
        command_to_other=False,
    )
    return PlatformEvent(
        event_id=event_id, source=source, facts=facts, text=text, kind="callback_query"
    )


def _thread_id(message: Mapping[str, Any], chat: Mapping[str, Any], where: str) -> str | None:
    if not chat.get("is_forum"):
        # Outside forums `message_thread_id` marks reply chains, not conversations.
        return None
    topic = maybe_ident(message, "message_thread_id", where)
    if message.get("is_topic_message") and topic is not None:
        return topic
    return GENERAL_TOPIC


def _name(who: Mapping[str, Any], where: str) -> str:
    parts = (maybe_text(who, k, where) for k in ("first_name", "last_name"))
    return " ".join(p for p in parts if p).strip()


def _utf16_slice(text: str, offset: int, length: int) -> str:
    units = text.encode("utf-16-le", "surrogatepass")
    return units[offset * 2 : (offset + length) * 2].decode("utf-16-le", errors="replace")


def _utf16_cut(text: str, offset: int, length: int, replacement: str) -> str:
    units = text.encode("utf-16-le", "surrogatepass")
    head = units[: offset * 2].decode("utf-16-le", errors="replace")
    tail = units[(offset + length) * 2 :].decode("utf-16-le", errors="replace")
    return head + replacement + tail


def _addressing(
    text: str, entities: list[Any], me: BotIdentity, where: str
) -> tuple[bool, bool, bool, str]:
    """(mentions the bot, /cmd@bot, /cmd@other, the text for the agent: a leading `@bot` and
    the `@bot` of a command cut out)."""
    mentions = to_bot = to_other = False
    handle = f"@{me.username}".lower()
    cleaned = text
    for index, entity in enumerate(entities):
        at = f"{where}[{index}]"
        if not isinstance(entity, Mapping):
            raise PayloadError(at, "expected an object")
        kind = entity.get("type")
        offset = _bounded(entity.get("offset", 0), f"{at}.offset")
        length = _bounded(entity.get("length", 0), f"{at}.length")
        piece = _utf16_slice(text, offset, length)
        mentioned_user = maybe_ident(maybe_child(entity, "user", at), "id", f"{at}.user")
        if (kind == "mention" and piece.lower() == handle) or (
            kind == "text_mention" and mentioned_user == me.id
        ):
            mentions = True
            if offset == 0:
                # "@bot do this" is addressed to the bot: the agent gets "do this".
                cleaned = _utf16_cut(text, offset, length, "").lstrip()
        elif kind == "bot_command" and offset == 0:
            command, _, target = piece.partition("@")
            if target:
                if target.lower() == me.username.lower():
                    to_bot = True
                    cleaned = _utf16_cut(text, offset, length, command)
                else:
                    to_other = True
    return mentions, to_bot, to_other, cleaned


def _bounded(value: Any, where: str) -> int:
    """An entity offset or length: a non-negative integer no larger than a message."""
    number = integer(value, where)
    if not 0 <= number <= _MAX_UTF16_UNITS:
        raise PayloadError(where, "out of range")
    return number


def _attachments(
    message: Mapping[str, Any], where: str
) -> tuple[tuple[Attachment, ...], MessageType]:
    for field, message_type in _MEDIA:
        item = message.get(field)
        if not item:
            continue
        at = f"{where}.{field}"
        if isinstance(item, list):
            item = item[-1]  # the largest photo size
            at += "[-1]"
        if not isinstance(item, Mapping):
            raise PayloadError(at, "expected an object")
        size = item.get("file_size")
        return (
            Attachment(
                platform="telegram",
                file_id=ident(item, "file_id", at),
                kind=field,
                size=integer(size, f"{at}.file_size") if size is not None else None,
                name=maybe_text(item, "file_name", at),
                mime_type=maybe_text(item, "mime_type", at),
            ),
        ), message_type
    return (), MessageType.TEXT
