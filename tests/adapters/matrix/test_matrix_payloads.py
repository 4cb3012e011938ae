"""The pure Matrix mapping: `/sync` events to the kit's events, the room directory, and the
one error a malformed event raises."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from sessiongate.adapters.matrix.client import html_to_body, message_content
from sessiongate.adapters.matrix.payloads import (
    MalformedEventError,
    MatrixIdentity,
    RoomDirectory,
    RoomInfo,
    parse_event,
)
from sessiongate.core.keys import build_session_key
from sessiongate.core.source import ChatType

ME = MatrixIdentity("@sg_bot:example.org", "Sessiongate")
ROOM = RoomInfo("!Room:example.org", name="Team", members={"@a:x", "@b:x", ME.user_id})


def _message(body: str = "hello", **content: Any) -> dict[str, Any]:
    return {
        "event_id": "$e1:example.org",
        "type": "m.room.message",
        "sender": "@alice:example.org",
        "origin_server_ts": 1767225600000,
        "content": {"msgtype": "m.text", "body": body, **content},
    }


def test_a_dm_room_maps_to_a_dm_with_the_raw_room_id():
    room = RoomInfo("!Dm:example.org", members={"@alice:example.org", ME.user_id})
    event = parse_event(room, _message(), ME)
    assert event.source is not None
    assert event.source.chat_type is ChatType.DM
    assert event.source.chat_id == "!Dm:example.org"  # case kept
    assert event.source.user_id == "@alice:example.org"
    assert event.sent_at == 1767225600.0
    assert event.message_id == "$e1:example.org"


def test_a_room_id_is_escaped_in_the_session_key_and_kept_raw_for_sending():
    event = parse_event(ROOM, _message(f"{ME.user_id} hi"), ME)
    assert event.source is not None
    key = build_session_key(event.source)
    assert "!Room%3Aexample.org" in key
    assert event.source.chat_id == "!Room:example.org"


def test_m_direct_marks_a_room_a_dm_whatever_its_size():
    rooms = RoomDirectory()
    rooms.apply_sync({"account_data": {"events": [
        {"type": "m.direct", "content": {"@alice:x": ["!big:x"]}}]}})  # fmt: skip
    rooms.room("!big:x").members.update({"@a:x", "@b:x", "@c:x"})
    assert rooms.room("!big:x").chat_type() is ChatType.DM


def test_a_direct_invite_and_a_two_member_room_are_dms_and_others_are_groups():
    rooms = RoomDirectory()
    rooms.apply_sync({"rooms": {
        "invite": {"!inv:x": {"invite_state": {"events": [
            {"type": "m.room.member", "state_key": ME.user_id, "sender": "@alice:x",
             "content": {"membership": "invite", "is_direct": True}}]}}},
        "join": {"!two:x": {"summary": {"m.joined_member_count": 2}},
                 "!three:x": {"state": {"events": [
                     {"type": "m.room.member", "state_key": u, "content": {"membership": "join"}}
                     for u in ("@a:x", "@b:x", ME.user_id)]}}},
    }})  # fmt: skip
    assert rooms.room("!inv:x").chat_type() is ChatType.DM
    assert rooms.room("!inv:x").inviter == "@alice:x"
    assert rooms.room("!two:x").chat_type() is ChatType.DM
    assert rooms.room("!three:x").chat_type() is ChatType.GROUP


def test_encryption_state_is_seen():
    rooms = RoomDirectory()
    rooms.apply_sync({"rooms": {"join": {"!e:x": {"state": {"events": [
        {"type": "m.room.encryption", "state_key": "",
         "content": {"algorithm": "m.megolm.v1.aes-sha2"}}]}}}}})  # fmt: skip
    assert rooms.room("!e:x").encrypted


def test_a_thread_message_carries_the_root_as_thread_and_the_room_as_parent():
    relates = {"rel_type": "m.thread", "event_id": "$root", "is_falling_back": True,
               "m.in_reply_to": {"event_id": "$root"}}  # fmt: skip
    event = parse_event(ROOM, _message("Sessiongate: in the thread", **{"m.relates_to": relates}),
                        ME)  # fmt: skip
    assert event.source is not None
    assert event.source.thread_id == "$root"
    assert event.reply_to is None  # the fallback is not a reply
    assert event.parent is not None
    assert event.parent.thread_id is None
    assert event.text == "in the thread"
    assert event.facts is not None
    assert event.facts.mentions_bot


def test_a_reply_to_the_bot_is_addressed_and_its_fallback_quote_is_removed():
    body = "> <@sg_bot:example.org> earlier answer\n\nthanks"
    event = parse_event(ROOM, _message(body, **{"m.relates_to": {
        "m.in_reply_to": {"event_id": "$mine"}}}), ME, bot_events={"$mine"})  # fmt: skip
    assert event.reply_to == "$mine"
    assert event.text == "thanks"
    assert event.facts is not None
    assert event.facts.reply_to_bot


def test_an_edit_is_marked_and_reads_the_new_content():
    content = {"m.new_content": {"msgtype": "m.text", "body": "fixed"},
               "m.relates_to": {"rel_type": "m.replace", "event_id": "$orig"}}  # fmt: skip
    event = parse_event(ROOM, _message("* fixed", **content), ME)
    assert event.facts is not None
    assert event.facts.is_edit
    assert event.text == "fixed"
    assert event.message_id == "$orig"


def test_notices_and_appservice_ghosts_are_bots():
    notice = parse_event(ROOM, _message(msgtype="m.notice"), ME)
    ghost = parse_event(ROOM, {**_message(), "sender": "@_bridge_bob:example.org"}, ME)
    assert notice.facts is not None
    assert notice.facts.is_bot
    assert ghost.facts is not None
    assert ghost.facts.is_bot


def test_bang_and_slash_commands_become_gateway_commands():
    for body in ("!status", "/status"):
        event = parse_event(ROOM, _message(body), ME, commands={"status"})
        assert event.text == "/status"
        assert event.facts is not None
        assert event.facts.command_to_bot
    other = parse_event(ROOM, _message("!status", **{"m.mentions": {"user_ids": ["@x:y"]}}), ME,
                        commands={"status"})  # fmt: skip
    assert other.facts is not None
    assert other.facts.command_to_other


def test_media_is_an_mxc_reference_with_its_caption():
    event = parse_event(ROOM, _message("look at this", msgtype="m.image", filename="cat.png",
                        url="mxc://example.org/abc", info={"size": 1234,
                        "mimetype": "image/png"}), ME)  # fmt: skip
    (attachment,) = event.attachments
    assert attachment.reference().startswith("matrix://file/mxc%3A%2F%2Fexample.org%2Fabc")
    assert attachment.size == 1234
    assert event.text == "look at this"


def test_other_event_types_start_nothing():
    event = parse_event(ROOM, {"event_id": "$r", "type": "m.reaction", "content": {}}, ME)
    assert event.source is None
    encrypted = parse_event(ROOM, {"event_id": "$c", "type": "m.room.encrypted"}, ME)
    assert (encrypted.source, encrypted.kind) == (None, "m.room.encrypted")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"event_id": None}, "event_id"),
        ({"sender": 42}, "sender"),
        ({"sender": "alice"}, "sender"),
        ({"origin_server_ts": "yesterday"}, "origin_server_ts"),
        ({"content": []}, "content"),
        ({"content": {"msgtype": "m.text"}}, "content.body"),
        ({"content": {"body": "x", "msgtype": "m.text", "m.relates_to": "x"}},
         "content.m.relates_to"),
        ({"content": {"body": "x", "msgtype": "m.file", "url": "https://evil/x"}}, "content.url"),
    ],
)  # fmt: skip
def test_a_malformed_event_names_its_field(change, field):
    event = {**_message(), **change}
    with pytest.raises(MalformedEventError) as caught:
        parse_event(ROOM, event, ME)
    assert caught.value.field == field


def test_html_goes_in_formatted_body_with_a_plain_body_beside_it():
    content = message_content("<b>bold</b> &amp; <code>x</code><br>next", markup=True)
    assert content["format"] == "org.matrix.custom.html"
    assert content["formatted_body"] == "<b>bold</b> &amp; <code>x</code><br>next"
    assert content["body"] == "bold & x\nnext"
    assert html_to_body("<pre><code>a\nb</code></pre>") == "a\nb"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)
_keys = st.sampled_from(["event_id", "type", "sender", "origin_server_ts", "content",
                         "state_key", "unsigned"])  # fmt: skip
_content_keys = st.sampled_from(["msgtype", "body", "url", "info", "filename", "m.relates_to",
                                 "m.new_content", "m.mentions", "formatted_body"])  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    base=st.fixed_dictionaries({}, optional={"event_id": st.text(max_size=6) | _json,
                                             "type": st.just("m.room.message") | _json,
                                             "sender": st.just("@a:b") | _json,
                                             "origin_server_ts": st.integers() | _json}),
    content=st.dictionaries(_content_keys, _json | st.text(max_size=6), max_size=6),
    extra=st.dictionaries(_keys, _json, max_size=2),
)  # fmt: skip
def test_any_json_parses_or_raises_the_one_error(base, content, extra):
    """Whatever a homeserver sends, the parser answers an event or `MalformedEventError`
    naming a field: no other exception escapes it."""
    event = {**extra, **base, "content": content}
    try:
        parsed = parse_event(ROOM, event, ME)
    except MalformedEventError as exc:
        field = exc.field
    else:
        field = "-"
        json.dumps(parsed.text)
    assert field


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["rooms", "account_data", "next_batch"]), _json,
                       max_size=3))  # fmt: skip
def test_any_sync_shape_folds_into_the_directory_without_error(sync):
    RoomDirectory().apply_sync(sync)
