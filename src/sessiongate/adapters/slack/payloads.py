"""Slack Events API payloads (JSON) to the kit's `PlatformEvent`: pure, no SDK, no I/O.

The mapping of research/adapters.md section 8:

| Slack                                   | SessionSource                                   |
|-----------------------------------------|-------------------------------------------------|
| channel_type im (a `D…` id)             | chat_type dm                                    |
| channel_type channel (public, `C…`)     | channel                                         |
| channel_type group / mpim (`G…`)        | group                                           |
| thread_ts (a reply in a thread)         | thread_id = thread_ts; parent = the channel     |
| event.user / bot_id                     | user_id / is_bot                                |
| team id                                 | guild_id                                        |
| ts                                      | message_id                                      |

`app_mention` events carry no `channel_type`, so it is inferred from the id's first letter (D,
C, G), as Slack's own clients do. Ids are kept as Slack spells them (upper case, never folded).

The claim key is `(channel, ts)`: Slack delivers one post both as `message` and as
`app_mention`, with different `event_id`s but the same `ts`, so the second is a duplicate and
one post is one turn (checklist 11); a retry of either is a duplicate too. An edit
(`message_changed`) and a deletion carry a `ts` of their own, so they are separate events,
which the gate drops unless `answer_edits`.

`!cmd` is the gateway's `/cmd` where Slack offers no `/` (Slack refuses slash commands inside
threads): a known command written `!new` is read as `/new`, addressed to the bot.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from collections.abc import Collection

__all__ = [
    "PayloadError",
    "SlackIdentity",
    "approval_blocks",
    "chat_type_of",
    "parse_block_actions",
    "parse_envelope",
    "parse_slash_command",
]

_CHANNEL_TYPES = {
    "im": ChatType.DM,
    "mpim": ChatType.GROUP,
    "group": ChatType.GROUP,
    "channel": ChatType.CHANNEL,
}
_PREFIXES = {"D": ChatType.DM, "C": ChatType.CHANNEL, "G": ChatType.GROUP}
# Subtypes that are a person's (or an app's) post; the others (joins, topic changes, ...) are
# channel housekeeping and start nothing.
_POST_SUBTYPES = frozenset({None, "file_share", "thread_broadcast", "bot_message", "me_message"})
_MEDIA_TYPES = {
    "photo": MessageType.PHOTO,
    "video": MessageType.VIDEO,
    "audio": MessageType.AUDIO,
    "document": MessageType.DOCUMENT,
}
_BANG_COMMAND = re.compile(r"^!([a-z][a-z0-9_-]*)(\s|$)")
# Block Kit's bounds: a section's text, and the blocks of one message.
_SECTION_CHARS = 3000
_MAX_BLOCKS = 50
_BUTTON_STYLES = {"approve": "primary", "deny": "danger"}


@dataclass(frozen=True, slots=True)
class SlackIdentity:
    """Who the bot is (auth.test): its user id, bot id and workspace."""

    user_id: str
    bot_id: str
    team_id: str


def chat_type_of(channel: str, channel_type: str | None) -> ChatType:
    if channel_type in _CHANNEL_TYPES:
        return _CHANNEL_TYPES[channel_type]
    return _PREFIXES.get(channel[:1], ChatType.CHANNEL)


def parse_envelope(
    body: object, me: SlackIdentity, *, commands: Collection[str] = ()
) -> PlatformEvent:
    """One `event_callback` body (Events API POST or Socket Mode `events_api` payload);
    `PayloadError` (naming the field) for any other shape."""
    if not isinstance(body, Mapping):
        raise PayloadError("body", "expected an object")
    event = maybe_child(body, "event", "body")
    kind = maybe_text(event, "type", "event") or maybe_text(body, "type", "body") or "unknown"
    channel = maybe_ident(event, "channel", "event") or ""
    if kind not in ("message", "app_mention") or not channel:
        event_id = maybe_ident(body, "event_id", "body")
        return PlatformEvent(event_id=f"event:{event_id}", source=None, kind=kind)
    subtype = maybe_text(event, "subtype", "event")
    is_edit = subtype == "message_changed"
    is_deletion = subtype == "message_deleted"
    if not (is_edit or is_deletion) and subtype not in _POST_SUBTYPES:
        housekeeping = maybe_ident(event, "ts", "event")
        return PlatformEvent(event_id=f"{channel}:{housekeeping}", source=None, kind=str(subtype))
    ts = ident(event, "ts", "event")
    # An edit's event wraps the message as it now reads.
    where = "event"
    message: Mapping[str, Any] = event
    if is_edit and event.get("message"):
        message, where = child(event, "message", "event"), "event.message"
    team = maybe_ident(body, "team_id", "body") or maybe_ident(event, "team", "event") or me.team_id
    chat_type = chat_type_of(channel, maybe_text(event, "channel_type", "event"))
    message_ts = maybe_ident(message, "ts", where)
    thread_ts = maybe_ident(message, "thread_ts", where)
    # The root of a thread carries thread_ts == ts: it is a channel message, not a reply.
    thread_id = thread_ts if thread_ts and thread_ts != message_ts else None
    user = maybe_ident(message, "user", where)
    bot_id = maybe_ident(message, "bot_id", where)
    text, mentions = _addressing(maybe_text(message, "text", where) or "", me)
    text, to_bot = _bang_command(text, commands)
    attachments = _attachments(items(message, "files", where), f"{where}.files")
    profile = maybe_child(message, "user_profile", where)
    user_name = maybe_text(profile, "display_name", f"{where}.user_profile") or None
    parent_user = maybe_ident(message, "parent_user_id", where)
    source = SessionSource(
        platform=Platform.SLACK,
        chat_id=channel,
        chat_type=chat_type,
        user_id=user or None,
        user_name=user_name,
        thread_id=thread_id,
        is_bot=bool(bot_id),
        guild_id=team,
        message_id=message_ts or ts,
    )
    facts = MessageFacts(
        chat_type=chat_type,
        text=text,
        has_media=bool(attachments),
        is_own=(user is not None and user == me.user_id) or bot_id == me.bot_id,
        is_bot=bool(bot_id) or subtype == "bot_message",
        is_edit=is_edit,
        is_deletion=is_deletion,
        mentions_bot=mentions or kind == "app_mention",
        # Slack's replies are thread replies: one under the bot's post answers the bot.
        reply_to_bot=thread_id is not None and parent_user == me.user_id,
        command_to_bot=to_bot,
    )
    parent = None
    if thread_id is not None:
        # The lane the thread's root message is in: its author's (Slack names them), so a
        # thread someone else opens still finds the root; under the bot's own post, the poster's.
        root_author = message.get("parent_user_id")
        by_root = bool(root_author) and str(root_author) != me.user_id
        parent = SessionSource(
            platform=Platform.SLACK,
            chat_id=channel,
            chat_type=chat_type,
            user_id=str(root_author) if by_root else source.user_id,
            user_name=None if by_root else source.user_name,
            guild_id=team,
        )
    return PlatformEvent(
        event_id=f"{channel}:{ts}",
        source=source,
        facts=facts,
        text=text,
        attachments=attachments,
        message_type=_MEDIA_TYPES.get(attachments[0].kind, MessageType.DOCUMENT)
        if attachments
        else MessageType.TEXT,
        message_id=message_ts or ts,
        parent=parent,
        kind=kind if subtype is None else str(subtype),
        sent_at=_epoch(message_ts or ts),
    )


def parse_slash_command(
    form: Mapping[str, str], me: SlackIdentity, *, commands: Collection[str] = ()
) -> PlatformEvent:
    """A slash command (`/sg-new text` or `/new text`) as the gateway's `/new text`."""
    name = form.get("command", "").lstrip("/")
    name = name.removeprefix("sg-")
    text = f"/{name} {form.get('text', '')}".strip()
    channel = form.get("channel_id", "")
    chat_type = chat_type_of(channel, None)
    if form.get("channel_name") == "directmessage":
        chat_type = ChatType.DM
    team = form.get("team_id") or me.team_id
    source = SessionSource(
        platform=Platform.SLACK,
        chat_id=channel,
        chat_type=chat_type,
        user_id=form.get("user_id") or None,
        user_name=form.get("user_name") or None,
        guild_id=team,
    )
    known = name in commands if commands else True
    facts = MessageFacts(chat_type=chat_type, text=text, command_to_bot=known)
    return PlatformEvent(
        event_id=f"slash:{form.get('trigger_id', '')}",
        source=source if known else None,
        facts=facts,
        text=text,
        kind="slash_command",
    )


