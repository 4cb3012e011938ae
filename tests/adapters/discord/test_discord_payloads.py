"""Discord payload mapping on recorded gateway dispatch shapes (section 8)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessiongate.adapters.discord.adapter import to_discord_markdown
from sessiongate.adapters.discord.client import SAFE_MENTIONS, command_diff
from sessiongate.adapters.discord.payloads import (
    ChannelInfo,
    DiscordIdentity,
    channel_info,
    parse_interaction,
    parse_message,
)
from sessiongate.adapters.kit import PlatformCommand
from sessiongate.adapters.kit.gating import GatePolicy, decide_gate
from sessiongate.core.source import ChatType

FIXTURES = Path(__file__).parent / "fixtures"
ME = DiscordIdentity(user_id="1000000000000000001", application_id="1000000000000000002")
ROLE = "41771983423143936"


def load(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


CHANNELS = {
    info.id: info
    for info in (
        channel_info(load(n)) for n in ("channel_text", "channel_thread", "channel_announcement")
    )
}


def mapped(name: str, **options: Any):
    dispatch = load(name)
    data = dispatch["d"]
    channel = CHANNELS.get(str(data.get("channel_id"))) if data.get("guild_id") else None
    if dispatch["t"] == "INTERACTION_CREATE":
        return parse_interaction(data, ME, channel, **options)
    return parse_message(dispatch["t"], data, ME, channel, **options)


def test_a_dm_maps_to_dm_without_a_guild():
    event = mapped("dm_create")
    assert event.source is not None
    assert event.source.chat_type is ChatType.DM
    assert event.source.chat_id == "1100000000000000001"
    assert event.source.guild_id is None
    assert event.event_id == event.message_id == "1250000000000000001"


def test_a_guild_channel_maps_to_group_with_its_guild_and_the_mention_cut():
    event = mapped("guild_mention")
    assert event.source is not None
    assert event.source.chat_type is ChatType.GROUP
    assert event.source.guild_id == "197038439483310086"
    assert event.source.thread_id is None
    assert event.text == "what is up?"
    assert event.facts is not None
    assert event.facts.mentions_bot


def test_a_thread_is_its_own_chat_with_its_parent_channel():
    event = mapped("thread_message")
    assert event.source is not None
    assert event.source.chat_type is ChatType.THREAD
    assert event.source.chat_id == event.source.thread_id == "1190384394833100870"
    assert event.source.parent_chat_id == "197038439483310087"
    assert event.parent is not None
    assert (event.parent.chat_id, event.parent.chat_type) == ("197038439483310087", ChatType.GROUP)


def test_an_announcement_channel_maps_to_channel_and_a_nick_mention_counts():
    event = mapped("announcement_mention")
    assert event.source is not None
    assert event.source.chat_type is ChatType.CHANNEL
    assert event.text == "news"
    assert event.facts is not None
    assert event.facts.mentions_bot


def test_a_reply_to_the_bot_is_addressed_to_it():
    event = mapped("reply_to_bot")
    assert event.facts is not None
    assert event.facts.reply_to_bot
    assert event.reply_to == "1240000000000000009"


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        ("bot_author", "other_bot"),
        ("webhook_message", "other_bot"),
        ("own_message", "own_message"),
        ("edit", "edit"),
        ("delete", "deletion"),
        ("guild_chatter", "not_addressed"),
    ],
)
def test_bots_edits_deletions_and_chatter_start_no_turn(fixture, reason):
    event = mapped(fixture)
    assert event.facts is not None
    assert str(decide_gate(event.facts, GatePolicy())) == reason


def test_system_messages_and_embed_updates_are_ignored():
    assert mapped("thread_created_notice").source is None
    assert mapped("embed_update").source is None


def test_updates_and_deletions_have_event_ids_of_their_own():
    ids = {mapped(n).event_id for n in ("dm_create", "edit", "embed_update", "delete")}
    assert len(ids) == 4


def test_a_member_with_an_allowed_role_is_role_authorized_only_in_guilds():
    event = mapped("guild_mention", allow_roles={ROLE})
    assert event.source is not None
    assert event.source.role_authorized
    without = mapped("guild_mention")
    assert without.source is not None
    assert not without.source.role_authorized


def test_an_attachment_arrives_as_a_reference():
    (attachment,) = mapped("attachment").attachments
    assert attachment.kind == "photo"
    assert attachment.reference().startswith("discord://file/1260000000000000001?")


def test_an_application_command_is_the_gateway_command():
    event = mapped("interaction_command")
    assert event.text == "/status"
    assert event.event_id == "interaction:1270000000000000001"
    assert event.facts is not None
    assert event.facts.command_to_bot
    assert event.source is not None
    assert event.source.user_id == "80351110224678912"


def test_a_bang_command_is_the_gateway_command():
    data = {**load("dm_create")["d"], "content": "!new"}
    event = parse_message("MESSAGE_CREATE", data, ME, None, commands={"new"})
    assert event.text == "/new"


def test_channel_info_reads_rest_channel_objects():
    assert CHANNELS["1190384394833100870"] == ChannelInfo(
        id="1190384394833100870",
        type=11,
        guild_id="197038439483310086",
        parent_id="197038439483310087",
        name="a thread",
    )


def test_command_sync_by_diff_keeps_unchanged_ids():
    existing = [
        {"id": "1", "name": "status", "description": "Show status"},
        {"id": "2", "name": "new", "description": "old words"},
        {"id": "3", "name": "gone", "description": "removed"},
    ]
    wanted = [
        PlatformCommand("status", "Show status"),
        PlatformCommand("new", "Start over"),
        PlatformCommand("stop", "Stop"),
    ]
    creates, edits, deletes = command_diff(existing, wanted)
    assert creates == [{"name": "stop", "description": "Stop"}]
    assert edits == [("2", {"name": "new", "description": "Start over"})]
    assert deletes == ["3"]


def test_replies_never_ping_everyone_or_roles():
    assert SAFE_MENTIONS.to_dict() == {"parse": ["users"], "replied_user": True}


def test_tables_become_code_blocks_and_markdown_stays():
    assert (
        to_discord_markdown("**b**\n| a | b |\n| 1 | 2 |")
        == "**b**\n```\n| a | b |\n| 1 | 2 |\n```"
    )
