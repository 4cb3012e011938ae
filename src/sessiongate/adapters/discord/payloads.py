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
update however often it comes); a deletion `delete:<id>`; a slash command or a button press
`interaction:<id>`. A press of an approval prompt's button (custom id `approve:<id>` or
`deny:<id>`, `kit/approval_buttons.py`) is that command sent by the person who pressed it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sessiongate.adapters.kit.approval_buttons import (
    APPROVAL_BUTTONS,
    button_value,
    pressed_command,
)
from sessiongate.adapters.kit.events import PlatformEvent
from sessiongate.adapters.kit.fields import (
    PayloadError,
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

if TYPE_CHECKING:
    from collections.abc import Collection

__all__ = [
    "THREAD_TYPES",
    "ChannelInfo",
    "DiscordIdentity",
    "PayloadError",
    "approval_buttons",
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
_MESSAGE_COMPONENT = 3
# Component types and button styles (Discord's numbers).
_ACTION_ROW, _BUTTON = 1, 2
_BUTTON_STYLES = {"approve": 3, "deny": 4}  # success (green), danger (red)


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
    data: object,
    me: DiscordIdentity,
    channel: ChannelInfo | None,
    *,
    allow_roles: Collection[str] = (),
    commands: Collection[str] = (),
) -> PlatformEvent:
    """A MESSAGE_CREATE, MESSAGE_UPDATE or MESSAGE_DELETE dispatch's `d`; `PayloadError`
    (naming the field) for any other shape."""
    if not isinstance(data, Mapping):
        raise PayloadError("d", "expected an object")
    message_id = ident(data, "id", "d")
    if kind == "MESSAGE_DELETE":
        event_id = f"delete:{message_id}"
    elif kind == "MESSAGE_UPDATE":
        edited = maybe_text(data, "edited_timestamp", "d")
        event_id = f"update:{message_id}:{edited or 'embeds'}"
    else:
        event_id = message_id
    author = maybe_child(data, "author", "d")
    message_type = data.get("type", 0)
    if kind != "MESSAGE_DELETE" and (
        not author or integer(message_type, "d.type") not in _POST_TYPES
    ):
        # System messages (joins, pins, thread created) and embed-only updates start nothing.
        return PlatformEvent(event_id=event_id, source=None, kind=kind)
    channel_id = ident(data, "channel_id", "d")
    guild_id = maybe_ident(data, "guild_id", "d") or None
    chat_type, thread_id, parent_id = _where(channel_id, guild_id, channel)
    member = maybe_child(data, "member", "d")
    roles = _roles(member)
    role_ok = bool(roles & set(allow_roles)) and chat_type is not ChatType.DM
    mentions_bot, text = _addressing(maybe_text(data, "content", "d") or "", data, me)
    text, to_bot = _bang_command(text, commands)
    referenced = maybe_child(data, "referenced_message", "d")
    referenced_author = maybe_child(referenced, "author", "d.referenced_message")
    author_id = maybe_ident(author, "id", "d.author")
    is_bot = bool(author.get("bot")) or data.get("webhook_id") is not None
    attachments = tuple(
        _attachment(a, f"d.attachments[{i}]") for i, a in enumerate(items(data, "attachments", "d"))
    )
    user_name = (
        maybe_text(member, "nick", "d.member")
        or maybe_text(author, "global_name", "d.author")
        or maybe_text(author, "username", "d.author")
    )
    source = SessionSource(
        platform=Platform.DISCORD,
        chat_id=channel_id,
        chat_name=channel.name if channel else None,
        chat_type=chat_type,
        user_id=author_id or None,
        user_name=user_name,
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
        is_own=author_id == me.user_id,
        is_bot=is_bot,
        is_edit=kind == "MESSAGE_UPDATE",
        is_deletion=kind == "MESSAGE_DELETE",
        mentions_bot=mentions_bot,
        reply_to_bot=maybe_ident(referenced_author, "id", "d.referenced_message.author")
        == me.user_id,
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
    message_kind = MessageType.TEXT
    if attachments:
        message_kind = next(
            (t for k, t in _MEDIA_KINDS.values() if k == attachments[0].kind), MessageType.DOCUMENT
        )
    reference = maybe_child(data, "message_reference", "d")
    return PlatformEvent(
        event_id=event_id,
        source=source,
        facts=facts,
        text=text,
        attachments=attachments,
        message_type=message_kind,
        message_id=message_id,
        reply_to=maybe_ident(reference, "message_id", "d.message_reference") or None,
        parent=parent,
        kind=kind,
        sent_at=_epoch(data.get("timestamp")),
    )


def approval_buttons(approval_id: str) -> list[dict[str, Any]]:
    """The `components` of an approval prompt: Approve and Deny in one action row, each
    button's custom id `<verb>:<approval id>`."""
    buttons = [
        {"type": _BUTTON, "style": _BUTTON_STYLES[verb], "label": label,
         "custom_id": button_value(verb, approval_id)}
        for label, verb in APPROVAL_BUTTONS
    ]  # fmt: skip
    return [{"type": _ACTION_ROW, "components": buttons}]


def parse_interaction(
    data: object,
    me: DiscordIdentity,
    channel: ChannelInfo | None,
    *,
    allow_roles: Collection[str] = (),
) -> PlatformEvent:
    """An INTERACTION_CREATE's `d`: an application command as the gateway's `/name args` (kind
    `interaction`), a press of an approval button as `/approve <id>` or `/deny <id>` (kind
    `component`); any other interaction starts nothing. `PayloadError` (naming the field) for
    any other shape."""
    if not isinstance(data, Mapping):
        raise PayloadError("d", "expected an object")
    event_id = f"interaction:{ident(data, 'id', 'd')}"
    kind = integer(data.get("type", 0), "d.type")
    inner = maybe_child(data, "data", "d")
    if kind == _APPLICATION_COMMAND:
        text: str | None = _command_text(inner)
        label = "interaction"
    elif kind == _MESSAGE_COMPONENT:
        text = pressed_command(maybe_text(inner, "custom_id", "d.data"))
        label = "component"
    else:
        text, label = None, "interaction"
    if text is None:
        return PlatformEvent(event_id=event_id, source=None, kind=label)
    channel_id = maybe_ident(data, "channel_id", "d") or maybe_ident(
        maybe_child(data, "channel", "d"), "id", "d.channel"
    )
    if channel_id is None:
        raise PayloadError("d.channel_id", "missing")
    guild_id = maybe_ident(data, "guild_id", "d") or None
    chat_type, thread_id, parent_id = _where(channel_id, guild_id, channel)
    member = maybe_child(data, "member", "d")
    user = maybe_child(member, "user", "d.member") or maybe_child(data, "user", "d")
    roles = _roles(member)
    source = SessionSource(
        platform=Platform.DISCORD,
        chat_id=channel_id,
        chat_type=chat_type,
        user_id=maybe_ident(user, "id", "d.user") or None,
        user_name=maybe_text(user, "global_name", "d.user")
        or maybe_text(user, "username", "d.user"),
        thread_id=thread_id,
        guild_id=guild_id,
        parent_chat_id=parent_id,
        role_authorized=bool(roles & set(allow_roles)) and guild_id is not None,
    )
    facts = MessageFacts(chat_type=chat_type, text=text, command_to_bot=True)
    return PlatformEvent(event_id=event_id, source=source, facts=facts, text=text, kind=label)


def _command_text(command: Mapping[str, Any]) -> str:
    """An application command's `/name option option`."""
    options = []
    for index, option in enumerate(items(command, "options", "d.data")):
        if not isinstance(option, Mapping):
            raise PayloadError(f"d.data.options[{index}]", "expected an object")
        value = option.get("value", "")
        if isinstance(value, (Mapping, list)):
            raise PayloadError(f"d.data.options[{index}].value", "expected a scalar")
        options.append(str(value))
    name = maybe_text(command, "name", "d.data") or ""
    return f"/{name} {' '.join(options)}".strip()


def _roles(member: Mapping[str, Any]) -> set[str]:
    roles = set()
    for index, value in enumerate(items(member, "roles", "d.member")):
        roles.add(
            value if isinstance(value, str) else str(integer(value, f"d.member.roles[{index}]"))
        )
    return roles


def _addressing(text: str, data: Mapping[str, Any], me: DiscordIdentity) -> tuple[bool, str]:
    mentioned = False
    for index, user in enumerate(items(data, "mentions", "d")):
        if not isinstance(user, Mapping):
            raise PayloadError(f"d.mentions[{index}]", "expected an object")
        mentioned = mentioned or maybe_ident(user, "id", f"d.mentions[{index}]") == me.user_id
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


def _attachment(data: Any, where: str) -> Attachment:
    if not isinstance(data, Mapping):
        raise PayloadError(where, "expected an object")
    content_type = maybe_text(data, "content_type", where)
    major = (content_type or "").partition("/")[0]
    kind = _MEDIA_KINDS.get(major, ("document", MessageType.DOCUMENT))[0]
    size = data.get("size")
    return Attachment(
        platform="discord",
        file_id=ident(data, "id", where),
        kind=kind,
        size=integer(size, f"{where}.size") if size is not None else None,
        name=maybe_text(data, "filename", where),
        mime_type=content_type,
    )


def _epoch(timestamp: object) -> float | None:
    """A message's ISO 8601 `timestamp` in epoch seconds."""
    if not isinstance(timestamp, str):
        return None
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return None
