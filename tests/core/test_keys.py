"""Session keys: the examples of spec §4 byte for byte, escaping, parsing and isolation (§5)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from sessiongate.core.keys import (
    KeyParts,
    build_key_parts,
    build_session_key,
    check_key_text,
    disambiguate,
    escape_component,
    format_session_key,
    is_shared_multi_user_session,
    parse_session_key,
    unescape_component,
)
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource
from sessiongate.errors import InvalidSessionKeyError


def _source(platform: str, chat_id: str, chat_type: str = "dm", **kw: Any) -> SessionSource:
    return SessionSource(Platform(platform), chat_id, chat_type=ChatType(chat_type), **kw)


def _parts_of(parsed: dict[str, Any]) -> KeyParts:
    """`KeyParts` rebuilt from a `parse_session_key` result."""
    names = ("platform", "chat_type", "chat_id", "thread_id", "participant_id", "namespace")
    return KeyParts(**{name: parsed[name] for name in names}, tagged=parsed["tagged"])


# --- spec §4, DM rules ----------------------------------------------------------------------


def test_dm_with_chat_id_matches_spec_example():
    assert build_session_key(_source("telegram", "12345")) == "agent:main:telegram:dm:12345"


def test_dm_with_chat_id_and_thread_matches_spec_example():
    source = _source("telegram", "12345", thread_id="thread_678")
    assert build_session_key(source) == "agent:main:telegram:dm:12345:thread_678"


def test_dm_with_chat_id_ignores_the_sender():
    source = _source("telegram", "12345", user_id="999", user_id_alt="alt")
    assert build_session_key(source) == "agent:main:telegram:dm:12345"


def test_dm_without_chat_id_falls_back_to_user_id():
    source = _source("signal", "", user_id="user_abc")
    assert build_session_key(source) == "agent:main:signal:dm:user_abc"


def test_dm_without_chat_id_prefers_user_id_alt_over_user_id():
    source = _source("signal", "", user_id="ephemeral_1", user_id_alt="user_abc")
    assert build_session_key(source) == "agent:main:signal:dm:user_abc"


def test_dm_without_any_identifier_is_the_shared_platform_sink():
    assert build_session_key(_source("telegram", "")) == "agent:main:telegram:dm"


def test_dm_without_chat_id_keeps_its_thread_after_the_participant():
    # As the reference builds it: two people's threads 7 and 8 are four lanes, not one sink.
    keys = {
        build_session_key(_source("slack", "", user_id=user, thread_id=thread))
        for user in ("u1", "u2")
        for thread in ("7", "8")
    }
    assert "agent:main:slack:dm:u1:7" in keys
    assert len(keys) == 4


def test_dm_with_only_a_thread_is_keyed_by_the_thread():
    assert build_session_key(_source("telegram", "", thread_id="t1")) == "agent:main:telegram:dm:t1"
    assert build_session_key(_source("telegram", "", thread_id="t2")) != build_session_key(
        _source("telegram", "", thread_id="t1")
    )


@pytest.mark.parametrize(
    "parts",
    [
        KeyParts("slack", "dm", None, "7", "u1"),
        KeyParts("slack", "dm", None, "7"),
        KeyParts("slack", "dm", None, None, "u1"),
    ],
)
def test_dm_named_without_a_chat_id_parses_back_once_tagged(parts):
    # Untagged they read as a chat id (and thread), the documented look-alike; the store's
    # tag on a collision makes them parse back to exactly their own parts.
    tagged = disambiguate(parts)
    assert _parts_of(parse_session_key(format_session_key(tagged))) == tagged
    assert format_session_key(tagged) != format_session_key(parts)


def test_whatsapp_dm_chat_id_is_canonicalised():
    for spelling in (
        "15551234567",
        "+15551234567",
        "15551234567@s.whatsapp.net",
        "15551234567:12@s.whatsapp.net",
        "15551234567@c.us",
    ):
        key = build_session_key(_source("whatsapp", spelling))
        assert key == "agent:main:whatsapp:dm:15551234567", spelling


def test_whatsapp_dm_lid_resolves_to_the_same_lane_as_the_phone_jid():
    aliases = {"987654321": "15551234567"}
    via_lid = build_session_key(_source("whatsapp", "987654321@lid"), resolve_identity=aliases.get)
    via_phone = build_session_key(_source("whatsapp", "15551234567@s.whatsapp.net"))
    assert via_lid == via_phone == "agent:main:whatsapp:dm:15551234567"


# --- spec §4, group and channel rules ---------------------------------------------------------


def test_group_without_sender_matches_spec_example():
    source = _source("telegram", "-10012345", "group")
    assert build_session_key(source) == "agent:main:telegram:group:-10012345"


def test_group_shared_when_per_user_isolation_is_off():
    source = _source("telegram", "-10012345", "group", user_id="user_abc")
    key = build_session_key(source, group_sessions_per_user=False)
    assert key == "agent:main:telegram:group:-10012345"


def test_group_per_user_isolation_matches_spec_example():
    source = _source("telegram", "-10012345", "group", user_id="user_abc")
    assert build_session_key(source) == "agent:main:telegram:group:-10012345:user_abc"


def test_group_participant_prefers_user_id_alt():
    source = _source("signal", "grp", "group", user_id="ephemeral", user_id_alt="stable")
    assert build_session_key(source) == "agent:main:signal:group:grp:stable"


def test_thread_in_group_is_shared_by_default_matching_spec_example():
    source = _source("discord", "12345", "group", thread_id="thread_678", user_id="user_abc")
    assert build_session_key(source) == "agent:main:discord:group:12345:thread_678"


def test_thread_in_group_per_user_matches_spec_example():
    source = _source("discord", "12345", "group", thread_id="thread_678", user_id="user_abc")
    key = build_session_key(source, thread_sessions_per_user=True)
    assert key == "agent:main:discord:group:12345:thread_678:user_abc"


def test_thread_isolation_ignores_the_group_setting():
    source = _source("discord", "12345", "group", thread_id="thread_678", user_id="user_abc")
    shared = build_session_key(source, group_sessions_per_user=True, thread_sessions_per_user=False)
    assert shared == "agent:main:discord:group:12345:thread_678"


def test_channel_matches_spec_example():
    assert build_session_key(_source("slack", "C12345", "channel")) == (
        "agent:main:slack:channel:C12345"
    )


def test_channel_with_sender_is_per_user_by_default():
    source = _source("slack", "C12345", "channel", user_id="U1")
    assert build_session_key(source) == "agent:main:slack:channel:C12345:U1"


def test_whatsapp_group_id_is_kept_but_participant_is_canonicalised():
    source = _source(
        "whatsapp", "120363-1700000000@g.us", "group", user_id="+15551234567:3@s.whatsapp.net"
    )
    key = build_session_key(source)
    assert key == "agent:main:whatsapp:group:120363-1700000000@g.us:15551234567"


# --- escaping ---------------------------------------------------------------------------------


def test_colon_in_an_id_is_escaped_so_positions_never_shift():
    source = _source("matrix", "!room:example.org", "group", user_id="@bob:example.org")
    key = build_session_key(source)
    assert key == "agent:main:matrix:group:!room%3Aexample.org:@bob%3Aexample.org"
    parsed = parse_session_key(key)
    assert parsed["chat_id"] == "!room:example.org"
    assert parsed["participant_id"] == "@bob:example.org"


def test_percent_is_escaped_first_so_an_escape_lookalike_survives():
    assert escape_component("50%3A") == "50%253A"
    assert unescape_component("50%253A") == "50%3A"


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("a\nb", "a%0Ab"),
        ("\x00", "%00"),
        ("\x1f", "%1F"),
        ("\x7f", "%7F"),
        ("\x85", "%85"),  # NEL ends a line for str.splitlines
        ("tab\there", "tab%09here"),
    ],
)
def test_control_characters_are_escaped(raw, escaped):
    assert escape_component(raw) == escaped
    assert unescape_component(escaped) == raw


def test_ordinary_and_unicode_ids_are_not_escaped():
    for value in ("-10012345", "thread_678", "user.abc-1", "Zoë", "日本", "a\uff1ab", "a/b@c"):
        assert escape_component(value) == value


# --- parse_session_key -------------------------------------------------------------------------


def test_parse_returns_every_part_of_a_per_user_thread_key():
    key = "agent:main:discord:group:12345:thread_678:user_abc"
    assert parse_session_key(key) == {
        "namespace": "agent:main",
        "platform": "discord",
        "chat_type": "group",
        "chat_id": "12345",
        "thread_id": "thread_678",
        "participant_id": "user_abc",
        "components": ["12345", "thread_678", "user_abc"],
        "tagged": None,
        "fork_id": None,
    }


@pytest.mark.parametrize(
    ("key", "chat_id", "thread_id", "participant_id"),
    [
        ("agent:main:telegram:dm:12345", "12345", None, None),
        ("agent:main:telegram:dm:12345:thread_678", "12345", "thread_678", None),
        ("agent:main:telegram:dm", None, None, None),
        ("agent:main:telegram:group:-10012345", "-10012345", None, None),
        # A lone component after a non-DM chat id is the participant (the default config).
        ("agent:main:telegram:group:-10012345:user_abc", "-10012345", None, "user_abc"),
        ("agent:main:slack:channel:C12345", "C12345", None, None),
    ],
)
def test_parse_reads_positions_as_the_default_configuration_builds_them(
    key, chat_id, thread_id, participant_id
):
    parsed = parse_session_key(key)
    assert (parsed["chat_id"], parsed["thread_id"], parsed["participant_id"]) == (
        chat_id,
        thread_id,
        participant_id,
    )
    assert format_session_key(_parts_of(parsed)) == key


def test_parse_unescapes_components():
    parsed = parse_session_key("agent:main:matrix:group:!r%3As%25:u%0A")
    assert parsed["components"] == ["!r:s%", "u\n"]


@pytest.mark.parametrize(
    "key",
    [
        "",
        "agent:main",
        "agent:main:telegram",
        "agent:other:telegram:dm:1",
        "other:main:telegram:dm:1",
        "agent:main:telegram:group:a:b:c:d",  # too many parts
        "agent:main:telegram:dm:a:b:c",  # a DM has at most chat id and thread
        "agent:main:telegram:group:a%3a",  # lower-case escape is not canonical
        "agent:main:telegram:group:a%ZZ",
        "agent:main:telegram:group:a%",
        "agent:main:telegram:group:%41",  # needless escape of "A"
        "agent:main:telegram:group:a\nb",  # raw control character
        "agent:main:tele gram:dm:1",
        "agent:main::dm:1",
        "agent:main:telegram:bogus:1",
        "agent:main:telegram:group:%tc",  # thread tag where the chat id sits
        "agent:main:telegram:group:c:%tt:%pu",  # two tags
        "agent:main:telegram:dm:%pu:%tt",  # two tags
        "agent:main:telegram:dm:c:%pu",  # a participant tag after a DM's chat id
    ],
)
def test_invalid_keys_raise_value_error(key):
    with pytest.raises(ValueError, match="invalid"):
        parse_session_key(key)


@pytest.mark.parametrize("key", [None, 123, b"agent:main:telegram:dm", ["agent", "main"]])
def test_non_text_keys_raise_value_error(key):
    with pytest.raises(InvalidSessionKeyError):
        parse_session_key(key)


def test_invalid_key_error_carries_the_key():
    with pytest.raises(InvalidSessionKeyError) as info:
        parse_session_key("agent:other:x:dm")
    assert info.value.data["session_key"] == "agent:other:x:dm"
    assert isinstance(info.value, ValueError)


# --- isolation (spec §5), one rule with the key -----------------------------------------------

_ISOLATION_SOURCES = [
    _source("telegram", "12345", user_id="u1"),
    _source("telegram", "", user_id="u1"),
    _source("telegram", "-100", "group", user_id="u1"),
    _source("telegram", "-100", "group"),
    _source("slack", "C1", "channel", user_id="U1"),
    _source("discord", "1", "group", thread_id="t", user_id="u1"),
    _source("discord", "1", "group", thread_id="t"),
    _source("discord", "1", "thread", thread_id="t", user_id="u1"),
    _source("whatsapp", "1@g.us", "group", user_id="@lid"),  # canonicalises to nothing
]


@pytest.mark.parametrize("source", _ISOLATION_SOURCES, ids=lambda s: s.description)
@pytest.mark.parametrize("group_per_user", [True, False])
@pytest.mark.parametrize("thread_per_user", [True, False])
def test_shared_multi_user_session_agrees_with_the_key(source, group_per_user, thread_per_user):
    options = {
        "group_sessions_per_user": group_per_user,
        "thread_sessions_per_user": thread_per_user,
    }
    shared = is_shared_multi_user_session(source, **options)
    parts = build_key_parts(source, **options)
    if source.chat_type is ChatType.DM:
        assert shared is False
    else:
        assert shared is (parts.participant_id is None)


def test_dm_is_never_shared():
    source = _source("telegram", "", user_id="u")
    assert not is_shared_multi_user_session(
        source, group_sessions_per_user=False, thread_sessions_per_user=False
    )


def test_group_is_isolated_by_default_and_shared_when_configured():
    source = _source("telegram", "-100", "group", user_id="u")
    assert not is_shared_multi_user_session(source)
    assert is_shared_multi_user_session(source, group_sessions_per_user=False)


def test_thread_is_shared_by_default_and_isolated_when_configured():
    source = _source("discord", "1", "group", thread_id="t", user_id="u")
    assert is_shared_multi_user_session(source)
    assert not is_shared_multi_user_session(source, thread_sessions_per_user=True)


def test_per_user_group_lane_without_participant_is_shared():
    source = _source("telegram", "-100", "group")
    assert is_shared_multi_user_session(source, group_sessions_per_user=True)


# --- look-alikes and disambiguate -------------------------------------------------------------


def test_shared_thread_and_per_user_lane_look_alike_until_disambiguated():
    thread = build_key_parts(_source("discord", "g", "group", thread_id="X"))
    user = build_key_parts(_source("discord", "g", "group", user_id="X"))
    assert not thread.same_conversation(user)
    assert format_session_key(thread) == format_session_key(user)
    for newcomer in (thread, user):
        other = user if newcomer is thread else thread
        tagged = disambiguate(newcomer)
        key = format_session_key(tagged)
        assert key != format_session_key(other)
        assert _parts_of(parse_session_key(key)) == tagged


def test_dm_by_chat_id_and_dm_by_participant_are_told_apart_either_way():
    by_chat = build_key_parts(_source("signal", "X"))
    by_participant = build_key_parts(_source("signal", "", user_id="X"))
    assert format_session_key(by_chat) == format_session_key(by_participant)
    assert format_session_key(disambiguate(by_chat)) != format_session_key(by_participant)
    assert format_session_key(disambiguate(by_participant)) != format_session_key(by_chat)


@pytest.mark.parametrize(
    "parts",
    [
        KeyParts("telegram", "dm", "12345"),
        KeyParts("telegram", "dm", "12345", "t"),
        KeyParts("signal", "dm", None, None, "user_abc"),
        KeyParts("telegram", "group", "-100"),
        KeyParts("discord", "group", "1", "t"),
        KeyParts("discord", "group", "1", None, "u"),
        KeyParts("discord", "group", "1", "t", "u"),
        KeyParts("matrix", "group", "!r:s", "%t", "%p"),
    ],
)
def test_disambiguate_gives_a_different_key_that_parses_back_tagged(parts):
    tagged = disambiguate(parts)
    key = format_session_key(tagged)
    assert key != format_session_key(parts)
    parsed = parse_session_key(key)
    assert parsed["tagged"] is not None
    assert _parts_of(parsed) == tagged
    assert tagged.same_conversation(parts)


def test_disambiguate_leaves_the_shared_dm_sink_alone():
    sink = KeyParts("telegram", "dm")
    assert disambiguate(sink) == sink


def test_group_without_chat_id_keeps_the_chat_position():
    # Otherwise the thread would slide into the chat id's place and pass for group "t".
    headless = build_session_key(_source("discord", "", "group", thread_id="t"))
    group_t = build_session_key(_source("discord", "t", "group"))
    assert headless == "agent:main:discord:group::t"
    assert headless != group_t


# --- properties -------------------------------------------------------------------------------

# Text that stresses escaping: separators, escape look-alikes, controls, confusables, tag prefixes.
_hostile_text = st.lists(
    st.one_of(
        st.sampled_from(
            [":", "%", "%3A", "%t", "%p", "%c", "\x00", "\n", "\x7f", "\x85", "\uff1a"]
        ),
        st.characters(codec="utf-8"),
    ),
    max_size=20,
).map("".join)
_platforms = st.sampled_from(["telegram", "discord", "slack", "whatsapp", "matrix", "signal"])
_group_types = st.sampled_from(["group", "channel", "thread"])

_dm_parts = st.builds(
    KeyParts,
    platform=_platforms,
    chat_type=st.just("dm"),
    chat_id=_hostile_text,
    thread_id=st.none() | _hostile_text,
)
_full_group_parts = st.builds(
    KeyParts,
    platform=_platforms,
    chat_type=_group_types,
    chat_id=_hostile_text,
    thread_id=_hostile_text,
    participant_id=_hostile_text,
)
_unambiguous_parts = _dm_parts | _full_group_parts


@given(_unambiguous_parts)
def test_parse_recovers_every_component_of_unambiguous_keys(parts):
    key = format_session_key(parts)
    assert _parts_of(parse_session_key(key)) == parts


@given(st.lists(_unambiguous_parts, min_size=2, max_size=8, unique=True))
def test_format_session_key_is_injective(parts_list):
    keys = {format_session_key(p) for p in parts_list}
    assert len(keys) == len(parts_list)


@given(_hostile_text, _hostile_text, _hostile_text)
def test_moving_text_between_components_changes_the_key(a, b, c):
    one = KeyParts("matrix", "group", a + ":" + b, c, "u")
    two = KeyParts("matrix", "group", a, b + ":" + c, "u")
    assert format_session_key(one) != format_session_key(two)


# Few distinct ids so that different sources often map to the same key.
_small_ids = st.sampled_from(["", "x", "y", "x:y", "%", "%3A"])


@st.composite
def _sources(draw, ids=_small_ids):
    return SessionSource(
        Platform(draw(_platforms)),
        draw(ids),
        chat_type=draw(st.sampled_from(list(ChatType))),
        user_id=draw(ids),
        user_id_alt=draw(st.none() | ids),
        thread_id=draw(ids),
    )


@given(_sources(), _sources(), st.booleans(), st.booleans())
@settings(max_examples=300)
def test_different_conversations_never_share_a_key_after_disambiguate(a, b, per_group, per_thr):
    options = {"group_sessions_per_user": per_group, "thread_sessions_per_user": per_thr}
    first, newcomer = build_key_parts(a, **options), build_key_parts(b, **options)
    first_key = format_session_key(first)
    if first.same_conversation(newcomer):
        assert format_session_key(newcomer) == first_key
        return
    if format_session_key(newcomer) == first_key:
        # What the store does on a collision: the newcomer gets the tagged variant.
        newcomer = disambiguate(newcomer)
        assert newcomer.tagged is not None
    key = format_session_key(newcomer)
    assert key != first_key
    parsed = _parts_of(parse_session_key(key))
    assert format_session_key(parsed) == key
    if newcomer.tagged:
        assert parsed == newcomer


@given(_sources())
def test_a_disambiguated_key_always_parses_back_to_its_own_parts(source):
    parts = build_key_parts(source)
    tagged = disambiguate(parts)
    assert _parts_of(parse_session_key(format_session_key(tagged))) == tagged


_key_like = st.builds(
    ":".join,
    st.lists(
        st.one_of(
            st.sampled_from(["agent", "main", "telegram", "dm", "group", "%t", "%p", "%c", ""]),
            _hostile_text,
        ),
        max_size=9,
    ),
)


@given(st.one_of(st.text(), _key_like, st.builds(lambda s: "agent:main:" + s, st.text())))
@settings(max_examples=300)
def test_parse_raises_only_value_error_and_round_trips_what_it_accepts(text):
    try:
        parsed = parse_session_key(text)
    except ValueError:
        return
    assert format_session_key(_parts_of(parsed)) == text


_very_hostile = st.one_of(
    _hostile_text,
    st.integers(min_value=1000, max_value=2000).map(lambda n: ":%\n" * n),
    st.sampled_from(["\uff1a", "\u2028", "\ufeff", "\U0001f600", " ", "."]),
)


@given(
    platform=_platforms,
    chat_type=st.sampled_from(list(ChatType)),
    chat_id=_very_hostile,
    user_id=st.none() | _very_hostile,
    user_id_alt=st.none() | _very_hostile,
    thread_id=st.none() | _very_hostile,
    group_per_user=st.booleans(),
    thread_per_user=st.booleans(),
)
def test_hostile_ids_never_crash_the_builder(
    platform, chat_type, chat_id, user_id, user_id_alt, thread_id, group_per_user, thread_per_user
):
    source = SessionSource(
        Platform(platform),
        chat_id,
        chat_type=chat_type,
        user_id=user_id,
        user_id_alt=user_id_alt,
        thread_id=thread_id,
    )
    parts = build_key_parts(
        source, group_sessions_per_user=group_per_user, thread_sessions_per_user=thread_per_user
    )
    key = format_session_key(parts)
    assert key == build_session_key(source, group_per_user, thread_per_user)
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in key)
    assert key.count(":") <= 6
    assert _parts_of(parse_session_key(format_session_key(disambiguate(parts)))) == disambiguate(
        parts
    )


@pytest.mark.parametrize(
    ("key", "why"),
    [("", "1 to 4096"), ("k" * 4097, "1 to 4096"), ("a\nb", "control"), ("a\x85b", "control")],
)
def test_check_key_text_refuses_what_no_stored_key_can_hold(key, why):
    with pytest.raises(InvalidSessionKeyError, match=why):
        check_key_text(key)


def test_check_key_text_passes_legacy_keys_that_do_not_parse():
    assert check_key_text("legacy key with spaces") == "legacy key with spaces"
    assert check_key_text("k" * 4096) == "k" * 4096
