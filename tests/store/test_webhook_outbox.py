"""The outbox of outbound webhook events on every backend: rows are written by the very
transaction whose change they tell (a rolled-back one writes none), and settle to sent or
dead."""

from __future__ import annotations

import json

import pytest

from sessiongate import SessionSource
from sessiongate.store.outbox import OutboxStore

_SOURCE = SessionSource(platform="telegram", chat_id="c1", user_id="u1")


def _wired(make_store, events=("session.created",)):
    store = make_store()
    outbox = OutboxStore(store)
    outbox.subscribe(
        {"http://a.example/h": list(events), "http://b.example/h": ["session.created"]}
    )
    return store, outbox


def test_a_subscribed_change_writes_one_row_per_receiver_in_its_transaction(make_store):
    store, outbox = _wired(make_store)
    entry = store.get_or_create_session(_SOURCE)
    rows = outbox.unsent(10)
    assert sorted(r.target for r in rows) == ["http://a.example/h", "http://b.example/h"]
    body = json.loads(rows[0].body)
    assert body["type"] == "session.created"
    assert body["id"] == rows[0].event_id
    assert body["data"]["session_key"] == entry.session_key
    assert rows[0].event_id != rows[1].event_id


def test_a_rolled_back_transaction_writes_no_event(make_store):
    store, outbox = _wired(make_store)

    def create_then_fail() -> None:
        with store.atomic():
            store.get_or_create_session(_SOURCE)
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        create_then_fail()
    assert outbox.unsent(10) == []


def test_failures_settle_to_dead_and_a_reopen_makes_it_pending(make_store, clock):
    _store, outbox = _wired(make_store)
    _store.get_or_create_session(_SOURCE)
    first = outbox.unsent(10)[0]
    assert outbox.mark_failed(first, "HTTP 500", max_attempts=2, backoff=5, backoff_max=60) == (
        "pending"
    )
    again = outbox.get(first.id)
    assert (again.attempts, again.reason) == (1, "HTTP 500")
    assert again.next_at > clock.now()
    assert outbox.mark_failed(again, "HTTP 502", max_attempts=2, backoff=5, backoff_max=60) == (
        "dead"
    )
    assert [e.id for e in outbox.find(["dead"])] == [first.id]
    assert outbox.reopen(first.id)
    assert not outbox.reopen(first.id)  # pending now: nothing to reopen
    outbox.mark_sent(outbox.get(first.id))
    assert outbox.get(first.id).status == "sent"
