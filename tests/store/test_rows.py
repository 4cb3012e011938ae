"""Pin, archive, unread, label and delete (store/rows.py)."""

from __future__ import annotations

import gzip
import hashlib
import json
from datetime import timedelta

import pytest

from sessiongate import GatewayConfig, SessionStore
from sessiongate.core.clock import FakeClock
from sessiongate.errors import (
    ConflictError,
    InvalidEntryError,
    SessionArchivedError,
    SessionNotFoundError,
    StaleWriteError,
)
from suite_support import lane, talk


def test_pin_orders_listing_and_archive_clears_pin(store: SessionStore, clock: FakeClock):
    a_key, a_sid = lane(store, "a")
    clock.advance(10)
    b_key, _ = lane(store, "b")
    store.patch_session(a_key, pinned=True)
    rows, total = store.list_page()
    assert [r.session_key for r in rows] == [a_key, b_key]
    assert total == 2
    with pytest.raises(StaleWriteError):
        store.patch_session(a_key, archived=True)
    with pytest.raises(StaleWriteError):
        store.patch_session(a_key, archived=True, expected_session_id="20260101_000000_aaaaaaaa")
    archived = store.patch_session(a_key, archived=True, expected_session_id=a_sid)
    assert archived.archived
    assert not archived.pinned
    again = store.patch_session(a_key, archived=True, expected_session_id="whatever")
    assert again.archived_at == archived.archived_at  # archiving twice is a no-op
    rows, _ = store.list_page()
    assert [r.session_key for r in rows] == [b_key]
    rows, _ = store.list_page(archived=True)
    assert [r.session_key for r in rows] == [a_key]


def test_protected_keys_refuse_archive_and_delete(make_store):
    key = "agent:main:telegram:dm:1"
    store = make_store(protected_session_keys=[key])
    _, sid = lane(store)
    with pytest.raises(ConflictError):
        store.patch_session(key, archived=True, expected_session_id=sid)
    with pytest.raises(ConflictError):
        store.delete_session(key)
    assert store.get_session(key) is not None


def test_unread_contract(store: SessionStore, clock: FakeClock):
    key, _ = lane(store)
    assert not store.get_session(key).unread  # never read is not unread
    marked = store.patch_session(key, unread=True)
    assert marked.unread
    updated_at = marked.updated_at
    clock.advance(5)
    newer = store.patch_session(key, unread=True)
    stale = store.patch_session(
        key, unread=False, expected_marked_unread_at=marked.marked_unread_at
    )
    assert stale.unread
    assert stale.marked_unread_at == newer.marked_unread_at
    read = store.patch_session(key, unread=False, expected_marked_unread_at=newer.marked_unread_at)
    assert not read.unread
    assert read.last_read_at == clock.now()
    assert read.updated_at == updated_at  # acks never bump updated_at
    store.record_turn(key)
    clock.advance(1)
    assert not store.get_session(key).unread  # activity at the read instant is not newer
    clock.advance(1)
    store.record_turn(key)
    assert store.get_session(key).unread


def test_marking_unread_moves_the_marker_strictly_forward(
    store_dir, store, clock: FakeClock, store_url
):
    key, _ = lane(store)
    first = store.patch_session(key, unread=True).marked_unread_at
    # Marked again in the same instant: the marker still moves, by a millisecond.
    second = store.patch_session(key, unread=True).marked_unread_at
    assert second == first + timedelta(milliseconds=1)
    stale = store.patch_session(key, unread=False, expected_marked_unread_at=first)
    assert stale.unread
    assert stale.marked_unread_at == second
    # A clock stepped back (another process's clock, behind ours) still moves it forward.
    behind = FakeClock(clock.now() - timedelta(minutes=5))
    config = GatewayConfig(store={"url": store_url})  # type: ignore[arg-type]
    with SessionStore(store_dir, config, clock=behind) as other:
        third = other.patch_session(key, unread=True).marked_unread_at
    assert third == second + timedelta(milliseconds=1)
    assert store.patch_session(key, unread=False, expected_marked_unread_at=second).unread
    assert not store.patch_session(key, unread=False, expected_marked_unread_at=third).unread


def test_a_read_ack_echoing_milliseconds_is_current(store: SessionStore, clock: FakeClock):
    key, _ = lane(store)
    clock.advance(0.123456)
    marked = store.patch_session(key, unread=True).marked_unread_at
    assert marked is not None
    assert marked.microsecond == 123456
    # What a JavaScript Date gives back: the same instant, to the millisecond.
    echoed = marked.replace(microsecond=123000)
    assert not store.patch_session(key, unread=False, expected_marked_unread_at=echoed).unread
    # A marker one millisecond newer than the echo is still a newer marker.
    clock.advance(0.001)
    newer = store.patch_session(key, unread=True).marked_unread_at
    assert newer is not None
    stale = store.patch_session(key, unread=False, expected_marked_unread_at=echoed)
    assert stale.unread


def test_an_archived_session_cannot_be_pinned(store: SessionStore):
    key, sid = lane(store)
    store.patch_session(key, archived=True, expected_session_id=sid)
    with pytest.raises(SessionArchivedError):
        store.patch_session(key, pinned=True)
    entry = store.get_session(key)
    assert entry.archived
    assert not entry.pinned
    other, other_sid = lane(store, "other")
    with pytest.raises(SessionArchivedError):
        store.patch_session(other, archived=True, expected_session_id=other_sid, pinned=True)
    assert not store.get_session(other).archived
    # Unarchiving and pinning in one patch is fine; unpinning an archived row is a no-op.
    both = store.patch_session(key, archived=False, pinned=True)
    assert both.pinned
    assert not both.archived
    assert not store.patch_session(other, pinned=False).pinned


def test_labels_unique_bounded_and_clearable(store: SessionStore):
    a, _ = lane(store, "a")
    b, _ = lane(store, "b")
    assert store.patch_session(a, label="work").label == "work"
    with pytest.raises(ConflictError):
        store.patch_session(b, label="work")
    for bad in ("", "x" * 513):
        with pytest.raises(InvalidEntryError):
            store.patch_session(b, label=bad)
    assert store.patch_session(a, label=None).label is None
    assert store.patch_session(b, label="work").label == "work"


def test_patch_unknown_key(store: SessionStore):
    with pytest.raises(SessionNotFoundError):
        store.patch_session("agent:main:telegram:dm:none", pinned=True)


def test_delete_writes_archive_blob_then_removes(store: SessionStore, store_dir):
    key, sid = lane(store)
    talk(store, sid, "secret plans")
    assert store.search("plans")
    assert store.delete_session(key)
    assert store.get_session(key) is None
    assert store.load_transcript(sid) == []
    assert store.search("plans") == []
    blob = store_dir / "archive" / f"{sid}.json.gz"
    raw = gzip.decompress(blob.read_bytes())
    assert (
        hashlib.sha256(raw).hexdigest()
        == (store_dir / "archive" / f"{sid}.sha256").read_text().strip()
    )
    data = json.loads(raw)
    assert data["entry"]["session_key"] == key
    assert data["sessions"][0]["events"][0]["content"] == "secret plans"
    assert (blob.stat().st_mode & 0o777) == 0o600
    assert not store.delete_session(key)
