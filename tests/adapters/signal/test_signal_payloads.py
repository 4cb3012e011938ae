"""signal-cli receive events to sources and facts (`payloads.py`), on recorded shapes, and the
parser's one error for anything else (a property over arbitrary JSON)."""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sessiongate import build_session_key
from sessiongate.adapters.kit.gating import GatePolicy, GateReason, decide_gate
from sessiongate.adapters.signal.payloads import (
    MalformedEnvelopeError,
    SignalIdentity,
    parse_event,
)
from sessiongate.core.source import ChatType
from sessiongate.gateway.messages import MessageType

FIXTURES = Path(__file__).parent / "fixtures"
ME = SignalIdentity("+15550000001", "0b0b0b0b-0000-4000-8000-00000000b0b0")
ALICE = ("+15550000011", "a11ce000-0000-4000-8000-000000000011")
GROUP = "S2lkcyBncm91cCBpZCAxMjM0NTY3ODkwMTIzNDU2Nzg5MA=="


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


def gate(event) -> GateReason:
    assert event.facts is not None
    return decide_gate(event.facts, GatePolicy())


def test_a_dm_is_keyed_by_the_account_uuid_with_the_number_as_user_id():
    event = parse_event(fixture("dm_text"), ME)
    source = event.source
    assert source is not None
    assert (source.chat_type, source.chat_id) == (ChatType.DM, ALICE[1])
    assert (source.user_id, source.user_id_alt, source.participant_id) == (*ALICE, ALICE[1])
    assert source.user_name == "Alice"
    assert event.event_id == f"{ALICE[1]}:1767225600123"
    assert event.message_id == "1767225600123"
    assert event.sent_at == pytest.approx(1767225600.123)
    assert event.text == "hello there"
    assert gate(event) is GateReason.DM


def test_a_number_change_keeps_the_conversation():
    before = parse_event(fixture("dm_text"), ME).source
    changed = fixture("dm_text")
    changed["envelope"]["sourceNumber"] = changed["envelope"]["source"] = "+15559999999"
    after = parse_event(changed, ME).source
    assert before is not None
    assert after is not None
    assert after.user_id == "+15559999999"
    assert build_session_key(after) == build_session_key(before)
    group = fixture("group_mention")
    moved = copy.deepcopy(group)
    moved["envelope"]["sourceNumber"] = "+15559999999"
    keys = {build_session_key(parse_event(g, ME).source) for g in (group, moved)}  # type: ignore[arg-type]
    assert len(keys) == 1  # the per-user key in a group is the UUID too


def test_a_uuid_only_sender_is_named_by_its_uuid():
    source = parse_event(fixture("uuid_only"), ME).source
    assert source is not None
    assert source.user_id == source.user_id_alt == source.chat_id == ALICE[1]


def test_a_group_message_maps_to_the_group_with_its_internal_id():
    event = parse_event(fixture("group_mention"), ME)
    source = event.source
    assert source is not None
    assert source.chat_type is ChatType.GROUP
    assert (source.chat_id, source.chat_id_alt) == (f"group:{GROUP}", GROUP)
    assert source.chat_name == "Team chat"
    assert event.text == "what's up?"  # the bot's leading mention is cut out
    assert gate(event) is GateReason.MENTIONED


def test_other_mentions_are_written_out_and_do_not_address_the_bot():
    event = parse_event(fixture("group_chatter"), ME)
    assert event.text == "lunch at @Bob?"
    assert gate(event) is GateReason.NOT_ADDRESSED


def test_a_quote_of_the_bots_message_addresses_it():
    event = parse_event(fixture("quote_of_bot"), ME)
    assert event.reply_to == str(1767225600123 - 60000)
    assert gate(event) is GateReason.REPLY_TO_BOT


def test_attachments_arrive_as_references():
    event = parse_event(fixture("attachment"), ME)
    (attachment,) = event.attachments
    assert event.message_type is MessageType.PHOTO
    assert attachment.reference() == (
        "signal://file/Q2vJmD7lkbTW0yYxL9PQ.jpg?name=plan.jpg&size=183211&type=image%2Fjpeg"
    )