def approval_blocks(
    text: str, approval_id: str, *, outcome: str | None = None
) -> list[dict[str, Any]]:
    """An approval prompt in Block Kit: the prompt as plain text (the call shown verbatim, in
    as many sections as it takes), then Approve and Deny, or once settled the `outcome` in
    their place. Each button's `action_id` is `<verb>:<approval id>`
    (`kit/approval_buttons.py`). `ValueError` when the prompt is too long for one message (it
    is then sent as text, with the commands to type)."""
    sections = [
        {"type": "section", "text": {"type": "plain_text", "text": text[at : at + _SECTION_CHARS]}}
        for at in range(0, len(text), _SECTION_CHARS)
    ]
    if len(sections) >= _MAX_BLOCKS:
        raise ValueError("the prompt is too long for one Slack message with buttons")
    if outcome is not None:
        return [*sections, {"type": "context",
                            "elements": [{"type": "plain_text", "text": outcome}]}]  # fmt: skip
    buttons = [
        {
            "type": "button",
            "text": {"type": "plain_text", "text": label},
            "action_id": button_value(verb, approval_id),
            "value": button_value(verb, approval_id),
            "style": _BUTTON_STYLES[verb],
        }
        for label, verb in APPROVAL_BUTTONS
    ]
    return [*sections, {"type": "actions", "block_id": f"approval:{approval_id}",
                        "elements": buttons}]  # fmt: skip


