"""Matrix client-server events (the JSON of `/sync`) to the kit's `PlatformEvent`: pure, no
SDK, no I/O.

The mapping of research/adapters.md section 8:

| Matrix                                         | SessionSource / facts                        |
|------------------------------------------------|----------------------------------------------|
| room marked direct (`m.direct`, the invite's   | chat_type dm                                 |
| `is_direct`) or with two joined members        |                                              |
| a room where members cannot post (power levels)| channel                                      |
| any other room                                 | group                                        |
| room id `!x:server` (case-sensitive, kept raw) | chat_id (`:` is escaped in session keys)     |
| `m.relates_to` rel_type `m.thread`             | thread_id = the thread root's event id       |
| `m.in_reply_to` (not the thread's fallback)    | reply_to                                     |
| sender `@user:server`                          | user_id; `m.notice` and `@_` ghosts -> bot   |
| `m.replace` relation                           | an edit (no turn unless `answer_edits`)      |
| `m.image` / `m.file` / `m.audio` / `m.video`   | attachment `matrix://file/<mxc url>`         |

`RoomDirectory` is what the adapter knows about its rooms, folded from each sync (state events,
the room summary, the invite's `is_direct`, account data `m.direct`); `parse_event` reads it.
A malformed event raises the one error type `MalformedEventError`, naming the field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sessiongate.adapters.kit.events import PlatformEvent
from sessiongate.adapters.kit.gating import MessageFacts
from sessiongate.adapters.kit.media import Attachment
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.gateway.messages import MessageType

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

__all__ = [
    "ENCRYPTED",
    "MalformedEventError",
    "MatrixIdentity",
    "RoomDirectory",
    "RoomInfo",
    "parse_event",
]

ENCRYPTED = "m.room.encrypted"
_MEDIA = {
    "m.image": MessageType.PHOTO,
    "m.file": MessageType.DOCUMENT,
    "m.audio": MessageType.AUDIO,
    "m.video": MessageType.VIDEO,
}
_TEXT_TYPES = frozenset({"m.text", "m.notice", "m.emote"})
# `!new` for the gateway's `/new`: some Matrix clients take a leading `/` as their own command.
_COMMAND = re.compile(r"^[/!]([a-z][a-z0-9_]*)\b(.*)$", re.DOTALL)
_USER_ID = re.compile(r"^@[^:\s]+:\S+$")


class MalformedEventError(ValueError):
    """An event whose `field` is missing or of the wrong kind: logged with the field and
    skipped, nothing started."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class MatrixIdentity:
    user_id: str
    display_name: str | None = None

    @property
    def localpart(self) -> str:
        return self.user_id[1:].split(":", 1)[0]


@dataclass(slots=True)
class RoomInfo:
    room_id: str
    name: str | None = None
    members: set[str] = field(default_factory=set)
    # The homeserver's count (the room summary): members beyond the state the sync carried.
    joined_count: int | None = None
    is_direct: bool = False
    encrypted: bool = False
    read_only: bool = False
    inviter: str | None = None

    def chat_type(self) -> ChatType:
        count = self.joined_count if self.joined_count is not None else len(self.members)
        if self.is_direct or count == 2:
            return ChatType.DM
        if self.read_only:
            return ChatType.CHANNEL
        return ChatType.GROUP


@dataclass(slots=True)
class RoomDirectory:
    rooms: dict[str, RoomInfo] = field(default_factory=dict)

    def room(self, room_id: str) -> RoomInfo:
        found = self.rooms.get(room_id)
        if found is None:
            found = self.rooms[room_id] = RoomInfo(room_id)
        return found

    def apply_sync(self, sync: Mapping[str, Any]) -> None:
        """Fold one `/sync` answer's state into what is known (before its events are parsed:
        a room's first message arrives with the state that makes it a DM)."""
        for event in _list(_map(sync.get("account_data")).get("events")):
            if isinstance(event, dict) and event.get("type") == "m.direct":
                for rooms in _map(event.get("content")).values():
                    for room_id in _list(rooms):
                        if isinstance(room_id, str):
                            self.room(room_id).is_direct = True
        rooms = _map(sync.get("rooms"))
        for room_id, joined in _map(rooms.get("join")).items():
            room = self.room(str(room_id))
            joined = _map(joined)
            count = _map(joined.get("summary")).get("m.joined_member_count")
            if isinstance(count, int):
                room.joined_count = count
            for section in ("state", "timeline"):
                for event in _list(_map(joined.get(section)).get("events")):
                    if isinstance(event, dict) and "state_key" in event:
                        _apply_state(room, event)
        for room_id, invited in _map(rooms.get("invite")).items():
            room = self.room(str(room_id))
            for event in _list(_map(_map(invited).get("invite_state")).get("events")):
                if isinstance(event, dict):
                    _apply_state(room, event)
        for room_id in _map(rooms.get("leave")):
            self.rooms.pop(str(room_id), None)