def test_a_command_is_addressed_in_a_dm_and_after_the_bots_mention():
    dm = fixture("dm_text")
    dm["envelope"]["dataMessage"]["message"] = "/status"
    assert parse_event(dm, ME).facts.command_to_bot  # type: ignore[union-attr]
    group = fixture("group_mention")
    group["envelope"]["dataMessage"]["message"] = "\ufffc /new"
    event = parse_event(group, ME)
    assert event.text == "/new"
    assert gate(event) is GateReason.COMMAND_TO_BOT


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("edit", GateReason.EDIT),
        ("remote_delete", GateReason.DELETION),
        ("own_message", GateReason.OWN_MESSAGE),
    ],
)
def test_edits_deletions_and_own_messages_start_no_turn(name, reason):
    assert gate(parse_event(fixture(name), ME)) is reason


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("typing", "typingMessage"),
        ("receipt", "receiptMessage"),
        ("sync_sent", "syncMessage"),
        ("reaction", "reaction"),
    ],
)
def test_typing_receipts_sync_messages_and_reactions_are_not_messages(name, kind):
    event = parse_event(fixture(name), ME)
    assert (event.source, event.kind) == (None, kind)


def test_the_same_envelope_always_has_the_same_event_id():
    """(sender, timestamp) is the claim: a replay of the envelope is the same event."""
    ids = {parse_event(fixture("dm_text"), ME).event_id for _ in range(3)}
    assert len(ids) == 1
    assert parse_event(fixture("uuid_only"), ME).event_id == next(iter(ids))


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("envelope",), "nope", "envelope"),
        (("envelope", "timestamp"), "soon", "envelope.timestamp"),
        (("envelope", "dataMessage"), [], "envelope.dataMessage"),
        (("envelope", "dataMessage", "groupInfo"), {"groupId": 5}, "groupInfo.groupId"),
        (("envelope", "dataMessage", "mentions"), [{"start": 99, "length": 1}], "mentions[0]"),
        (("envelope", "dataMessage", "attachments"), [{"id": None}], "attachments[0].id"),
        (("envelope", "sourceUuid"), 7, "envelope.sourceUuid"),
    ],
)
def test_a_malformed_event_raises_the_one_error_naming_its_field(path, value, field):
    event = fixture("group_mention")
    target = event
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(MalformedEnvelopeError) as raised:
        parse_event(event, ME)
    assert raised.value.field.endswith(field)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 2**53) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=25,
)
_KEYS = st.sampled_from(
    ["envelope", "dataMessage", "message", "groupInfo", "groupId", "timestamp", "mentions",
     "attachments", "quote", "sourceNumber", "sourceUuid", "source", "editMessage", "id",
     "start", "length", "reaction", "authorUuid", "size", "contentType"]
)  # fmt: skip


def _mutate(data: st.DataObject, value: Any, depth: int = 0) -> Any:
    """A recorded event with some of its parts replaced by arbitrary JSON."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if data.draw(st.integers(0, 9), label=f"keep {key}") == 0:
                continue
            out[key] = _mutate(data, item, depth + 1)
        if data.draw(st.booleans(), label="add"):
            out[data.draw(_KEYS)] = data.draw(_JSON)
        return out
    if isinstance(value, list):
        return [_mutate(data, item, depth + 1) for item in value]
    if data.draw(st.integers(0, 5), label="replace") == 0:
        return data.draw(_JSON)
    return value


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data(), name=st.sampled_from(sorted(p.stem for p in FIXTURES.glob("*.json"))))
def test_any_event_parses_or_raises_the_one_error(data, name):
    """Whatever arrives, the parser answers an event or `MalformedEnvelopeError`: never a
    KeyError or TypeError that would take the receiver down."""
    event = _mutate(data, fixture(name))
    try:
        parsed = parse_event(event, ME)
    except MalformedEnvelopeError as exc:
        field = exc.field
        assert field
        return
    assert isinstance(parsed.event_id, str)
    if parsed.source is not None:
        assert parsed.source.chat_id
        assert parsed.message_id is not None


@given(st.one_of(_JSON, st.dictionaries(_KEYS, _JSON, max_size=6)))
def test_arbitrary_json_parses_or_raises_the_one_error(value):
    with contextlib.suppress(MalformedEnvelopeError):
        parse_event(value, ME)


def test_a_lone_surrogate_in_the_text_is_carried_not_fatal():
    """JSON can carry half an emoji; the UTF-16 arithmetic must not choke on it."""
    event = fixture("group_mention")
    event["envelope"]["dataMessage"]["message"] = "\ufffc \ud83d broken"
    assert parse_event(event, ME).text == "\ud83d broken"
