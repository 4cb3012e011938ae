"""A turn's outcome written over the route as its claim saw it (`route_seen`, `expect_route`).

Where a read is a round trip (PostgreSQL) the route is not read again: the write is checked at
the server, and a route that changed meanwhile fails the commit whole (`RouteChangedError`),
after which the caller commits again with the route read. Where a read is a call (SQLite) the
route is read as before and the hint changes nothing. Either way the stored result is the
same, which is what these tests hold both backends to.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest

from sessiongate import SessionSource
from sessiongate.errors import RouteChangedError, SessionNotFoundError
from sessiongate.store.lanes import Inbound, InboxKind, LaneStore, TurnState

if TYPE_CHECKING:
    from sessiongate import SessionStore
    from sessiongate.store.lanes import Claim, ReplyStored

SOURCE = SessionSource(platform="telegram", chat_id="c1", user_id="u1", user_name="Ann")
KEY = "agent:main:telegram:dm:c1"
ONE = [{"role": "assistant", "content": "hello"}]
TWO = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


@pytest.fixture
def lanes(store: SessionStore) -> LaneStore:
    return LaneStore(store)


def _claimed(store: SessionStore, lanes: LaneStore) -> Claim:
    entry = store.get_or_create_session(SOURCE)
    with store.atomic():
        _, claim = lanes.accept_and_claim(
            Inbound(SOURCE, "hi"), entry=entry, kind=InboxKind.SLOT, cap=32
        )
    assert claim is not None
    assert claim.entry == entry
    return claim


def _commit(lanes: LaneStore, claim: Claim, messages, refused: list[bool]) -> ReplyStored:
    """As the gateway commits a reply: over the claim's route, then read if that is refused."""
    try:
        stored = lanes.commit_reply(
            claim, messages, reply="hello", input_tokens=7, output_tokens=3, route_seen=claim.entry
        )
    except RouteChangedError:
        refused.append(True)
        # Nothing of the refused commit is stored.
        assert lanes.get_turn(claim.turn.id).state is TurnState.RUNNING
        assert lanes.get_item(claim.item.id) is not None
        return lanes.commit_reply(claim, messages, reply="hello", input_tokens=7, output_tokens=3)
    refused.append(False)
    return stored


@pytest.mark.parametrize("messages", [ONE, TWO], ids=["one-message", "two-messages"])
def test_an_outcome_over_an_unchanged_route_is_stored_as_a_read_would_store_it(
    store, lanes, messages
):
    claim = _claimed(store, lanes)
    refused: list[bool] = []
    stored = _commit(lanes, claim, messages, refused)
    assert refused == [False]
    assert lanes.get_turn(claim.turn.id).state is TurnState.REPLIED
    transcript = store.load_transcript(claim.turn.session_id)
    assert [m["content"] for m in transcript] == [m["content"] for m in messages]
    events = store.load_events(claim.turn.session_id)
    assert stored.entry_ids() == [e["id"] for e in events if e["type"] == "message"]
    entry = store.get_session(KEY)
    assert (entry.input_tokens, entry.output_tokens, entry.total_tokens) == (7, 3, 10)
    assert entry.last_activity_at is not None
    assert entry.session_id == claim.entry.session_id


@pytest.mark.parametrize("messages", [ONE, TWO], ids=["one-message", "two-messages"])
def test_a_route_changed_during_the_turn_is_kept_by_its_outcome(store, lanes, backend, messages):
    claim = _claimed(store, lanes)
    store.set_session_fields(KEY, model_override="gpt-other")
    refused: list[bool] = []
    _commit(lanes, claim, messages, refused)
    assert refused == [backend == "postgres"]
    entry = store.get_session(KEY)
    assert entry.model_override == "gpt-other"
    assert (entry.input_tokens, entry.output_tokens) == (7, 3)
    assert lanes.get_turn(claim.turn.id).state is TurnState.REPLIED
    assert [m["content"] for m in store.load_transcript(claim.turn.session_id)] == [
        m["content"] for m in messages
    ]


def test_an_outcome_after_a_reset_counts_toward_the_new_session(store, lanes, backend):
    claim = _claimed(store, lanes)
    fresh = store.reset_session(KEY)
    assert fresh is not None
    assert fresh.session_id != claim.turn.session_id
    refused: list[bool] = []
    _commit(lanes, claim, ONE, refused)
    assert refused == [backend == "postgres"]
    entry = store.get_session(KEY)
    assert (entry.session_id, entry.input_tokens) == (fresh.session_id, 7)
    # The reply belongs to the session its turn ran in.
    assert [m["content"] for m in store.load_transcript(claim.turn.session_id)] == ["hello"]
    assert store.load_transcript(fresh.session_id) == []


def test_an_outcome_after_the_session_was_deleted_stores_nothing(store, lanes, backend):
    claim = _claimed(store, lanes)
    assert store.delete_session(KEY)
    refused: list[bool] = []
    with pytest.raises(SessionNotFoundError):
        _commit(lanes, claim, ONE, refused)
    assert refused == [True] if backend == "postgres" else refused == []
    assert store.get_session(KEY) is None


def test_a_seen_route_only_read_is_checked_before_the_commit(store, backend):
    seen = store.get_or_create_session(SOURCE)
    store.set_session_fields(KEY, model_override="gpt-other")
    refusal = (
        pytest.raises(RouteChangedError) if backend == "postgres" else contextlib.nullcontext()
    )
    with refusal, store.database.transaction() as tx:
        tx.expect_route(seen)
        assert tx.get_route(KEY) in (seen, store.get_session(KEY))
        tx.add_tombstone("agent:main:telegram:dm:other", reason="test", at=0)
    with store.database.read() as tx:
        written = tx.tombstone_reason("agent:main:telegram:dm:other") is not None
    assert written is (backend != "postgres")


def test_a_savepoint_rolled_back_over_a_seen_route_refuses_the_commit(store, backend):
    seen = store.get_or_create_session(SOURCE)
    refusal = (
        pytest.raises(RouteChangedError) if backend == "postgres" else contextlib.nullcontext()
    )
    with refusal, store.database.transaction() as tx:
        tx.expect_route(seen)
        with contextlib.suppress(LookupError), store.database.savepoint():
            store.record_turn(KEY, input_tokens=5)
            raise LookupError("the caller's own failure, after the write")
        tx.add_tombstone("agent:main:telegram:dm:other", reason="test", at=0)
    with store.database.read() as tx:
        written = tx.tombstone_reason("agent:main:telegram:dm:other") is not None
    # Where the savepoint rolled back a write over the seen route, nothing commits; where the
    # route is read, the hint is no part of it.
    assert written is (backend != "postgres")
    if backend == "postgres":
        assert store.get_session(KEY).input_tokens == 0
