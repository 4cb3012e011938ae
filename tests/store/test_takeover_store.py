"""Lanes an operator took over (`TakeoverStore`), on every backend: one row per key with who,
since when and the auto-resume deadline, a second takeover changing nothing, hand-back
deleting it, the state surviving a reopen, and each change told after its commit."""

from __future__ import annotations

from datetime import timedelta

from sessiongate import Platform, SessionSource
from sessiongate.core.erasure import Subject
from sessiongate.store.changes import ChangeKind
from sessiongate.store.takeover import TakeoverStore

KEY = "agent:main:telegram:dm:42"


def test_a_takeover_round_trip(make_store, clock) -> None:
    store = make_store()
    told: list = []
    store.add_change_listener(told.extend)
    book = TakeoverStore(store)
    assert book.get(KEY) is None
    taken, new = book.start(KEY, by="telegram:7", resume_after_minutes=30)
    assert new
    assert (taken.taken_by, taken.since) == ("telegram:7", clock.now())
    assert taken.resume_at == clock.now() + timedelta(minutes=30)
    assert book.get(KEY) == taken
    # A second takeover keeps the first one's operator and deadline.
    clock.advance(60)
    again, new = book.start(KEY, by="operator", resume_after_minutes=5)
    assert (again, new) == (taken, False)
    assert [(c.kind, c.by) for c in told] == [(ChangeKind.SESSION_TAKEOVER, "telegram:7")]
    # It survives a reopen of the database.
    store.close()
    book = TakeoverStore(make_store())
    assert book.get(KEY) == taken
    assert book.all() == [taken]
    assert book.due(clock.now()) == []
    clock.advance(30 * 60)
    assert book.due(clock.now()) == [taken]


def test_hand_back_deletes_the_row_once(make_store) -> None:
    store = make_store()
    book = TakeoverStore(store)
    told: list = []
    store.add_change_listener(told.extend)
    taken, _ = book.start(KEY, by="operator")
    assert taken.resume_at is None  # 0 minutes: only by hand
    book.start("agent:main:telegram:dm:43", by="operator")
    assert book.end(KEY, by="operator", reason="handback") == taken
    assert book.end(KEY, by="operator", reason="handback") is None
    assert book.get(KEY) is None
    assert [t.session_key for t in book.all()] == ["agent:main:telegram:dm:43"]
    handback = [c for c in told if c.kind is ChangeKind.SESSION_HANDBACK]
    assert [(c.session_key, c.by, c.reason) for c in handback] == [(KEY, "operator", "handback")]
    assert handback[0].as_data() == {"session_key": KEY, "reason": "handback", "by": "operator"}


def test_erasure_of_the_person_drops_their_lanes_takeover(make_store) -> None:
    store = make_store()
    source = SessionSource(platform=Platform.TELEGRAM, chat_id="42", user_id="42")
    key = store.get_or_create_session(source).session_key
    book = TakeoverStore(store)
    book.start(key, by="operator")
    book.start("agent:main:telegram:dm:43", by="operator")
    store.forget_user(Subject("telegram", "42"))
    assert book.get(key) is None
    assert [t.session_key for t in book.all()] == ["agent:main:telegram:dm:43"]