def parse_block_actions(body: object, me: SlackIdentity) -> PlatformEvent:
    """A button press (an interactivity `block_actions` payload, by Socket Mode or the
    interactivity Request URL): a press of an approval button is the command it stands for
    (`/approve <id>`) sent by the person who pressed it, in the prompt's channel and thread;
    any other action starts nothing. `PayloadError` (naming the field) for another shape."""
    where = "payload"
    if not isinstance(body, Mapping):
        raise PayloadError(where, "expected an object")
    actions = items(body, "actions", where)
    user = maybe_child(body, "user", where)
    channel = maybe_child(body, "channel", where)
    container = maybe_child(body, "container", where)
    message = maybe_child(body, "message", where)
    pressed = maybe_ident(body, "trigger_id", where)
    command = None
    for index, action in enumerate(actions):
        at = f"{where}.actions[{index}]"
        if not isinstance(action, Mapping):
            raise PayloadError(at, "expected an object")
        pressed = maybe_ident(action, "action_ts", at) or pressed
        command = command or pressed_command(maybe_text(action, "action_id", at))
    event_id = f"action:{pressed or ''}"
    channel_id = maybe_ident(channel, "id", f"{where}.channel") or maybe_ident(
        container, "channel_id", f"{where}.container"
    )
    user_id = maybe_ident(user, "id", f"{where}.user")
    if command is None or not channel_id or not user_id or not pressed:
        return PlatformEvent(event_id=event_id, source=None, kind="block_actions")
    message_ts = maybe_ident(message, "ts", f"{where}.message") or maybe_ident(
        container, "message_ts", f"{where}.container"
    )
    thread_ts = maybe_ident(message, "thread_ts", f"{where}.message") or maybe_ident(
        container, "thread_ts", f"{where}.container"
    )
    team = maybe_ident(maybe_child(body, "team", where), "id", f"{where}.team") or me.team_id
    chat_type = chat_type_of(channel_id, None)
    source = SessionSource(
        platform=Platform.SLACK,
        chat_id=channel_id,
        chat_type=chat_type,
        user_id=user_id,
        user_name=maybe_text(user, "username", f"{where}.user")
        or maybe_text(user, "name", f"{where}.user")
        or None,
        thread_id=thread_ts if thread_ts and thread_ts != message_ts else None,
        guild_id=team,
    )
    facts = MessageFacts(chat_type=chat_type, text=command, command_to_bot=True)
    return PlatformEvent(
        event_id=event_id, source=source, facts=facts, text=command, kind="block_actions"
    )


def _addressing(text: str, me: SlackIdentity) -> tuple[str, bool]:
    """(the text for the agent, whether it mentions the bot): a leading `<@bot>` is cut."""
    tag = f"<@{me.user_id}>"
    if tag not in text:
        return text, False
    if text.startswith(tag):
        text = text[len(tag) :].lstrip()
    return text, True


def _bang_command(text: str, commands: Collection[str]) -> tuple[str, bool]:
    match = _BANG_COMMAND.match(text)
    if match is None or match.group(1) not in commands:
        return text, False
    return "/" + text[1:], True


def _attachments(files: list[Any], where: str) -> tuple[Attachment, ...]:
    attachments = []
    for index, item in enumerate(files):
        at = f"{where}[{index}]"
        if not isinstance(item, Mapping):
            raise PayloadError(at, "expected an object")
        file_id = maybe_ident(item, "id", at)
        if not file_id:
            continue
        size = item.get("size")
        mime_type = maybe_text(item, "mimetype", at)
        attachments.append(
            Attachment(
                platform="slack",
                file_id=file_id,
                kind=_kind_of(mime_type or ""),
                size=integer(size, f"{at}.size") if size is not None else None,
                name=maybe_text(item, "name", at),
                mime_type=mime_type,
            )
        )
    return tuple(attachments)


def _kind_of(mime_type: str) -> str:
    major = mime_type.partition("/")[0]
    return {"image": "photo", "video": "video", "audio": "audio"}.get(major, "document")


def _epoch(ts: str) -> float | None:
    """A Slack `ts` ("1767225600.000100") is the post's time in epoch seconds."""
    try:
        value = float(ts)
    except ValueError:
        return None
    return value if math.isfinite(value) else None
