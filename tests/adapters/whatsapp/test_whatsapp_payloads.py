"""The pure mapping of Cloud API webhook bodies (`payloads.py`), on recorded-style fixtures
(the shapes of Meta's published examples) and on whatever hypothesis makes of them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from sessiongate.adapters.whatsapp.markup import to_whatsapp
from sessiongate.adapters.whatsapp.payloads import (
    PayloadError,
    WebhookBatch,
    WhatsAppIdentity,
    parse_webhook,
)
from sessiongate.core.source import ChatType
from sessiongate.gateway.messages import MessageType

FIXTURES = Path(__file__).parent / "fixtures"
ME = WhatsAppIdentity("106540352242922", "15550783881")


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


def test_a_dm_maps_to_the_senders_number_with_the_bsuid_as_alias():
    batch = parse_webhook(fixture("text_dm"), ME)
    (event,) = batch.events
    assert event.source is not None
    assert event.source.chat_type is ChatType.DM
    assert event.source.chat_id == event.source.user_id == "16505551234"
    assert event.source.user_id_alt == "US.13491208655302741918"
    assert event.source.user_name == "Sheena Nelson"
    assert event.event_id == event.message_id
    assert event.message_id is not None
    assert event.message_id.startswith("wamid.")
    assert event.text == "Does it come in another color?"
    assert event.sent_at == 1749416383.0
    assert batch.aliases == [("US.13491208655302741918", "16505551234")]


def test_a_group_keeps_its_id_and_a_reply_to_the_bot_is_addressed():
    (event,) = parse_webhook(fixture("group_reply_image"), ME).events
    assert event.source is not None
    assert event.source.chat_type is ChatType.GROUP
    assert event.source.chat_id == "Y2FwaV9ncm91cDoxNzA1NTU1MDEzOToxMjAzNjM0MDQ2OTQyMzM4MjAZD"
    assert event.source.user_id == "16505559999"  # the contact's `+1 (650) ...` agrees
    assert event.facts is not None
    assert event.facts.reply_to_bot
    assert event.reply_to == "wamid.HBgLMTY0NjcwNDM1OTUVAgARGBI1QjJGRjI1NDdFMDE0RTYyQzkA"
    assert event.message_type is MessageType.PHOTO
    (attachment,) = event.attachments
    assert attachment.reference() == "whatsapp://file/1003383421387256?type=image%2Fjpeg"
    assert event.text == "This is the one"


def test_statuses_are_returned_apart_and_other_fields_are_skipped():
    batch = parse_webhook(fixture("statuses"), ME)
    assert batch.events == []
    assert [(s.status, s.error) for s in batch.statuses] == [
        ("delivered", None),
        ("failed", "131047: Re-engagement message"),
    ]
    assert batch.skipped == 1


def test_a_number_spelled_apart_from_its_contact_keeps_the_name_but_no_borrowed_id():
    body = fixture("text_dm")
    value = body["entry"][0]["changes"][0]["value"]
    value["messages"][0]["from"] = "5511987654321"  # the contact's wa_id lacks Brazil's 9
    value["contacts"][0].update(wa_id="551187654321")
    (event,) = parse_webhook(body, ME).events
    assert event.source is not None
    assert (event.source.user_id, event.source.user_name) == ("5511987654321", "Sheena Nelson")
    assert event.source.user_id_alt is None


def test_a_message_to_another_phone_number_id_is_skipped():
    batch = parse_webhook(fixture("text_dm"), WhatsAppIdentity("999"))
    assert (batch.events, batch.skipped) == ([], 1)


@pytest.mark.parametrize(
    ("text", "mentioned", "command", "cleaned"),
    [
        ("@15550783881 what now", True, False, "what now"),
        ("@+15550783881 /status", True, True, "/status"),
        ("ask @15550783881 later", True, False, "ask @15550783881 later"),
        ("@15559990000 /status", False, False, "@15559990000 /status"),
    ],
)
def test_a_mention_is_the_business_number(text, mentioned, command, cleaned):
    body = fixture("text_dm")
    body["entry"][0]["changes"][0]["value"]["messages"][0]["text"]["body"] = text
    (event,) = parse_webhook(body, ME).events
    assert event.facts is not None
    assert (event.facts.mentions_bot, event.facts.command_to_bot) == (mentioned, command)
    assert event.text == cleaned


@pytest.mark.parametrize("kind", ["reaction", "unsupported", "system"])
def test_housekeeping_messages_start_nothing(kind):
    body = fixture("text_dm")
    message = body["entry"][0]["changes"][0]["value"]["messages"][0]
    del message["text"]
    message["type"] = kind
    (event,) = parse_webhook(body, ME).events
    assert event.source is None


def test_an_edit_is_marked_an_edit():
    body = fixture("text_dm")
    message = body["entry"][0]["changes"][0]["value"]["messages"][0]
    del message["text"]
    message["type"] = "edit"
    message["edit"] = {
        "original_message_id": "wamid.ORIG",
        "message": {"type": "text", "text": {"body": "fixed typo"}},
    }
    (event,) = parse_webhook(body, ME).events
    assert event.facts is not None
    assert event.facts.is_edit
    assert event.text == "fixed typo"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b.pop("entry"), "body.entry"),
        (lambda b: b["entry"][0]["changes"][0]["value"].pop("metadata"), "value.metadata"),
        (lambda b: _message(b).pop("type"), "messages[0].type"),
        (lambda b: _message(b).update(text="hi"), "messages[0].text"),
        (lambda b: _message(b).update(timestamp="noon"), "messages[0].timestamp"),
        (lambda b: _message(b).update({"from": None}), "messages[0].from"),
    ],
)
def test_a_malformed_body_names_the_field(mutate, field):
    body = fixture("text_dm")
    body["entry"][0]["changes"][0]["value"]["contacts"] = []
    mutate(body)
    with pytest.raises(PayloadError) as caught:
        parse_webhook(body, ME)
    assert field in caught.value.field


def _message(body: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = body["entry"][0]["changes"][0]["value"]["messages"][0]
    return message


def test_markdown_becomes_whatsapp_markers():
    assert to_whatsapp("**bold**, *it*, ~~gone~~ and `code`") == "*bold*, _it_, ~gone~ and `code`"
    assert to_whatsapp("# Title\n[docs](https://x.org)") == "*Title*\ndocs (https://x.org)"


# ---------------------------------------------------------------------------- properties

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _parse_or_refuse(body: Any) -> WebhookBatch | PayloadError:
    try:
        return parse_webhook(body, ME)
    except PayloadError as exc:
        refused = exc
    assert refused.field.startswith(("body", "entry["))
    return refused


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_any_json_parses_or_is_refused_with_a_field(body):
    """A signed body of any JSON shape answers 200 or a 400 naming a field, never a 500."""
    _parse_or_refuse(body)


@settings(max_examples=300, deadline=None)
@given(st.data(), JSON)
def test_any_field_of_a_real_body_replaced_parses_or_is_refused(data, replacement):
    """Each field of a recorded body swapped for any JSON value: still only those two."""
    body = fixture(data.draw(st.sampled_from(["text_dm", "group_reply_image", "statuses"])))
    paths = [p for p in _paths(body) if p]
    path = data.draw(st.sampled_from(paths))
    mutated = copy.deepcopy(body)
    target = mutated
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = replacement
    _parse_or_refuse(mutated)


NUMBERS = st.from_regex(r"[1-9][0-9]{7,13}", fullmatch=True)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(NUMBERS, st.text(max_size=30)), min_size=1, max_size=5))
def test_every_message_of_a_batch_maps_in_order_to_its_sender(messages):
    body = fixture("text_dm")
    value = body["entry"][0]["changes"][0]["value"]
    value["contacts"] = [{"profile": {"name": "x"}, "wa_id": n} for n, _ in messages]
    value["messages"] = [
        {"from": f"+{n}", "id": f"wamid.{i}", "timestamp": "1", "type": "text", "text": {"body": t}}
        for i, (n, t) in enumerate(messages)
    ]
    events = parse_webhook(body, ME).events
    assert [e.message_id for e in events] == [f"wamid.{i}" for i in range(len(messages))]
    assert [e.source.chat_id for e in events if e.source] == [n for n, _ in messages]
