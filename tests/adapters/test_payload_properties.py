"""Every platform parser, fed any JSON at all, returns an event or raises its one error.

A payload is loose input from the edge: a field of the wrong type, a number where an object
belongs, `Infinity`, a giant integer, nesting as deep as the sender likes. Each parser
(`telegram.payloads.parse_update`, `slack.payloads.parse_envelope`,
`discord.payloads.parse_message` / `parse_interaction`) must answer with a `PlatformEvent` or a
`PayloadError` naming the field, never an `AttributeError`, `OverflowError` or
`RecursionError` (which the webhook route would turn into a 500). The payloads are valid ones
with parts replaced by arbitrary JSON, and arbitrary objects over each platform's field names.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sessiongate.adapters.discord.payloads import (
    ChannelInfo,
    DiscordIdentity,
    parse_interaction,
    parse_message,
)
from sessiongate.adapters.kit.events import PlatformEvent
from sessiongate.adapters.kit.fields import MAX_JSON_DEPTH, PayloadError, loads_json
from sessiongate.adapters.slack.payloads import SlackIdentity, parse_envelope
from sessiongate.adapters.telegram.payloads import BotIdentity, parse_update

TELEGRAM_ME = BotIdentity(id="99", username="sgbot")
SLACK_ME = SlackIdentity(user_id="UBOT", bot_id="BBOT", team_id="T0TEAM")
DISCORD_ME = DiscordIdentity(user_id="99", application_id="98")

TELEGRAM = {
    "update_id": 10,
    "message": {
        "message_id": 3,
        "from": {"id": 7, "is_bot": False, "first_name": "Ann", "username": "ann"},
        "chat": {"id": -100, "type": "supergroup", "title": "T", "is_forum": True},
        "is_topic_message": True,
        "message_thread_id": 4,
        "date": 1767225600,
        "text": "@sgbot /new@sgbot hi",
        "entities": [
            {"type": "mention", "offset": 0, "length": 6},
            {"type": "bot_command", "offset": 7, "length": 10},
            {"type": "text_mention", "offset": 0, "length": 1, "user": {"id": 99}},
        ],
        "reply_to_message": {"message_id": 2, "from": {"id": 99}},
        "photo": [{"file_id": "a", "file_size": 10}, {"file_id": "b", "file_size": 20}],
        "media_group_id": "g1",
    },
}
SLACK = {
    "type": "event_callback",
    "team_id": "T0TEAM",
    "event_id": "Ev1",
    "event": {
        "type": "message",
        "subtype": "message_changed",
        "channel": "C0GENERAL",
        "channel_type": "channel",
        "ts": "1767225600.000100",
        "message": {
            "user": "U0ANN",
            "text": "<@UBOT> hi",
            "ts": "1767225600.000100",
            "thread_ts": "1767225500.000100",
            "parent_user_id": "UBOT",
            "user_profile": {"display_name": "Ann"},
            "files": [{"id": "F1", "mimetype": "image/png", "size": 5, "name": "a.png"}],
        },
    },
}
DISCORD_MESSAGE = {
    "id": "111",
    "type": 0,
    "channel_id": "222",
    "guild_id": "333",
    "content": "<@99> !new hi",
    "timestamp": "2026-01-01T12:00:00+00:00",
    "edited_timestamp": None,
    "author": {"id": "7", "username": "ann", "global_name": "Ann", "bot": False},
    "member": {"nick": "A", "roles": ["5", 6]},
    "mentions": [{"id": "99"}],
    "referenced_message": {"author": {"id": "99"}},
    "message_reference": {"message_id": "110"},
    "attachments": [{"id": "9", "content_type": "image/png", "size": 3, "filename": "a.png"}],
}
DISCORD_INTERACTION = {
    "id": "444",
    "type": 2,
    "channel_id": "222",
    "guild_id": "333",
    "data": {"name": "new", "options": [{"value": "hi"}, {"value": 3}]},
    "member": {"user": {"id": "7", "username": "ann"}, "roles": ["5"]},
}
THREAD = ChannelInfo(id="222", type=11, guild_id="333", parent_id="220", name="t")

# Any JSON value, the awkward ones included (floats JSON cannot even write, 200-digit integers).
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**200), max_value=10**200)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["", "0", "-1", "²", "1e999", "@sgbot", "<@UBOT>", "/new", "\ud800"])
)


def _json(keys: list[str]) -> st.SearchStrategy[Any]:
    names = st.sampled_from(keys) | st.text(max_size=4)
    return st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=6),
        max_leaves=25,
    )


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value).union(*(_keys(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_keys(v) for v in value))
    return set()


def _replace(data: st.DataObject, base: Any, values: st.SearchStrategy[Any]) -> Any:
    """`base` with one part, found by walking down at random, replaced by an arbitrary value."""
    root = copy.deepcopy(base)
    parent: Any = None
    key: Any = None
    node = root
    while isinstance(node, (dict, list)) and node and data.draw(st.booleans()):
        key = data.draw(
            st.sampled_from(sorted(node) if isinstance(node, dict) else range(len(node)))
        )
        parent, node = node, node[key]
    replacement = data.draw(values)
    if parent is None:
        return replacement
    parent[key] = replacement
    return root


def _check(parse: Any, payload: Any) -> None:
    try:
        result = parse(payload)
    except PayloadError as exc:
        field = exc.field
        assert field
        return
    assert isinstance(result, PlatformEvent)
    # What comes out is text the gateway can store and hash.
    for value in (result.event_id, result.text, result.message_id or ""):
        assert isinstance(value, str)


def _parsers() -> dict[str, tuple[Any, Any]]:
    return {
        "telegram": (TELEGRAM, lambda p: parse_update(p, TELEGRAM_ME)),
        "slack": (SLACK, lambda p: parse_envelope(p, SLACK_ME, commands=["new"])),
        "discord message": (
            DISCORD_MESSAGE,
            lambda p: parse_message(
                "MESSAGE_UPDATE", p, DISCORD_ME, THREAD, allow_roles=["5"], commands=["new"]
            ),
        ),
        "discord interaction": (
            DISCORD_INTERACTION,
            lambda p: parse_interaction(p, DISCORD_ME, THREAD, allow_roles=["5"]),
        ),
    }


PARSERS = _parsers()
PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_valid_payloads_parse():
    for base, parse in PARSERS.values():
        assert parse(copy.deepcopy(base)).source is not None


@PROPERTY
@given(data=st.data(), name=st.sampled_from(sorted(PARSERS)))
def test_a_valid_payload_with_any_part_replaced_parses_or_raises_payload_error(data, name):
    base, parse = PARSERS[name]
    _check(parse, _replace(data, base, _json(sorted(_keys(base)))))


@PROPERTY
@given(data=st.data(), name=st.sampled_from(sorted(PARSERS)))
def test_any_json_over_the_platforms_field_names_parses_or_raises_payload_error(data, name):
    base, parse = PARSERS[name]
    _check(parse, data.draw(_json(sorted(_keys(base)))))


@PROPERTY
@given(data=st.data(), name=st.sampled_from(sorted(PARSERS)))
def test_a_webhook_body_parses_or_raises_payload_error(data, name):
    # The way a webhook body comes in: bytes, JSON-decoded with the depth bound, then parsed.
    base, parse = PARSERS[name]
    payload = _replace(data, base, _json(sorted(_keys(base))))
    body = json.dumps(payload, allow_nan=True).encode("utf-8", "surrogatepass")

    def parse_body(raw: bytes) -> PlatformEvent:
        return parse(loads_json(raw))  # type: ignore[no-any-return]

    _check(parse_body, body)


@settings(max_examples=40, deadline=None)
@given(
    depth=st.integers(min_value=0, max_value=20_000),
    opener=st.sampled_from([(b"[", b"]"), (b'{"a":', b"}"), (b'[{"x":"]["},', b"]")]),
)
def test_nesting_of_any_depth_never_raises_recursion_error(depth, opener):
    start, end = opener
    body = start * depth + b"1" + end * depth
    if depth < MAX_JSON_DEPTH:
        loads_json(body)
        return
    if depth == MAX_JSON_DEPTH:
        return  # at the bound: one opener adds a level inside its last repetition
    with pytest.raises(PayloadError) as refused:
        loads_json(body)
    assert refused.value.field == "body"