def _apply_state(room: RoomInfo, event: Mapping[str, Any]) -> None:
    kind, content = event.get("type"), _map(event.get("content"))
    if kind == "m.room.member":
        user = event.get("state_key")
        if not isinstance(user, str):
            return
        membership = content.get("membership")
        if membership == "join":
            room.members.add(user)
        elif membership in ("leave", "ban"):
            room.members.discard(user)
        elif membership == "invite" and content.get("is_direct") is True:
            room.is_direct = True
        if membership == "invite" and isinstance(event.get("sender"), str):
            room.inviter = str(event["sender"])
    elif kind == "m.room.name" and isinstance(content.get("name"), str):
        room.name = content["name"] or None
    elif kind == "m.room.encryption":
        room.encrypted = True
    elif kind == "m.room.power_levels":
        events_default = content.get("events_default", 0)
        users_default = content.get("users_default", 0)
        if isinstance(events_default, int) and isinstance(users_default, int):
            room.read_only = events_default > users_default


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _field(container: Mapping[str, Any], name: str, kind: type, where: str = "") -> Any:
    value = container.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        label = f"{where}{name}"
        if value is None:
            raise MalformedEventError(label, "missing")
        raise MalformedEventError(label, f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def parse_event(
    room: RoomInfo,
    event: Mapping[str, Any],
    me: MatrixIdentity,
    *,
    commands: Collection[str] = (),
    bot_events: Collection[str] = (),
) -> PlatformEvent:
    """One timeline event of `room`; `bot_events` are event ids the bot sent (a reply to one
    of them is addressed to the bot). Raises `MalformedEventError`."""
    if not isinstance(event, dict):
        raise MalformedEventError("event", "expected an object")
    event_id = _field(event, "event_id", str)
    if not event_id:
        raise MalformedEventError("event_id", "empty")
    kind = _field(event, "type", str)
    if kind != "m.room.message" or "state_key" in event:
        return PlatformEvent(event_id=event_id, source=None, kind=kind)
    sender = _field(event, "sender", str)
    if not _USER_ID.match(sender):
        raise MalformedEventError("sender", "not a Matrix user id")
    sent_ms = _field(event, "origin_server_ts", int)
    content = _field(event, "content", dict)
    relates = content.get("m.relates_to", {})
    if not isinstance(relates, dict):
        raise MalformedEventError("content.m.relates_to", "expected an object")
    is_edit = relates.get("rel_type") == "m.replace"
    if is_edit:
        original = _field(relates, "event_id", str, "content.m.relates_to.")
        body_from = _field(content, "m.new_content", dict, "content.")
        where = "content.m.new_content."
    else:
        original, body_from, where = event_id, content, "content."
    msgtype = _field(body_from, "msgtype", str, where)
    body = _field(body_from, "body", str, where)
    thread_id, reply_to = _thread_and_reply(relates)
    body = _strip_reply_fallback(body) if reply_to else body
    chat_type = room.chat_type()
    attachments, message_type = _attachments(body_from, msgtype, where)
    text = body
    if attachments:
        # Since Matrix 1.10 a `filename` beside `body` makes `body` the caption.
        name = body_from.get("filename")
        text = body if isinstance(name, str) and name and name != body else ""
    elif msgtype not in _TEXT_TYPES:
        return PlatformEvent(event_id=event_id, source=None, kind=msgtype)
    mentioned_ids = _list(_map(content.get("m.mentions")).get("user_ids"))
    formatted = content.get("formatted_body")
    mentions = (
        me.user_id in mentioned_ids
        or me.user_id in body
        or (isinstance(formatted, str) and f"matrix.to/#/{me.user_id}" in formatted)
    )
    text, led = _strip_leading_mention(text, me)
    mentions = mentions or led
    to_bot = to_other = False
    matched = _COMMAND.match(text.strip())
    if matched and matched.group(1) in commands:
        others = [u for u in mentioned_ids if u != me.user_id]
        if others and not mentions:
            to_other = True
        else:
            to_bot = True
            text = f"/{matched.group(1)}{matched.group(2)}"
    is_bot = msgtype == "m.notice" or sender[1:].startswith("_")
    source = SessionSource(
        platform=Platform.MATRIX,
        chat_id=room.room_id,
        chat_name=room.name,
        chat_type=chat_type,
        user_id=sender,
        user_name=sender[1:].split(":", 1)[0] or None,
        thread_id=thread_id,
        is_bot=is_bot,
    )
    facts = MessageFacts(
        chat_type=chat_type,
        text=text,
        has_media=bool(attachments),
        is_own=sender == me.user_id,
        is_bot=is_bot,
        is_edit=is_edit,
        mentions_bot=mentions,
        reply_to_bot=reply_to is not None and reply_to in bot_events,
        command_to_bot=to_bot,
        command_to_other=to_other,
    )
    parent = None
    if thread_id is not None:
        parent = SessionSource(
            platform=Platform.MATRIX,
            chat_id=room.room_id,
            chat_name=room.name,
            chat_type=chat_type,
            user_id=sender,
            user_name=source.user_name,
        )
    if msgtype == "m.emote":
        text = f"* {source.user_name} {text}"
    return PlatformEvent(
        event_id=event_id,
        source=source,
        facts=facts,
        text=text,
        attachments=attachments,
        message_type=message_type,
        message_id=original,
        reply_to=reply_to,
        parent=parent,
        kind="edit" if is_edit else "message",
        sent_at=sent_ms / 1000.0,
    )


def _thread_and_reply(relates: Mapping[str, Any]) -> tuple[str | None, str | None]:
    in_reply = relates.get("m.in_reply_to")
    reply_to = None
    if in_reply is not None:
        reply_to = _field(_field(relates, "m.in_reply_to", dict, "content.m.relates_to."),
                          "event_id", str, "content.m.relates_to.m.in_reply_to.")  # fmt: skip
    if relates.get("rel_type") != "m.thread":
        return None, reply_to
    root = _field(relates, "event_id", str, "content.m.relates_to.")
    # In a thread, a client that is not replying to anything points `m.in_reply_to` at the
    # latest thread event for older clients (`is_falling_back`): not a reply.
    if relates.get("is_falling_back") is True:
        reply_to = None
    return root, reply_to


def _strip_reply_fallback(body: str) -> str:
    """Older clients quote the replied-to message as `> ` lines and a blank line first."""
    lines = body.split("\n")
    if not lines or not lines[0].startswith("> "):
        return body
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    if index < len(lines) and lines[index] == "":
        index += 1
    return "\n".join(lines[index:])


def _strip_leading_mention(text: str, me: MatrixIdentity) -> tuple[str, bool]:
    """("do this", True) for "Bot: do this" or "@bot:server do this" (how clients address a
    user): the agent gets the request, not its name."""
    names = [me.user_id, me.localpart]
    if me.display_name:
        names.append(me.display_name)
    stripped = text.lstrip()
    lowered = stripped.lower()
    for name in names:
        if lowered.startswith(name.lower()):
            rest = stripped[len(name) :]
            if not rest or rest[0] in ": ,\n":
                return rest.lstrip(":, \n"), True
    return text, False


def _attachments(
    content: Mapping[str, Any], msgtype: str, where: str
) -> tuple[tuple[Attachment, ...], MessageType]:
    message_type = _MEDIA.get(msgtype)
    if message_type is None:
        return (), MessageType.TEXT
    url = _field(content, "url", str, where)
    if not url.startswith("mxc://"):
        raise MalformedEventError(f"{where}url", "not an mxc:// URL")
    info = _map(content.get("info"))
    size = info.get("size")
    mime = info.get("mimetype")
    name = content.get("filename") or content.get("body")
    if msgtype == "m.audio" and "org.matrix.msc3245.voice" in content:
        message_type = MessageType.VOICE
    return (
        Attachment(
            platform="matrix",
            file_id=url,
            kind=msgtype.removeprefix("m."),
            size=size if isinstance(size, int) and not isinstance(size, bool) else None,
            name=name if isinstance(name, str) and name else None,
            mime_type=mime if isinstance(mime, str) else None,
        ),
    ), message_type
