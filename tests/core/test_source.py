"""`SessionSource`: the frozen record of where a message came from (spec §1)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource

SPEC_FIELDS = [
    "platform",
    "chat_id",
    "chat_name",
    "chat_type",
    "user_id",
    "user_name",
    "thread_id",
    "chat_topic",
    "user_id_alt",
    "chat_id_alt",
    "is_bot",
    "guild_id",
    "parent_chat_id",
    "message_id",
    "role_authorized",
]


def _full_source() -> SessionSource:
    return SessionSource(
        platform=Platform.DISCORD,
        chat_id="123",
        chat_name="General",
        chat_type=ChatType.GROUP,
        user_id="42",
        user_name="Alice",
        thread_id="777",
        chat_topic="talk",
        user_id_alt="alt-42",
        chat_id_alt="alt-123",
        is_bot=True,
        guild_id="g1",
        parent_chat_id="p1",
        message_id="m1",
        role_authorized=True,
    )


def test_has_the_fifteen_spec_fields_in_order():
    assert [f.name for f in dataclasses.fields(SessionSource)] == SPEC_FIELDS


def test_is_frozen():
    source = SessionSource(Platform.TELEGRAM, "1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        source.chat_id = "2"  # type: ignore[misc]


def test_missing_optionals_take_their_defaults():
    source = SessionSource(Platform.TELEGRAM, "1")
    assert source.chat_type is ChatType.DM
    assert source.is_bot is False
    assert source.role_authorized is False
    for name in SPEC_FIELDS:
        if name not in {"platform", "chat_id", "chat_type", "is_bot", "role_authorized"}:
            assert getattr(source, name) is None, name


def test_numeric_ids_become_strings():
    # Some SDKs hand out integer ids; the annotation says str because that is what comes out.
    raw: dict[str, Any] = {"chat_id": -10012345, "user_id": 42, "thread_id": 7, "message_id": 99}
    source = SessionSource(Platform.TELEGRAM, **raw, guild_id=0)  # type: ignore[arg-type]
    assert source.chat_id == "-10012345"
    assert source.user_id == "42"
    assert source.thread_id == "7"
    assert source.message_id == "99"
    assert source.guild_id == "0"


@pytest.mark.parametrize("bad", [1.5, True, ["1"], {"id": 1}])
def test_ids_of_other_types_are_rejected(bad):
    with pytest.raises(ValueError, match="expected text"):
        SessionSource(Platform.TELEGRAM, "1", user_id=bad)


def test_empty_optional_text_is_none():
    assert SessionSource(Platform.TELEGRAM, "1", user_id="").user_id is None


def test_platform_given_as_text_is_normalised():
    assert SessionSource("Telegram", "1").platform == Platform.TELEGRAM  # type: ignore[arg-type]


def test_unknown_platform_raises_value_error():
    with pytest.raises(ValueError, match="unknown platform"):
        SessionSource("myspace", "1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("dm", ChatType.DM),
        ("direct", ChatType.DM),
        ("private", ChatType.DM),
        (" DM ", ChatType.DM),
        (None, ChatType.DM),
        ("group", ChatType.GROUP),
        ("supergroup", ChatType.GROUP),
        ("room", ChatType.GROUP),
        ("Channel", ChatType.CHANNEL),
        ("thread", ChatType.THREAD),
    ],
)
def test_chat_type_aliases(given, expected):
    assert SessionSource(Platform.TELEGRAM, "1", chat_type=given).chat_type is expected


def test_unknown_chat_type_raises_value_error():
    with pytest.raises(ValueError, match="unknown chat type"):
        SessionSource(Platform.TELEGRAM, "1", chat_type="forum")  # type: ignore[arg-type]


def test_participant_prefers_the_stable_alternative_id():
    assert SessionSource(Platform.SIGNAL, "1", user_id="e", user_id_alt="s").participant_id == "s"
    assert SessionSource(Platform.SIGNAL, "1", user_id="e").participant_id == "e"
    assert SessionSource(Platform.SIGNAL, "1").participant_id is None


def test_to_dict_from_dict_round_trip_through_json():
    source = _full_source()
    data = json.loads(json.dumps(source.to_dict()))
    assert data["platform"] == "discord"
    assert data["chat_type"] == "group"
    assert SessionSource.from_dict(data) == source


def test_from_dict_fills_defaults_and_ignores_unknown_keys():
    source = SessionSource.from_dict({"platform": "slack", "future_field": 1, "user_id": None})
    assert source == SessionSource(Platform.SLACK, "")


def test_from_dict_requires_a_platform():
    with pytest.raises(ValueError, match="platform"):
        SessionSource.from_dict({"chat_id": "1"})


@pytest.mark.parametrize("data", [[], "telegram", None])
def test_from_dict_rejects_non_objects(data):
    with pytest.raises(ValueError, match="object"):
        SessionSource.from_dict(data)


def test_from_dict_rejects_non_boolean_flags():
    with pytest.raises(ValueError, match="is_bot"):
        SessionSource.from_dict({"platform": "discord", "chat_id": "1", "is_bot": "yes"})


def test_description_of_a_dm_names_the_person():
    assert SessionSource(Platform.TELEGRAM, "1", user_name="Alice").description == "DM with Alice"
    assert SessionSource(Platform.TELEGRAM, "1", user_id="42").description == "DM with 42"


def test_description_of_a_group():
    source = SessionSource(Platform.TELEGRAM, "-100", chat_type=ChatType.GROUP, chat_name="Team")
    assert source.description == "group: Team"


def test_description_of_a_thread_matches_spec_example():
    source = SessionSource(
        Platform.DISCORD, "1", chat_type=ChatType.GROUP, chat_name="My Group", thread_id="12345"
    )
    assert source.description == "group: My Group, thread: 12345"


def test_description_of_an_unnamed_channel_uses_its_id():
    source = SessionSource(Platform.SLACK, "C1", chat_type=ChatType.CHANNEL)
    assert source.description == "channel: C1"
