"""The kept model contexts (`store/kept_contexts.py`): whatever happens to a transcript between
two reads, the kept read gives exactly the context a full read and build gives."""

from __future__ import annotations

import random

import pytest

from sessiongate import SessionSource
from sessiongate.store.tree import INLINE_CONTEXT_ENTRIES

SOURCE = SessionSource(platform="telegram", chat_id="kept")
_EXCLUDED = {"exclude_from_context": True}


def _short(store, session_id):
    context = store.short_model_context(session_id, INLINE_CONTEXT_ENTRIES)
    assert context is not None
    return context


def _same_as_a_full_build(store, session_id):
    kept = _short(store, session_id)
    full = store.model_context(session_id)
    assert kept.messages == full.messages
    assert (kept.model, kept.provider, kept.thinking_level, kept.boundary_entry_id) == (
        full.model,
        full.provider,
        full.thinking_level,
        full.boundary_entry_id,
    )


def _step(store, rng, session_id, n):
    """One random change of the transcript, of the kinds a gateway makes."""
    roll = rng.random()
    if roll < 0.45:
        store.append_messages(session_id, [{"role": "user", "content": f"u{n}"}])
        store.append_messages(session_id, [{"role": "assistant", "content": f"a{n}"}])
    elif roll < 0.6:
        call = {"id": f"c{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        store.append_messages(
            session_id,
            [
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"c{n}", "content": "result"},
                {"role": "assistant", "content": f"done {n}"},
            ],
        )
    elif roll < 0.7:
        # A call whose result never came (a crash): pairing drops it from the context.
        call = {"id": f"x{n}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        dangling = {"role": "assistant", "content": "", "tool_calls": [call]}
        store.append_messages(session_id, [dangling])
    elif roll < 0.78:
        store.append_entry(session_id, {"type": "model_change", "model": f"m{n}", "provider": "p"})
    elif roll < 0.84:
        compaction = {"type": "compaction", "summary": f"s{n}", "tokens_before": 9}
        store.append_entry(session_id, compaction)
    elif roll < 0.88:
        store.append_messages(
            session_id,
            [{"role": "user", "content": f"hidden {n}", "metadata": _EXCLUDED}],
        )
    else:
        users = [m for m in store.load_events(session_id) if m.get("role") == "user"]
        if users:
            store.rewind_to(session_id, rng.choice(users)["id"])


@pytest.mark.parametrize("seed", range(4))
def test_a_kept_context_always_equals_a_full_build(make_store, seed):
    store = make_store()
    session_id = store.get_or_create_session(SOURCE).session_id
    rng = random.Random(seed)
    for n in range(60):
        _step(store, rng, session_id, n)
        if rng.random() < 0.7:  # not every change is followed by a read
            _same_as_a_full_build(store, session_id)
    _same_as_a_full_build(store, session_id)


def test_what_a_caller_does_to_its_context_does_not_reach_the_kept_one(make_store):
    store = make_store()
    session_id = store.get_or_create_session(SOURCE).session_id
    store.append_messages(session_id, [{"role": "user", "content": "hi"}])
    first = _short(store, session_id)
    first.messages.append({"role": "user", "content": "injected"})
    first.messages[0]["content"] = "changed"
    assert [m["content"] for m in _short(store, session_id).messages] == ["hi"]


def test_another_connection_s_writes_are_seen(make_store, store_dir):
    store = make_store()
    other = make_store()  # a second process on the same database
    session_id = store.get_or_create_session(SOURCE).session_id
    store.append_messages(session_id, [{"role": "user", "content": "one"}])
    assert [m["content"] for m in _short(store, session_id).messages] == ["one"]
    other.append_messages(session_id, [{"role": "assistant", "content": "two"}])
    assert [m["content"] for m in _short(store, session_id).messages] == ["one", "two"]
    users = [m for m in other.load_events(session_id) if m.get("role") == "user"]
    other.rewind_to(session_id, users[0]["id"])
    assert _short(store, session_id).messages == []
