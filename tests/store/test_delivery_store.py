"""The deliveries table on every backend (`store/deliveries.py`): one row per outbound
message, pending -> sent | failed -> ... -> dead, a reply's turn delivered only with it."""

from __future__ import annotations

from datetime import timedelta

from sessiongate import SessionSource
from sessiongate.store.changes import ChangeKind
from sessiongate.store.deliveries import (
    STALE_REASON,
    UNDELIVERED,
    DeliveryKind,
    DeliveryStore,
    backoff_seconds,
    platform_reason,
)
from sessiongate.store.lanes import Inbound, InboxKind, LaneStore
from sessiongate.store.records import DeliveryStatus, TurnState

_SOURCE = SessionSource(platform="telegram", chat_id="c1", user_id="u1")


def _replied_turn(store) -> int:
    lanes = LaneStore(store)
    entry = store.get_or_create_session(_SOURCE)
    lanes.accept(
        Inbound(_SOURCE, "hello"),
        session_key=entry.session_key,
        session_id=entry.session_id,
        kind=InboxKind.SLOT,
        cap=32,
    )
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    assert claim is not None
    lanes.commit_reply(claim, [{"role": "user", "content": "hello"}], reply="hi")
    return claim.turn.id


def test_a_reply_has_one_row_and_its_turn_is_delivered_only_when_it_is_sent(make_store):
    store = make_store()
    rows = DeliveryStore(store)
    turn_id = _replied_turn(store)
    first = rows.open(DeliveryKind.REPLY, _SOURCE, "hi", turn_id=turn_id, session_key="k")
    again = rows.open(DeliveryKind.REPLY, _SOURCE, "hi", turn_id=turn_id, session_key="k")
    assert first.id == again.id
    assert (first.status, first.attempts, first.source) == (DeliveryStatus.PENDING, 0, _SOURCE)
    assert rows.of_turn(turn_id) == first
    lanes = LaneStore(store)
    assert lanes.get_turn(turn_id).state is TurnState.REPLIED
    rows.mark_sent(first, "m-42")
    sent = rows.get(first.id)
    assert (sent.status, sent.message_id, sent.attempts) == (DeliveryStatus.SENT, "m-42", 1)
    assert lanes.get_turn(turn_id).state is TurnState.DELIVERED
    assert rows.reopen(first.id) is None  # a sent message is never sent again


def test_failures_back_off_until_dead_and_a_reopen_makes_it_due_again(make_store, clock):
    store = make_store()
    rows = DeliveryStore(store)
    told: list[object] = []
    store.add_change_listener(told.extend)
    record = rows.open(DeliveryKind.NOTICE, _SOURCE, "note")
    assert [r.id for r in rows.due(clock.now())] == [record.id]
    failed = rows.mark_failed(
        record, "ConnectionError: refused", max_attempts=2, backoff=60, backoff_max=3600
    )
    assert (failed.status, failed.attempts, failed.reason) == (
        DeliveryStatus.FAILED,
        1,
        "ConnectionError: refused",
    )
    assert failed.next_at == clock.now() + timedelta(seconds=60)
    assert rows.due(clock.now()) == []
    clock.advance(60)
    assert [r.id for r in rows.due(clock.now())] == [record.id]
    dead = rows.mark_failed(failed, "still refused", max_attempts=2, backoff=60, backoff_max=3600)
    assert (dead.status, dead.attempts) == (DeliveryStatus.DEAD, 2)
    clock.advance(10**6)
    assert rows.due(clock.now()) == []  # dead is never tried by itself again
    assert [r.id for r in rows.find(UNDELIVERED)] == [record.id]
    assert rows.counts() == {"dead": 1}
    feed = [c for c in told if getattr(c, "kind", None) is ChangeKind.DELIVERY_FAILED]
    assert [(c.status, c.delivery_id) for c in feed] == [("failed", record.id), ("dead", record.id)]
    reopened = rows.reopen(record.id)
    assert (reopened.status, reopened.attempts, reopened.reason) == ("pending", 0, None)
    assert [r.id for r in rows.due(clock.now())] == [record.id]
    assert rows.find(UNDELIVERED) == []


def test_a_stale_message_is_dead_with_its_reason_and_listed_newest_first(make_store):
    store = make_store()
    rows = DeliveryStore(store)
    old = rows.open(DeliveryKind.NOTICE, _SOURCE, "old")
    new = rows.open(DeliveryKind.JOB, _SOURCE, "new", first_try_after=30)
    assert rows.mark_dead(old, STALE_REASON).reason == "stale"
    assert [r.id for r in rows.find()] == [new.id, old.id]
    assert [r.id for r in rows.find([DeliveryStatus.PENDING])] == [new.id]
    assert rows.get(new.id).next_at > rows.get(new.id).created_at
    assert rows.get(999_999) is None
    assert rows.reopen(999_999) is None


def test_backoff_doubles_to_its_cap_and_a_reason_never_carries_a_url_path():
    assert [backoff_seconds(n, 60, 300) for n in (1, 2, 3, 4, 50)] == [60, 120, 240, 300, 300]
    reason = platform_reason(RuntimeError("POST https://api.telegram.org/bot123:SECRET/send 502"))
    assert "SECRET" not in reason
    assert reason.startswith("RuntimeError: POST https://api.telegram.org/")
    assert len(platform_reason(RuntimeError("x" * 5000))) == 500


def test_the_journal_prune_forgets_sent_deliveries_and_keeps_the_failed(make_store, clock):
    store = make_store()
    rows = DeliveryStore(store)
    sent = rows.open(DeliveryKind.NOTICE, _SOURCE, "ok")
    rows.mark_sent(sent, None)
    failed = rows.open(DeliveryKind.NOTICE, _SOURCE, "no")
    rows.mark_failed(failed, "refused", max_attempts=1, backoff=1, backoff_max=1)
    clock.advance(10)
    LaneStore(store).prune(clock.now())
    assert [r.id for r in rows.find()] == [failed.id]
