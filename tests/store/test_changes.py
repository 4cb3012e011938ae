"""What the store tells its change listeners: committed changes only, in commit order."""

from __future__ import annotations

import pytest

from sessiongate import SessionSource
from sessiongate.core.platform import Platform
from sessiongate.store.changes import Change, ChangeKind


def listen(store) -> list[Change]:
    told: list[Change] = []
    store.add_change_listener(told.extend)
    return told


def test_a_new_session_and_its_appends_are_told_after_commit(store):
    told = listen(store)
    entry = store.get_or_create_session(SessionSource(platform=Platform.TELEGRAM, chat_id="1"))
    store.append_messages(entry.session_id, [{"role": "user", "content": "hi"}])
    kinds = [c.kind for c in told]
    assert kinds == [ChangeKind.SESSION_CREATED, ChangeKind.TRANSCRIPT_APPENDED]
    assert told[1].session_key == entry.session_key
    assert told[1].entry_type == "message"
    assert told[1].entry_id is not None


def test_a_rolled_back_transaction_tells_nothing(store):
    entry = store.get_or_create_session(SessionSource(platform=Platform.TELEGRAM, chat_id="1"))
    told = listen(store)

    def append_then_fail() -> None:
        with store.database.transaction():
            store.append_messages(entry.session_id, [{"role": "user", "content": "lost"}])
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        append_then_fail()
    assert told == []


def test_a_rolled_back_savepoint_takes_only_its_own_notes(store):
    entry = store.get_or_create_session(SessionSource(platform=Platform.TELEGRAM, chat_id="1"))
    told = listen(store)

    def append_then_fail() -> None:
        with store.database.transaction():
            store.append_messages(entry.session_id, [{"role": "user", "content": "undone"}])
            raise RuntimeError("boom")

    with store.database.transaction():
        store.append_messages(entry.session_id, [{"role": "user", "content": "kept"}])
        with pytest.raises(RuntimeError):
            append_then_fail()
    assert [c.kind for c in told] == [ChangeKind.TRANSCRIPT_APPENDED]


def test_a_failing_listener_does_not_undo_the_write(store):
    def broken(changes):
        raise RuntimeError("listener bug")

    store.add_change_listener(broken)
    told = listen(store)
    entry = store.get_or_create_session(SessionSource(platform=Platform.TELEGRAM, chat_id="1"))
    assert store.get_session(entry.session_key) is not None
    assert [c.kind for c in told] == [ChangeKind.SESSION_CREATED]
    store.remove_change_listener(broken)


def test_delete_and_archive_are_told(store):
    entry = store.get_or_create_session(SessionSource(platform=Platform.TELEGRAM, chat_id="1"))
    told = listen(store)
    store.patch_session(entry.session_key, archived=True, expected_session_id=entry.session_id)
    store.delete_session(entry.session_key)
    kinds = [c.kind for c in told]
    assert ChangeKind.SESSION_ARCHIVED in kinds
    assert kinds[-1] is ChangeKind.SESSION_DELETED


def test_a_turn_is_told_from_its_queue_to_its_finish(store):
    from sessiongate.store.lanes import Inbound, InboxKind, LaneStore

    lanes = LaneStore(store)
    source = SessionSource(platform=Platform.TELEGRAM, chat_id="1")
    entry = store.get_or_create_session(source)
    told = listen(store)
    lanes.accept(
        Inbound(source, "hi"),
        session_key=entry.session_key,
        session_id=entry.session_id,
        kind=InboxKind.SLOT,
        cap=32,
    )
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    assert claim is not None
    lanes.commit_reply(claim, [{"role": "assistant", "content": "hello"}], reply="hello")
    queue = [c.depth for c in told if c.kind is ChangeKind.QUEUE_CHANGED]
    assert queue == [1, 0]
    started = [c for c in told if c.kind is ChangeKind.TURN_STARTED]
    finished = [c for c in told if c.kind is ChangeKind.TURN_FINISHED]
    assert [c.turn_id for c in started] == [claim.turn.id]
    assert [(c.turn_id, c.status) for c in finished] == [(claim.turn.id, "replied")]
    assert ChangeKind.TRANSCRIPT_APPENDED in [c.kind for c in told]
