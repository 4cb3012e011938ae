"""Nested store calls are savepoints on every backend: a statement that fails inside one
raises there, its writes (and only its writes) roll back, and the outer transaction goes on.

On PostgreSQL the transaction runs in pipeline mode, where a write whose result is never read
is answered only with a later statement; these tests pin that its error still arrives inside
the savepoint that sent it, not in whatever statement happens to come next."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest

from sessiongate import SessionSource, SessionStore
from sessiongate.errors import ConflictError, StoreCorruptError


def _two_routes(store: SessionStore):
    first = store.get_or_create_session(SessionSource(platform="telegram", chat_id="1"))
    second = store.get_or_create_session(SessionSource(platform="telegram", chat_id="2"))
    with store.database.transaction() as tx:
        tx.put_route(dataclasses.replace(first, label="taken"))
    return first, second


def _take_label(store: SessionStore, entry, *, meta: str | None = None) -> None:
    """A store call of its own (a savepoint when nested): the label is another route's, so
    the unique index refuses the write, whose result nobody reads."""
    with store.database.transaction() as tx:
        if meta is not None:
            tx.set_meta(meta, "2")
        tx.upsert_route(dataclasses.replace(entry, label="taken"), None)


def _metas(db) -> tuple[str | None, ...]:
    with db.read() as tx:
        return tuple(tx.get_meta(name) for name in ("before", "inside", "after"))


def test_a_failed_write_raises_inside_its_savepoint_and_only_it_rolls_back(store):
    _, second = _two_routes(store)
    db = store.database
    with db.transaction() as tx:
        tx.set_meta("before", "1")
        with pytest.raises(ConflictError):
            _take_label(store, second, meta="inside")
        tx.set_meta("after", "3")
    assert _metas(db) == ("1", None, "3")
    with db.read() as tx:
        assert tx.get_route(second.session_key).label is None


def test_an_error_caught_in_the_outer_transaction_does_not_leak_into_the_next_call(store):
    first, second = _two_routes(store)
    db = store.database
    with db.transaction() as tx:
        with contextlib.suppress(ConflictError):
            _take_label(store, second)
        # The next nested call works on a healthy transaction and reads its own writes.
        with db.transaction() as inner:
            inner.set_meta("next", "ok")
            assert inner.get_meta("next") == "ok"
        assert tx.get_route(first.session_key).label == "taken"
    with db.read() as tx:
        assert tx.get_meta("next") == "ok"


def test_a_failed_write_in_the_outer_transaction_rolls_all_of_it_back(store):
    _, second = _two_routes(store)
    db = store.database
    with pytest.raises(ConflictError):
        _take_label(store, second, meta="lost")
    with db.read() as tx:
        assert tx.get_meta("lost") is None
        assert tx.get_route(second.session_key).label is None
    # And the store works on afterwards.
    with db.transaction() as tx:
        tx.set_meta("kept", "1")
    with db.read() as tx:
        assert tx.get_meta("kept") == "1"


def test_many_nested_calls_in_one_transaction_keep_their_own_rollbacks(store):
    """Hundreds of nested calls (a bulk import's shape), among them failures caught by the
    caller: each failure takes back only its own call, at any depth."""
    _, second = _two_routes(store)
    db = store.database
    with db.transaction():
        for i in range(300):
            with db.transaction() as inner:
                inner.set_meta(f"k{i}", str(i))
                if i % 50 == 7:
                    with contextlib.suppress(ConflictError):
                        _take_label(store, second, meta=f"lost{i}")
            if i % 100 == 3:
                with contextlib.suppress(ConflictError):
                    _take_label(store, second, meta=f"lost-outer{i}")
    with db.read() as tx:
        assert [tx.get_meta(f"k{i}") for i in range(300)] == [str(i) for i in range(300)]
        assert all(tx.get_meta(f"lost{i}") is None for i in range(7, 300, 50))
        assert all(tx.get_meta(f"lost-outer{i}") is None for i in range(3, 300, 100))
        assert tx.get_route(second.session_key).label is None


# A group opened with `savepoints=False` (the gateway's accepts) takes no savepoints for the
# calls inside it: one that fails having written can then not be undone alone.


def test_without_savepoints_a_failed_call_that_was_passed_over_commits_nothing(store):
    _, second = _two_routes(store)
    db = store.database

    def pass_over_a_failure() -> None:
        with db.transaction(savepoints=False) as tx:
            tx.set_meta("before", "1")
            with contextlib.suppress(ConflictError):
                _take_label(store, second, meta="inside")  # writes, then fails
            tx.set_meta("after", "3")

    # On PostgreSQL a write whose result nobody reads is answered later, in pipeline mode:
    # without a savepoint to sync it, its own error can surface at the commit instead.
    with pytest.raises((StoreCorruptError, ConflictError)):
        pass_over_a_failure()
    assert _metas(db) == (None, None, None)
    with db.read() as tx:
        assert tx.get_route(second.session_key).label is None
    with db.transaction() as tx:  # and the store works on afterwards
        tx.set_meta("kept", "1")
    with db.read() as tx:
        assert tx.get_meta("kept") == "1"


def test_without_savepoints_a_savepoint_still_rolls_back_only_its_own_call(store):
    _, second = _two_routes(store)
    db = store.database
    with db.transaction(savepoints=False) as tx:
        tx.set_meta("before", "1")
        with pytest.raises(ConflictError), db.savepoint():
            _take_label(store, second, meta="inside")
        tx.set_meta("after", "3")
    assert _metas(db) == ("1", None, "3")


def test_a_group_without_savepoints_commits_a_new_conversation_with_its_first_turn(store):
    source = SessionSource(platform="api", chat_id="new")
    with store.atomic(savepoints=False):
        entry = store.get_or_create_session(source)
        store.append_messages(entry.session_id, [{"role": "user", "content": "hi"}])
    assert [m["content"] for m in store.load_transcript(entry.session_id)] == ["hi"]

    # An uncaught failure takes all of it back: the conversation too.
    def fail_after_the_first_turn() -> None:
        with store.atomic(savepoints=False):
            entry = store.get_or_create_session(SessionSource(platform="api", chat_id="gone"))
            store.append_messages(entry.session_id, [{"role": "user", "content": "hi"}])
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        fail_after_the_first_turn()
    assert [e.session_key for e in store.list_sessions()] == [entry.session_key]
