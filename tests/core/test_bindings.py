"""Bindings (source -> agent id) and agent namespaces in session keys."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, strategies as st

from sessiongate import SessionSource, build_session_key, parse_session_key
from sessiongate.core.bindings import (
    DEFAULT_AGENT,
    agent_for,
    agent_of_key,
    key_prefix_of,
    namespace_of,
)
from sessiongate.core.config import BindingConfig
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType


@dataclass(frozen=True)
class B:
    platform: str
    agent: str
    chat_id: str | None = None
    guild_id: str | None = None
    chat_type: str | None = None


def src(platform=Platform.TELEGRAM, chat_id="1", chat_type=ChatType.DM, guild_id=None):
    return SessionSource(platform=platform, chat_id=chat_id, chat_type=chat_type, guild_id=guild_id)


def test_no_binding_means_main():
    assert agent_for(src(), []) == DEFAULT_AGENT


def test_every_given_field_must_match():
    bindings = [B("telegram", "vip", chat_id="42"), B("discord", "guild", guild_id="g1")]
    assert agent_for(src(chat_id="42"), bindings) == "vip"
    assert agent_for(src(chat_id="43"), bindings) == DEFAULT_AGENT
    discord = src(Platform.DISCORD, "c", ChatType.GROUP, guild_id="g1")
    assert agent_for(discord, bindings) == "guild"
    assert agent_for(src(Platform.DISCORD, "c", ChatType.GROUP, "g2"), bindings) == DEFAULT_AGENT


def test_chat_type_narrows_a_binding():
    bindings = [B("telegram", "groups", chat_type="group"), B("telegram", "rest")]
    assert agent_for(src(chat_type=ChatType.GROUP), bindings) == "groups"
    assert agent_for(src(chat_type=ChatType.DM), bindings) == "rest"


def test_the_config_model_is_a_binding():
    binding = BindingConfig(platform="telegram", chat_id=42, agent="vip")
    assert agent_for(src(chat_id="42"), [binding]) == "vip"


_ids = st.sampled_from(["1", "2", "3"])
_binding = st.builds(
    B,
    platform=st.sampled_from(["telegram", "discord"]),
    agent=st.sampled_from(["a", "b", "c"]),
    chat_id=st.none() | _ids,
    guild_id=st.none() | _ids,
    chat_type=st.none() | st.sampled_from(["dm", "group"]),
)
_source = st.builds(
    src,
    platform=st.sampled_from([Platform.TELEGRAM, Platform.DISCORD]),
    chat_id=_ids,
    chat_type=st.sampled_from([ChatType.DM, ChatType.GROUP]),
    guild_id=st.none() | _ids,
)


def _matches(b: B, s: SessionSource) -> bool:
    return (
        b.platform == str(s.platform)
        and b.chat_id in (None, s.chat_id)
        and b.guild_id in (None, s.guild_id)
        and b.chat_type in (None, str(s.chat_type))
    )


@given(st.lists(_binding, max_size=6), _source)
def test_the_first_matching_binding_wins(bindings, source):
    matching = [b.agent for b in bindings if _matches(b, source)]
    assert agent_for(source, bindings) == (matching[0] if matching else DEFAULT_AGENT)


@given(st.lists(_binding, max_size=6), _source, _binding)
def test_a_binding_appended_never_changes_a_matched_source(bindings, source, extra):
    before = agent_for(source, bindings)
    if any(_matches(b, source) for b in bindings):
        assert agent_for(source, [*bindings, extra]) == before


def test_main_keys_are_byte_identical_to_the_single_agent_keys():
    source = src(chat_id="7")
    assert build_session_key(source) == "agent:main:telegram:dm:7"
    assert build_session_key(source, agent_id="main") == "agent:main:telegram:dm:7"


@given(
    st.from_regex(r"[a-z0-9][a-z0-9_-]{0,31}", fullmatch=True),
    st.text(min_size=1, max_size=20),
)
def test_an_agents_key_parses_back_with_its_namespace(agent_id, chat_id):
    key = build_session_key(src(chat_id=chat_id), agent_id=agent_id)
    assert key.startswith(key_prefix_of(agent_id))
    assert agent_of_key(key) == agent_id
    parts = parse_session_key(key)
    assert parts["namespace"] == namespace_of(agent_id)
    assert parts["chat_id"] == chat_id


@pytest.mark.parametrize("bad", ["", "Main", "a:b", "a%3A", "-x", "x" * 33])
def test_an_invalid_agent_id_is_refused(bad):
    with pytest.raises(ValueError, match="invalid agent id"):
        namespace_of(bad)


@pytest.mark.parametrize("key", ["legacy-key", "agent:", "agent:Main:x", "other:main:x:dm"])
def test_a_key_without_an_agent_namespace_has_no_agent(key):
    assert agent_of_key(key) is None
