"""Choosing a lane's model and thinking level: overrides plus change entries in one commit."""

from __future__ import annotations

import pytest

from sessiongate import SessionSource
from sessiongate.errors import InvalidEntryError, SessionNotFoundError

SOURCE = SessionSource(platform="telegram", chat_id="c1")


def test_a_model_choice_is_recorded_in_the_row_and_the_transcript(store):
    entry = store.get_or_create_session(SOURCE)
    store.append_messages(entry.session_id, [{"role": "user", "content": "hi"}])
    chosen = store.set_model_choice(entry.session_key, model="gpt-x", provider="openai")
    assert (chosen.model_override, chosen.provider_override) == ("gpt-x", "openai")
    thought = store.set_model_choice(entry.session_key, thinking_level="high")
    assert thought.thinking_level == "high"
    context = store.model_context(entry.session_id)
    assert (context.model, context.provider, context.thinking_level) == ("gpt-x", "openai", "high")
    kinds = [e["type"] for e in store.load_events(entry.session_id)]
    assert kinds == ["message", "model_change", "thinking_level_change"]
    # The same choice again writes nothing.
    store.set_model_choice(entry.session_key, model="gpt-x", thinking_level="high")
    assert len(store.load_events(entry.session_id)) == 3


def test_a_rewind_past_a_change_takes_it_back_in_the_context(store):
    entry = store.get_or_create_session(SOURCE)
    store.append_messages(entry.session_id, [{"role": "user", "content": "one"}])
    store.set_model_choice(entry.session_key, model="gpt-x")
    store.append_messages(entry.session_id, [{"role": "user", "content": "two"}])
    store.rewind_session(entry.session_id)
    assert store.model_context(entry.session_id).model == "gpt-x"
    store.set_model_choice(entry.session_key, model=None)
    assert store.model_context(entry.session_id).model is None
    assert store.get_session(entry.session_key).model_override is None


@pytest.mark.parametrize("field", ["model", "provider", "thinking_level"])
def test_bad_names_are_refused_and_write_nothing(store, field):
    entry = store.get_or_create_session(SOURCE)
    with pytest.raises(InvalidEntryError):
        store.set_model_choice(entry.session_key, **{field: " "})
    with pytest.raises(InvalidEntryError):
        store.set_model_choice(entry.session_key, **{field: "x" * 201})
    assert store.load_events(entry.session_id) == []


def test_an_unknown_key_is_refused(store):
    with pytest.raises(SessionNotFoundError):
        store.set_model_choice("agent:main:telegram:dm:nobody", model="m")
