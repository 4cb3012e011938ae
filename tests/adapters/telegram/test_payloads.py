"""The Telegram mapping (research/adapters.md section 8) on recorded update shapes, both as
raw JSON and after a round trip through python-telegram-bot's own `Update` objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from telegram import Bot, Update

from sessiongate.adapters.kit import GatePolicy, decide_gate, passes
from sessiongate.adapters.telegram.payloads import GENERAL_TOPIC, BotIdentity, parse_update
from sessiongate.core.source import ChatType
from sessiongate.gateway.messages import MessageType

FIXTURES = Path(__file__).parent / "fixtures"
ME = BotIdentity(id="1000", username="sg_bot")


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def test_a_private_chat_is_a_dm_keyed_by_the_user():
    event = parse_update(load("private_text"), ME)
    source = event.source
    assert source is not None
    assert (source.chat_type, source.chat_id, source.user_id) == (
        ChatType.DM,
        "111222333",
        "111222333",
    )
    assert source.user_name == "alice"
    assert source.thread_id is None
    assert event.event_id == "804123001"
    assert event.message_id == "17"
    assert event.text == "hello there"


def test_a_supergroup_mention_is_a_group_with_the_mention_cut_from_the_text():
    event = parse_update(load("group_mention"), ME)
    assert event.source is not None
    assert event.source.chat_type is ChatType.GROUP
    assert event.source.chat_id == "-1001234567890"
    assert event.source.chat_name == "Team chat"
    assert event.facts is not None
    assert event.facts.mentions_bot
    assert event.text == "what is 2+2? 🤔"


def test_group_chatter_is_not_addressed():
    event = parse_update(load("group_chatter"), ME)
    assert event.facts is not None
    assert not passes(decide_gate(event.facts, GatePolicy()))


def test_a_command_to_this_bot_loses_its_address_and_one_to_another_bot_is_refused():
    mine = parse_update(load("group_command_to_bot"), ME)
    other = parse_update(load("group_command_to_other"), ME)
    assert mine.facts is not None
    assert other.facts is not None
    assert mine.facts.command_to_bot
    assert mine.text == "/status"
    assert other.facts.command_to_other
    assert not passes(decide_gate(other.facts, GatePolicy()))


def test_a_reply_to_the_bot_counts_as_addressed():
    event = parse_update(load("group_reply_to_bot"), ME)
    assert event.facts is not None
    assert event.facts.reply_to_bot
    assert event.reply_to == "299"


def test_a_forum_topic_is_a_group_with_its_thread_and_a_parent_to_fork_from():
    event = parse_update(load("forum_topic"), ME)
    source = event.source
    assert source is not None
    assert (source.chat_type, source.thread_id) == (ChatType.GROUP, "77")
    # The topic's creation notice is what every topic message "replies" to: not a reply.
    assert event.facts is not None
    assert not event.facts.reply_to_bot
    assert event.reply_to is None
    assert event.parent is not None
    assert event.parent.thread_id is None
    assert event.parent.chat_id == source.chat_id


def test_the_general_topic_keeps_thread_one_and_forks_from_nothing():
    event = parse_update(load("forum_general"), ME)
    assert event.source is not None
    assert event.source.thread_id == GENERAL_TOPIC
    assert event.parent is None


def test_a_channel_post_is_a_channel_without_a_user():
    event = parse_update(load("channel_post"), ME)
    assert event.source is not None
    assert event.source.chat_type is ChatType.CHANNEL
    assert event.source.user_id is None
    assert event.kind == "channel_post"


def test_an_edit_is_marked_and_does_not_pass_by_default():
    event = parse_update(load("edited_message"), ME)
    assert event.facts is not None
    assert event.facts.is_edit
    assert not passes(decide_gate(event.facts, GatePolicy()))
    assert passes(decide_gate(event.facts, GatePolicy(answer_edits=True)))


def test_a_photo_is_one_reference_to_its_largest_size_with_the_caption_as_text():
    event = parse_update(load("photo_caption"), ME)
    (attachment,) = event.attachments
    assert attachment.file_id == "AgACAgQAAxkBAAIBlarge"
    assert attachment.size == 84113
    assert event.message_type is MessageType.PHOTO
    assert event.text == "what is in this picture?"
    assert attachment.reference().startswith("telegram://file/AgACAgQAAxkBAAIBlarge?")


def test_a_large_document_is_over_the_public_api_cap():
    (attachment,) = parse_update(load("document_large"), ME).attachments
    assert attachment.name == "dump.tar.gz"
    assert attachment.is_too_large(20 * 1_048_576)


def test_another_bot_is_dropped_even_when_it_mentions_us():
    event = parse_update(load("bot_message"), ME)
    assert event.source is not None
    assert event.source.is_bot
    assert event.facts is not None
    assert not passes(decide_gate(event.facts, GatePolicy()))


def test_an_update_that_is_not_a_message_maps_to_no_source():
    event = parse_update(load("my_chat_member"), ME)
    assert event.source is None
    assert event.kind == "my_chat_member"


def test_a_mention_after_an_astral_emoji_is_found_in_utf16_units():
    update = load("group_mention")
    message = update["message"]
    message["text"] = "😀 @sg_bot hi"
    message["entities"] = [{"offset": 3, "length": 7, "type": "mention"}]
    event = parse_update(update, ME)
    assert event.facts is not None
    assert event.facts.mentions_bot


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_the_sdk_round_trip_maps_the_same(name):
    """What the adapter gets from python-telegram-bot (`Update.to_dict()`) maps exactly as the
    raw JSON does."""
    raw = load(name)
    bot = Bot("1000:TESTTOKEN")
    through_sdk = Update.de_json(raw, bot).to_dict()
    assert parse_update(through_sdk, ME) == parse_update(raw, ME)
