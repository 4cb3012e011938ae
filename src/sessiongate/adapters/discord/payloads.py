"""Discord gateway dispatches (JSON) to the kit's `PlatformEvent`: pure, no SDK, no I/O.

The mapping of research/adapters.md section 8:

| Discord                                  | SessionSource                                      |
|------------------------------------------|----------------------------------------------------|
| a DM (no guild_id)                       | chat_type dm, chat_id = the DM channel             |
| a guild text channel                     | group, guild_id = the guild                        |
| an announcement channel                  | channel, guild_id                                  |
| a thread or forum post                   | thread, chat_id = thread_id = the thread's own id, |
|                                          | parent_chat_id = the parent channel                |
| author.id / author.bot / webhook_id      | user_id / is_bot                                   |
| member.roles ∩ allow_roles               | role_authorized (admitted by role)                 |
| the message snowflake                    | message_id                                         |

A message carries no channel type, so the caller passes the `ChannelInfo` it knows (discord.py's
cache, or one GET /channels/{id}). Ids become text.

Claims: a new message is its snowflake; an update is `update:<id>:<edited_timestamp>` (the
MESSAGE_UPDATE Discord sends right after a create to add embeds has no edit time and is the same
update however often it comes); a deletion `delete:<id>`; a slash command `interaction:<id>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sessiongate.adapters.kit.events import PlatformEvent
from sessiongate.adapters.kit.gating import MessageFacts
from sessiongate.adapters.kit.media import Attachment
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.gateway.events import MessageType

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

__all__ = [
    "THREAD_TYPES",
    "ChannelInfo",
    "DiscordIdentity",
    "channel_info",
    "parse_interaction",
    "parse_message",
]

# Channel types (Discord's numbers): announcement and public/private/announcement threads.
GUILD_ANNOUNCEMENT = 5
THREAD_TYPES = frozenset({10, 11, 12})
# Message types that are a person's post: DEFAULT and REPLY (and a slash command's echo).
_POST_TYPES = frozenset({0, 19})
_MENTION = re.compile(r"^<@!?(\d+)>\s*")
_MEDIA_KINDS = {"image": ("photo", MessageType.PHOTO), "video": ("video", MessageType.VIDEO),
                "audio": ("audio", MessageType.AUDIO)}  # fmt: skip
_APPLICATION_COMMAND = 2


@dataclass(frozen=True, slots=True)
class DiscordIdentity:
    user_id: str
    application_id: str = ""


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    id: str
    type: int
    guild_id: str | None = None
    parent_id: str | None = None
    name: str | None = None

    @property
    def is_thread(self) -> bool:
        return self.type in THREAD_TYPES


def channel_info(data: Mapping[str, Any]) -> ChannelInfo:
    """A channel object (REST or gateway) as `ChannelInfo`."""
    parent = data.get("parent_id")
    guild = data.get("guild_id")
    return ChannelInfo(
        id=str(data["id"]),
        type=int(data.get("type", 0)),
        guild_id=str(guild) if guild else None,
        parent_id=str(parent) if parent else None,
        name=data.get("name"),
    )


def _where(
    channel_id: str, guild_id: str | None, channel: ChannelInfo | None
) -> tuple[ChatType, str | None, str | None]:
    """(chat type, thread id, parent chat id)."""
    if guild_id is None:
        return ChatType.DM, None, None
    if channel is not None and channel.is_thread:
        return ChatType.THREAD, channel_id, channel.parent_id
    if channel is not None and channel.type == GUILD_ANNOUNCEMENT:
        return ChatType.CHANNEL, None, None
    return ChatType.GROUP, None, None


def parse_message(
    kind: str,
    data: Mapping[str, Any],
    me: DiscordIdentity,
    channel: ChannelInfo | None,
    *,
    allow_roles: Collection[str] = (),
    commands: Collection[str] = (),
) -> PlatformEvent:
    """A MESSAGE_CREATE, MESSAGE_UPDATE or MESSAGE_DELETE dispatch's `d`."""
    message_id = str(data["id"])
    if kind == "MESSAGE_DELETE":
        event_id = f"delete:{message_id}"
    elif kind == "MESSAGE_UPDATE":
        event_id = f"update:{message_id}:{data.get('edited_timestamp') or 'embeds'}"
    else:
        event_id = message_id
    author: Mapping[str, Any] = data.get("author") or {}
    if kind != "MESSAGE_DELETE" and (not author or int(data.get("type", 0)) not in _POST_TYPES):
        # System messages (joins, pins, thread created) and embed-only updates start nothing.
        return PlatformEvent(event_id=event_id, source=None, kind=kind)
    channel_id = str(data["channel_id"])
    guild = data.get("guild_id")
    guild_id = str(guild) if guild else None
    chat_type, thread_id, parent_id = _where(channel_id, guild_id, channel)
    member: Mapping[str, Any] = data.get("member") or {}
    roles = {str(r) for r in member.get("roles") or ()}
    role_ok = bool(roles & set(allow_roles)) and chat_type is not ChatType.DM
    mentions_bot, text = _addressing(str(data.get("content") or ""), data, me)
    text, to_bot = _bang_command(text, commands)
    referenced: Mapping[str, Any] = data.get("referenced_message") or {}
    is_bot = bool(author.get("bot")) or data.get("webhook_id") is not None
    attachments = tuple(_attachment(a) for a in data.get("attachments") or ())
    source = SessionSource(
        platform=Platform.DISCORD,
        chat_id=channel_id,
        chat_name=channel.name if channel else None,
        chat_type=chat_type,
        user_id=str(author["id"]) if author.get("id") else None,
        user_name=member.get("nick") or author.get("global_name") or author.get("username"),
        thread_id=thread_id,
        is_bot=is_bot,
        guild_id=guild_id,
        parent_chat_id=parent_id,
        message_id=message_id,
        role_authorized=role_ok,
    )
    facts = MessageFacts(
        chat_type=chat_type,
        text=text,
        has_media=bool(attachments),
        is_own=str(author.get("id")) == me.user_id,
        is_bot=is_bot,
        is_edit=kind == "MESSAGE_UPDATE",
        is_deletion=kind == "MESSAGE_DELETE",
        mentions_bot=mentions_bot,
        reply_to_bot=str((referenced.get("author") or {}).get("id")) == me.user_id,
        command_to_bot=to_bot,
    )
    parent = None
    if parent_id is not None:
        parent = SessionSource(
            platform=Platform.DISCORD,
            chat_id=parent_id,
            chat_type=ChatType.GROUP,
            user_id=source.user_id,
            user_name=source.user_name,
            guild_id=guild_id,
        )
    message_type = MessageType.TEXT
    if attachments:
        message_type = next(
            (t for k, t in _MEDIA_KINDS.values() if k == attachments[0].kind), MessageType.DOCUMENT
        )
    reference: Mapping[str, Any] = data.get("message_reference") or {}
    return PlatformEvent(
        event_id=event_id,
        source=source,
        facts=facts,
        text=text,
        attachments=attachments,
        message_type=message_type,
        message_id=message_id,
        reply_to=str(reference["message_id"]) if reference.get("message_id") else None,
        parent=parent,
        kind=kind,
        sent_at=_epoch(data.get("timestamp")),
    )


