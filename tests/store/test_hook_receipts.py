"""Delivery ids of inbound webhooks on every backend: a take is unique per route and id, a
take with no turn recorded is given back or, once abandoned, taken again, and a purge
forgets only the receipts older than what it keeps."""

from __future__ import annotations

from datetime import timedelta

from sessiongate.store.hook_receipts import ABANDONED, HookReceiptStore


def test_a_delivery_id_is_taken_once_per_route(store):
    receipts = HookReceiptStore(store)
    assert receipts.take("gh", "d1")[0]
    receipts.accepted("gh", "d1", turn_id=7, session_key="k")
    ours, again = receipts.take("gh", "d1")
    assert not ours
    assert (again.turn_id, again.session_key) == (7, "k")
    assert receipts.take("other", "d1")[0]  # another route's id space


def test_a_take_given_back_is_taken_again(store):
    receipts = HookReceiptStore(store)
    assert receipts.take("gh", "d1")[0]
    receipts.give_back("gh", "d1")
    assert receipts.get("gh", "d1") is None
    assert receipts.take("gh", "d1")[0]


def test_a_take_with_no_turn_is_a_duplicate_until_it_is_abandoned(store, clock):
    receipts = HookReceiptStore(store)
    ours, first = receipts.take("gh", "d1")
    assert ours
    assert not receipts.take("gh", "d1")[0]  # still being handed over
    clock.advance(ABANDONED.total_seconds())
    ours, retaken = receipts.take("gh", "d1")  # a crash cut it short: taken again
    assert ours
    assert retaken.received_at == first.received_at  # so its turn has the same message id
    receipts.accepted("gh", "d1", turn_id=3, session_key=None)
    assert not receipts.take("gh", "d1")[0]


def test_a_purge_forgets_only_receipts_older_than_it_keeps(store, clock):
    receipts = HookReceiptStore(store)
    receipts.take("gh", "old")
    receipts.accepted("gh", "old", turn_id=1, session_key=None)
    clock.advance(3600)
    receipts.take("gh", "new")
    receipts.accepted("gh", "new", turn_id=2, session_key=None)
    clock.advance(24 * 3600 - 1800)
    assert receipts.purge(timedelta(hours=24)) == 1
    assert receipts.get("gh", "old") is None
    kept = receipts.get("gh", "new")
    assert kept is not None
    assert kept.turn_id == 2
