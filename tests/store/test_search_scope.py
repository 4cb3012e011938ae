"""Search scoped to what a caller may see, on every backend: the scope is part of the query,
so better-ranked hits elsewhere never crowd out the caller's own (the index and the scan)."""

from __future__ import annotations

import pytest

from sessiongate import SessionSource


@pytest.fixture
def crowded(make_store):
    """Bob's one hit, his fork's, a look-alike key's, and 60 better-ranked hits in another
    agent's chat."""
    store = make_store(
        agents={"support": {"kind": "echo"}},
        bindings=[{"platform": "telegram", "chat_id": "vip", "agent": "support"}],
    )
    bob = store.get_or_create_session(SessionSource(platform="api", chat_id="bob"))
    bobx = store.get_or_create_session(SessionSource(platform="api", chat_id="bobx"))
    vip = store.get_or_create_session(SessionSource(platform="telegram", chat_id="vip"))
    store.append_messages(bob.session_id, [{"role": "user", "content": "my refund is late"}])
    fork, _ = store.fork_session(bob.session_key)
    store.append_messages(fork.session_id, [{"role": "user", "content": "refund in the fork"}])
    store.append_messages(bobx.session_id, [{"role": "user", "content": "refund refund"}])
    store.append_messages(
        vip.session_id,
        [{"role": "user", "content": "refund refund refund refund"} for _ in range(60)],
    )
    return store, bob, fork


def test_the_callers_tree_is_found_under_sixty_better_hits(crowded):
    store, bob, fork = crowded
    hits, scanned = store.search_detailed("refund", limit=1, tree_of=bob.session_key)
    assert not scanned
    assert len(hits) == 1
    assert hits[0]["session_key"] in {bob.session_key, fork.session_key}
    hits, _ = store.search_detailed("refund", limit=10, tree_of=bob.session_key)
    # His session (the fork copied its message) and the fork; never `bobx`, never vip.
    assert {h["session_key"] for h in hits} == {bob.session_key, fork.session_key}
    assert len(hits) == 3
    # Unscoped, the 60 better-ranked hits fill the page.
    crowd, _ = store.search_detailed("refund", limit=10)
    assert bob.session_key not in {h["session_key"] for h in crowd}


def test_one_agents_sessions_are_found_under_sixty_better_hits(crowded):
    store, bob, fork = crowded
    hits, _ = store.search_detailed("late", limit=3, key_prefix="agent:main:")
    assert {h["session_key"] for h in hits} == {bob.session_key, fork.session_key}
    hits, _ = store.search_detailed("refund", limit=50, key_prefix="agent:main:")
    assert not any(h["session_key"].startswith("agent:support:") for h in hits)
    assert len(hits) == 4  # bob's, his fork's two, bobx's


def test_the_fallback_scan_keeps_the_callers_tree(crowded):
    store, bob, fork = crowded
    with store.database.read() as tx:
        hits = tx.search_scan("refund", 2, tree_of=bob.session_key)
    assert {h["session_key"] for h in hits} <= {bob.session_key, fork.session_key}
    assert len(hits) == 2
