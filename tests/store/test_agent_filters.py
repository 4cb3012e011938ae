"""One agent's sessions, on every backend: listings and search (the index and its fallback
scan) keep only the keys of `agent:<id>:`."""

from __future__ import annotations

import pytest

from sessiongate import SessionSource


@pytest.fixture
def two_agents(make_store):
    store = make_store(
        agents={"support": {"kind": "echo"}},
        bindings=[{"platform": "telegram", "chat_id": "vip", "agent": "support"}],
    )
    vip = store.get_or_create_session(SessionSource(platform="telegram", chat_id="vip"))
    other = store.get_or_create_session(SessionSource(platform="telegram", chat_id="other"))
    for entry in (vip, other):
        store.append_messages(entry.session_id, [{"role": "user", "content": "refund please"}])
    return store, vip, other


def test_list_page_keeps_one_agents_sessions(two_agents):
    store, vip, other = two_agents
    assert vip.session_key.startswith("agent:support:")
    assert other.session_key.startswith("agent:main:")
    entries, total = store.list_page(agent="support")
    assert ([e.session_key for e in entries], total) == ([vip.session_key], 1)
    entries, total = store.list_page(agent="main")
    assert ([e.session_key for e in entries], total) == ([other.session_key], 1)
    assert store.list_page(agent="nobody") == ([], 0)
    assert store.list_page()[1] == 2


def test_search_keeps_one_agents_sessions(two_agents):
    store, vip, _ = two_agents
    hits, scanned = store.search_detailed("refund", agent="support")
    assert not scanned
    assert [h["session_key"] for h in hits] == [vip.session_key]
    assert len(store.search_detailed("refund")[0]) == 2
    assert store.search_detailed("refund", agent="nobody")[0] == []


def test_the_fallback_scan_keeps_one_agents_sessions(two_agents):
    store, vip, _ = two_agents
    with store.database.read() as tx:
        hits = tx.search_scan("refund", 10, key_prefix="agent:support:")
        everyone = tx.search_scan("refund", 10)
    assert [h["session_key"] for h in hits] == [vip.session_key]
    assert len(everyone) == 2
