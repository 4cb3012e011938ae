"""The kept model contexts (`store/kept_contexts.py`): whatever happens to a transcript between
two reads, the kept read gives exactly the context a full read and build gives."""

from __future__ import annotations

import random

import pytest

from sessiongate import SessionSource
from sessiongate.core.transcript import ModelContext
from sessiongate.store.kept_contexts import Kept, KeptContexts
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


def _kept(entries):
    events = [{"id": n, "type": "message", "role": "user", "content": "x"} for n in range(entries)]
    return Kept(entries - 1, entries, events, ModelContext())


def test_what_is_kept_is_bounded_by_entries_and_by_sessions():
    kept = KeptContexts(sessions=3, entries=10)
    kept.put("a", _kept(4))
    kept.put("b", _kept(4))
    kept.put("c", _kept(4))  # 12 entries: the least recently put goes
    assert (kept.get("a"), len(kept), kept.entries) == (None, 2, 8)
    kept.put("b", _kept(6))  # b again, longer: it replaces itself, and 10 fit
    assert (len(kept), kept.entries) == (2, 10)
    kept.put("d", _kept(1))  # three sessions, 11 entries: c goes, b stays
    assert (kept.get("c"), kept.get("b") is not None, kept.entries) == (None, True, 7)
    kept.put("e", _kept(0))
    kept.put("f", _kept(0))  # four sessions: b, the oldest, goes
    assert (kept.get("b"), len(kept), kept.entries) == (None, 3, 1)
    kept.drop("d")
    kept.drop("d")
    assert (len(kept), kept.entries) == (2, 0)
    kept.clear()
    assert (len(kept), kept.entries) == (0, 0)


def test_a_thousand_short_conversations_are_all_kept(make_store):
    store = make_store()
    sessions = []
    for n in range(1000):
        source = SessionSource(platform="telegram", chat_id=f"short-{n}")
        session_id = store.get_or_create_session(source).session_id
        store.append_messages(session_id, [{"role": "user", "content": f"hi {n}"}])
        _short(store, session_id)
        sessions.append(session_id)
    assert all(store.kept_context_at(session_id) is not None for session_id in sessions)
