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

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.adapters.kit.events import PlatformEvent
from sessiongate.adapters.kit.gating import MessageFacts
from sessiongate.adapters.kit.media import Attachment
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.gateway.events import MessageType

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["APPROVAL_BUTTONS", "GENERAL_TOPIC", "BotIdentity", "approval_keyboard", "parse_update"]

# Telegram's General topic of a forum: its messages carry no thread id, and sends to it must
# leave `message_thread_id` out (Telegram rejects 1) while `sendChatAction` needs it.
GENERAL_TOPIC = "1"

_CHAT_TYPES = {
    "private": ChatType.DM,
    "group": ChatType.GROUP,
    "supergroup": ChatType.GROUP,
    "channel": ChatType.CHANNEL,
}
_MESSAGE_KINDS = ("message", "edited_message", "channel_post", "edited_channel_post")
# An approval prompt's buttons (`gateway/approvals.py`): each press arrives as a callback query
# whose data is `<command>:<approval id>`, and is read as that command typed by the presser.
APPROVAL_BUTTONS = (("Approve", "approve"), ("Deny", "deny"))
_APPROVAL_DATA = re.compile(r"(approve|deny):([0-9a-f]{1,64})")
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
        {"text": text, "callback_data": f"{verb}:{approval_id}"} for text, verb in APPROVAL_BUTTONS
    ]
    return {"inline_keyboard": [row]}