def parse_interaction(
    data: Mapping[str, Any],
    me: DiscordIdentity,
    channel: ChannelInfo | None,
    *,
    allow_roles: Collection[str] = (),
) -> PlatformEvent:
    """An INTERACTION_CREATE's `d`: an application command as the gateway's `/name args`."""
    event_id = f"interaction:{data['id']}"
    if int(data.get("type", 0)) != _APPLICATION_COMMAND:
        return PlatformEvent(event_id=event_id, source=None, kind="interaction")
    command: Mapping[str, Any] = data.get("data") or {}
    options = " ".join(str(o.get("value", "")) for o in command.get("options") or ())
    text = f"/{command.get('name', '')} {options}".strip()
    channel_id = str(data.get("channel_id") or (data.get("channel") or {}).get("id"))
    guild = data.get("guild_id")
    guild_id = str(guild) if guild else None
    chat_type, thread_id, parent_id = _where(channel_id, guild_id, channel)
    member: Mapping[str, Any] = data.get("member") or {}
    user: Mapping[str, Any] = member.get("user") or data.get("user") or {}
    roles = {str(r) for r in member.get("roles") or ()}
    source = SessionSource(
        platform=Platform.DISCORD,
        chat_id=channel_id,
        chat_type=chat_type,
        user_id=str(user["id"]) if user.get("id") else None,
        user_name=user.get("global_name") or user.get("username"),
        thread_id=thread_id,
        guild_id=guild_id,
        parent_chat_id=parent_id,
        role_authorized=bool(roles & set(allow_roles)) and guild_id is not None,
    )
    facts = MessageFacts(chat_type=chat_type, text=text, command_to_bot=True)
    return PlatformEvent(
        event_id=event_id, source=source, facts=facts, text=text, kind="interaction"
    )


def _addressing(text: str, data: Mapping[str, Any], me: DiscordIdentity) -> tuple[bool, str]:
    mentioned = any(str(u.get("id")) == me.user_id for u in data.get("mentions") or ())
    mentioned = mentioned or f"<@{me.user_id}>" in text or f"<@!{me.user_id}>" in text
    match = _MENTION.match(text)
    if match is not None and match.group(1) == me.user_id:
        text = text[match.end() :]
    return mentioned, text


def _bang_command(text: str, commands: Collection[str]) -> tuple[str, bool]:
    """`!new` for the gateway's `/new` (Discord's own `/` opens its command picker)."""
    if text.startswith("!"):
        name = text[1:].split(" ", 1)[0]
        if name in commands:
            return "/" + text[1:], True
    return text, False


def _attachment(data: Mapping[str, Any]) -> Attachment:
    major = str(data.get("content_type") or "").partition("/")[0]
    kind = _MEDIA_KINDS.get(major, ("document", MessageType.DOCUMENT))[0]
    return Attachment(
        platform="discord",
        file_id=str(data["id"]),
        kind=kind,
        size=int(data["size"]) if data.get("size") is not None else None,
        name=data.get("filename"),
        mime_type=data.get("content_type"),
    )


def _epoch(timestamp: object) -> float | None:
    """A message's ISO 8601 `timestamp` in epoch seconds."""
    if not isinstance(timestamp, str):
        return None
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return None
