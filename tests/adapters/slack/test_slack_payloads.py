"""Slack payload mapping on recorded Events API shapes (section 8), and mrkdwn rendering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessiongate.adapters.kit.gating import GatePolicy, decide_gate, passes
from sessiongate.adapters.slack.mrkdwn import SECTION_LIMIT, to_blocks, to_mrkdwn, to_plain
from sessiongate.adapters.slack.payloads import (
    SlackIdentity,
    chat_type_of,
    parse_envelope,
    parse_slash_command,
)
from sessiongate.core.source import ChatType

FIXTURES = Path(__file__).parent / "fixtures"
ME = SlackIdentity(user_id="U0BOT0001", bot_id="B0BOT0001", team_id="T061EG9R6")
COMMANDS = frozenset({"new", "status", "stop"})


def load(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def event(name: str):
    return parse_envelope(load(name), ME, commands=COMMANDS)


@pytest.mark.parametrize(
    ("fixture", "chat_type", "chat_id"),
    [
        ("message_im", ChatType.DM, "D024BE91L"),
        ("message_channel_mention", ChatType.CHANNEL, "C2147483705"),
        ("message_private_channel", ChatType.GROUP, "G0PRIVATE1"),
        ("message_mpim", ChatType.GROUP, "G0MPIM0001"),
        ("app_mention", ChatType.CHANNEL, "C2147483705"),
    ],
)
def test_channel_types_map_per_section_8(fixture, chat_type, chat_id):
    mapped = event(fixture)
    assert mapped.source is not None
    assert (mapped.source.chat_type, mapped.source.chat_id) == (chat_type, chat_id)
    assert mapped.source.guild_id == "T061EG9R6"  # the team is the guild
    assert mapped.source.user_id == "U061F7AUR"  # never case-folded
    assert mapped.message_id == mapped.source.message_id


def test_a_missing_channel_type_is_inferred_from_the_id_prefix():
    assert chat_type_of("D1", None) is ChatType.DM
    assert chat_type_of("C1", None) is ChatType.CHANNEL
    assert chat_type_of("G1", None) is ChatType.GROUP


def test_message_and_app_mention_for_one_post_share_one_claim():
    """Checklist 11: the same post as two event types is one event id."""
    message, mention = event("message_channel_mention"), event("app_mention")
    assert load("message_channel_mention")["event_id"] != load("app_mention")["event_id"]
    assert message.event_id == mention.event_id == "C2147483705:1767225600.000200"
    assert message.text == mention.text == "what is up?"
    assert message.facts is not None
    assert message.facts.mentions_bot
    assert mention.facts is not None
    assert mention.facts.mentions_bot


def test_a_thread_reply_carries_thread_ts_and_its_parent_channel():
    mapped = event("message_thread_reply")
    assert mapped.source is not None
    assert mapped.parent is not None
    assert mapped.source.thread_id == "1767225600.000200"
    assert mapped.parent.thread_id is None
    assert mapped.parent.chat_id == mapped.source.chat_id
    assert mapped.facts is not None
    assert mapped.facts.reply_to_bot  # under the bot's post


@pytest.mark.parametrize(
    ("fixture", "reason"),
    [
        ("message_changed", "edit"),
        ("message_deleted", "deletion"),
        ("bot_message", "other_bot"),
        ("own_message", "own_message"),
    ],
)
def test_edits_deletions_and_bots_start_no_turn(fixture, reason):
    mapped = event(fixture)
    assert mapped.facts is not None
    assert str(decide_gate(mapped.facts, GatePolicy())) == reason


def test_an_edit_has_its_own_event_id():
    assert event("message_changed").event_id != event("message_im").event_id


def test_housekeeping_subtypes_are_ignored():
    assert event("channel_join").source is None


def test_a_file_arrives_as_an_attachment_reference():
    mapped = event("file_share")
    (attachment,) = mapped.attachments
    assert attachment.reference().startswith("slack://file/F0S43PZDF?")
    assert attachment.size == 48213


def test_bang_commands_are_the_gateway_commands_where_slash_is_unavailable():
    mapped = event("bang_command_in_thread")
    assert mapped.text == "/new"
    assert mapped.facts is not None
    assert mapped.facts.command_to_bot
    assert passes(decide_gate(mapped.facts, GatePolicy()))
    unknown = parse_envelope(load("bang_command_in_thread"), ME, commands=frozenset())
    assert unknown.text == "!new"


def test_a_slash_command_maps_to_the_gateway_command():
    mapped = parse_slash_command(load("slash_command"), ME, commands=COMMANDS)
    assert mapped.text == "/status"
    assert mapped.event_id.startswith("slash:")
    assert mapped.source is not None
    assert mapped.source.chat_id == "C2147483705"


def test_markdown_becomes_mrkdwn_and_nothing_pings():
    rendered = to_mrkdwn("**bold** _it_ ~~gone~~ [docs](https://x.test/a) <!channel> a&b")
    assert rendered == "*bold* _it_ ~gone~ <https://x.test/a|docs> &lt;!channel&gt; a&amp;b"
    assert to_mrkdwn("# Title\n> quoted") == "*Title*\n> quoted"
    assert to_mrkdwn("```python\nx < 1\n```") == "```\nx &lt; 1\n```"
    assert to_plain("**bold** <@U1>") == "bold &lt;@U1&gt;"


def test_a_chunk_becomes_sections_within_slacks_limit():
    blocks = to_blocks("word " * 1500)
    assert len(blocks) == 3
    assert all(len(b["text"]["text"]) <= SECTION_LIMIT for b in blocks)