def parse_update(update: Mapping[str, Any], me: BotIdentity) -> PlatformEvent:
    event_id = str(update["update_id"])
    if "callback_query" in update:
        return _button_press(event_id, update["callback_query"])
    kind = next((k for k in _MESSAGE_KINDS if k in update), None)
    if kind is None:
        other = next((k for k in update if k != "update_id"), "unknown")
        return PlatformEvent(event_id=event_id, source=None, kind=str(other))
    message: Mapping[str, Any] = update[kind]
    chat: Mapping[str, Any] = message["chat"]
    chat_type = _CHAT_TYPES.get(str(chat.get("type")), ChatType.GROUP)
    sender: Mapping[str, Any] = message.get("from") or {}
    thread_id = _thread_id(message, chat)
    text = str(message.get("text") or message.get("caption") or "")
    entities = message.get("entities") or message.get("caption_entities") or ()
    mentions, command_to_bot, command_to_other, text = _addressing(text, entities, me)
    reply: Mapping[str, Any] = message.get("reply_to_message") or {}
    # In a forum every topic message "replies" to the topic's creation notice: not a reply.
    real_reply = bool(reply) and "forum_topic_created" not in reply
    attachments, message_type = _attachments(message)
    source = SessionSource(
        platform=Platform.TELEGRAM,
        chat_id=str(chat["id"]),
        chat_name=chat.get("title") or _name(chat) or None,
        chat_type=chat_type,
        user_id=str(sender["id"]) if "id" in sender else None,
        user_name=sender.get("username") or _name(sender) or None,
        thread_id=thread_id,
        chat_topic=None,
        is_bot=bool(sender.get("is_bot")),
    )
    facts = MessageFacts(
        chat_type=chat_type,
        text=text,
        has_media=bool(attachments),
        is_own="id" in sender and str(sender["id"]) == me.id,
        is_bot=bool(sender.get("is_bot")),
        is_edit=kind.startswith("edited_"),
        mentions_bot=mentions,
        reply_to_bot=real_reply and str((reply.get("from") or {}).get("id")) == me.id,
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
    return PlatformEvent(
        event_id=event_id,
        source=source,
        facts=facts,
        text=text,
        attachments=attachments,
        message_type=message_type,
        message_id=str(message["message_id"]),
        reply_to=str(reply["message_id"]) if real_reply and "message_id" in reply else None,
        parent=parent,
        kind=kind,
        sent_at=float(message["date"]) if message.get("date") is not None else None,
        group_id=str(message["media_group_id"]) if message.get("media_group_id") else None,
    )


def _button_press(event_id: str, query: Mapping[str, Any]) -> PlatformEvent:
    """A press of an approval button, as the command it stands for (`/approve <id>`) sent by
    the person who pressed it, in the prompt's chat; any other button is ignored."""
    match = _APPROVAL_DATA.fullmatch(str(query.get("data") or ""))
    message: Mapping[str, Any] = query.get("message") or {}
    chat: Mapping[str, Any] = message.get("chat") or {}
    sender: Mapping[str, Any] = query.get("from") or {}
    if match is None or "id" not in chat or "id" not in sender:
        return PlatformEvent(event_id=event_id, source=None, kind="callback_query")
    chat_type = _CHAT_TYPES.get(str(chat.get("type")), ChatType.GROUP)
    text = f"/{match.group(1)} {match.group(2)}"
    source = SessionSource(
        platform=Platform.TELEGRAM,
        chat_id=str(chat["id"]),
        chat_name=chat.get("title") or _name(chat) or None,
        chat_type=chat_type,
        user_id=str(sender["id"]),
        user_name=sender.get("username") or _name(sender) or None,
        thread_id=_thread_id(message, chat),
        is_bot=bool(sender.get("is_bot")),
    )
    facts = MessageFacts(
        chat_type=chat_type,
        text=text,
        has_media=False,
        is_own=False,
        is_bot=bool(sender.get("is_bot")),
        is_edit=False,
        mentions_bot=False,
        reply_to_bot=False,
        command_to_bot=True,
        command_to_other=False,
    )
    return PlatformEvent(
        event_id=event_id, source=source, facts=facts, text=text, kind="callback_query"
    )


def _thread_id(message: Mapping[str, Any], chat: Mapping[str, Any]) -> str | None:
    if not chat.get("is_forum"):
        # Outside forums `message_thread_id` marks reply chains, not conversations.
        return None
    if message.get("is_topic_message") and message.get("message_thread_id") is not None:
        return str(message["message_thread_id"])
    return GENERAL_TOPIC


def _name(who: Mapping[str, Any]) -> str:
    return " ".join(str(who[k]) for k in ("first_name", "last_name") if who.get(k)).strip()


def _utf16_slice(text: str, offset: int, length: int) -> str:
    units = text.encode("utf-16-le")
    return units[offset * 2 : (offset + length) * 2].decode("utf-16-le", errors="replace")


def _utf16_cut(text: str, offset: int, length: int, replacement: str) -> str:
    units = text.encode("utf-16-le")
    head = units[: offset * 2].decode("utf-16-le", errors="replace")
    tail = units[(offset + length) * 2 :].decode("utf-16-le", errors="replace")
    return head + replacement + tail


def _addressing(text: str, entities: Any, me: BotIdentity) -> tuple[bool, bool, bool, str]:
    """(mentions the bot, /cmd@bot, /cmd@other, the text for the agent: a leading `@bot` and
    the `@bot` of a command cut out)."""
    mentions = to_bot = to_other = False
    handle = f"@{me.username}".lower()
    cleaned = text
    for entity in entities:
        kind = entity.get("type")
        offset, length = int(entity.get("offset", 0)), int(entity.get("length", 0))
        piece = _utf16_slice(text, offset, length)
        mentioned_user = str((entity.get("user") or {}).get("id"))
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


def _attachments(message: Mapping[str, Any]) -> tuple[tuple[Attachment, ...], MessageType]:
    for field, message_type in _MEDIA:
        item = message.get(field)
        if not item:
            continue
        if isinstance(item, list):
            item = item[-1]  # the largest photo size
        return (
            Attachment(
                platform="telegram",
                file_id=str(item["file_id"]),
                kind=field,
                size=int(item["file_size"]) if item.get("file_size") is not None else None,
                name=item.get("file_name"),
                mime_type=item.get("mime_type"),
            ),
        ), message_type
    return (), MessageType.TEXT
