from __future__ import annotations

import json
import os
import sqlite3
import threading
from typing import TYPE_CHECKING

import pytest

from sessiongate import SessionSource, SessionStore
from sessiongate.errors import InvalidEntryError, InvalidSessionIdError, SessionNotFoundError

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.core.clock import FakeClock


def dm(chat_id: str = "42", **kw) -> SessionSource:
    return SessionSource(platform="telegram", chat_id=chat_id, **kw)


def turn(text: str, reply: str = "ok") -> list[dict]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": reply}]


def test_new_key_creates_entry_and_session_row(store: SessionStore):
    entry = store.get_or_create_session(dm())
    assert entry.session_key == "agent:main:telegram:dm:42"
    assert store.has_any_sessions()
    assert store.session_info(entry.session_id)["session_key"] == entry.session_key
    assert entry.session_started_at == entry.created_at


def test_threaded_dms_without_a_chat_id_get_their_own_transcripts(store: SessionStore):
    entries = [
        store.get_or_create_session(dm("", user_id=user, thread_id=thread))
        for user, thread in (("ann", "7"), ("bob", "8"), (None, "7"), (None, "8"))
    ]
    assert [e.session_key for e in entries] == [
        "agent:main:telegram:dm:ann:7",
        "agent:main:telegram:dm:bob:8",
        "agent:main:telegram:dm:7",
        "agent:main:telegram:dm:8",
    ]
    assert len({e.session_id for e in entries}) == 4
    # A DM thread keyed `dm:7` and a DM whose chat id is "7" are two conversations: the
    # newcomer gets a tagged key, never the other's transcript.
    by_chat = store.get_or_create_session(dm("7"))
    assert by_chat.session_key != "agent:main:telegram:dm:7"
    assert by_chat.session_id not in {e.session_id for e in entries}


def test_existing_key_reuses_id_and_bumps_updated_at(store: SessionStore, clock: FakeClock):
    first = store.get_or_create_session(dm())
    clock.advance(5)
    second = store.get_or_create_session(dm())
    assert second.session_id == first.session_id
    assert second.updated_at > first.updated_at


def test_state_persists_across_store_instances(make_store, clock: FakeClock):
    a = make_store()
    entry = a.get_or_create_session(dm())
    a.append_messages(entry.session_id, turn("hello"))
    a.close()
    b = make_store()
    assert b.get_or_create_session(dm()).session_id == entry.session_id
    assert [m["content"] for m in b.load_transcript(entry.session_id)] == ["hello", "ok"]


def test_force_new_starts_a_new_incarnation_with_parent(store: SessionStore):
    old = store.get_or_create_session(dm())
    new = store.get_or_create_session(dm(), force_new=True)
    assert new.session_id != old.session_id
    info = store.session_info(new.session_id)
    assert info["parent_session_id"] == old.session_id
    assert store.session_info(old.session_id)["end_reason"] == "force_new"


def test_suspended_entry_rotates_with_reason(store: SessionStore):
    old = store.get_or_create_session(dm())
    store.append_messages(old.session_id, turn("hi"))
    assert store.suspend_session(old.session_key)
    new = store.get_or_create_session(dm())
    assert new.session_id != old.session_id
    assert new.was_auto_reset
    assert new.auto_reset_reason == "suspended"
    assert new.reset_had_activity
    assert not new.suspended


def test_suspended_beats_resume_pending(store: SessionStore):
    old = store.get_or_create_session(dm())
    store.suspend_session(old.session_key)
    assert not store.mark_resume_pending(old.session_key)  # never overrides suspended
    assert store.get_or_create_session(dm()).session_id != old.session_id


def test_resume_pending_keeps_id_until_cleared(store: SessionStore):
    old = store.get_or_create_session(dm())
    assert store.mark_resume_pending(old.session_key, reason="restart_timeout")
    again = store.get_or_create_session(dm())
    assert again.session_id == old.session_id
    assert again.resume_pending
    assert again.resume_reason == "restart_timeout"
    assert again.last_resume_marked_at is not None
    assert store.clear_resume_pending(old.session_key)
    cleared = store.get_or_create_session(dm())
    # All three fields go, as the reference clears them.
    assert (cleared.resume_pending, cleared.resume_reason, cleared.last_resume_marked_at) == (
        False,
        None,
        None,
    )
    assert not store.clear_resume_pending(old.session_key)


def test_token_counters_belong_to_the_incarnation(store: SessionStore):
    old = store.get_or_create_session(dm())
    store.record_turn(old.session_key, input_tokens=100, output_tokens=10, cost_usd=0.5)
    new = store.reset_session(old.session_key)
    assert (new.input_tokens, new.total_tokens) == (0, 0)
    store.record_turn(old.session_key, input_tokens=7, output_tokens=3)
    back = store.switch_session(old.session_key, old.session_id)
    assert (back.input_tokens, back.output_tokens, back.total_tokens) == (100, 10, 110)
    assert back.estimated_cost_usd == 0.5
    forth = store.switch_session(old.session_key, new.session_id)
    assert (forth.input_tokens, forth.output_tokens, forth.total_tokens) == (7, 3, 10)
    assert store.get_session(old.session_key).input_tokens == 7


def test_unknown_keys_answer_false_or_none(store: SessionStore):
    assert store.reset_session("agent:main:telegram:dm:nobody") is None
    assert not store.suspend_session("agent:main:telegram:dm:nobody")
    assert not store.mark_resume_pending("agent:main:telegram:dm:nobody")
    assert store.switch_session("agent:main:telegram:dm:nobody", "x") is None
    assert store.lookup_by_session_id("20260101_000000_deadbeef") is None
    assert store.load_transcript("20260101_000000_deadbeef") == []
    assert not store.has_any_sessions()  # reads never create


def test_reset_new_session_mode_writes_boundary_and_new_id(store: SessionStore):
    old = store.get_or_create_session(dm())
    store.append_messages(old.session_id, turn("before"))
    store.record_turn(old.session_key, input_tokens=10, output_tokens=5)
    new = store.reset_session(old.session_key, display_name="Fresh")
    assert new is not None
    assert new.session_id != old.session_id
    assert new.is_fresh_reset
    assert new.display_name == "Fresh"
    assert new.input_tokens == 0
    assert new.total_tokens == 0
    events = store.load_events(old.session_id)
    assert events[-1]["type"] == "reset"
    assert store.session_info(old.session_id)["end_reason"] == "reset"
    assert store.session_info(new.session_id)["parent_session_id"] == old.session_id
    assert store.load_transcript(new.session_id) == []


def test_reset_boundary_mode_keeps_id(make_store):
    store = make_store(reset_mode="boundary")
    old = store.get_or_create_session(dm())
    store.append_messages(old.session_id, turn("before"))
    new = store.reset_session(old.session_key)
    assert new is not None
    assert new.session_id == old.session_id
    assert store.load_events(old.session_id)[-1]["type"] == "reset"


def test_reset_carries_toggles_and_model_choice(store: SessionStore):
    old = store.get_or_create_session(dm())
    store.set_session_fields(old.session_key, model_override="m1", thinking_level="high")
    new = store.reset_session(old.session_key)
    assert new.model_override == "m1"
    assert new.thinking_level == "high"


def test_switch_session_reopens_target(store: SessionStore):
    first = store.get_or_create_session(dm())
    second = store.reset_session(first.session_key)
    switched = store.switch_session(first.session_key, first.session_id)
    assert switched.session_id == first.session_id
    assert store.session_info(first.session_id)["ended_at"] is None
    assert store.session_info(second.session_id)["end_reason"] == "switched"
    assert store.switch_session(first.session_key, "../etc/passwd") is None


def test_suspend_recently_active_marks_only_recent(store: SessionStore, clock: FakeClock):
    old = store.get_or_create_session(dm("1"))
    clock.advance(600)
    recent = store.get_or_create_session(dm("2"))
    suspended = store.get_or_create_session(dm("3"))
    store.suspend_session(suspended.session_key)
    assert store.suspend_recently_active(120) == 1
    by_key = {e.session_key: e for e in store.list_sessions()}
    assert by_key[recent.session_key].resume_reason == "restart_interrupted"
    assert not by_key[old.session_key].resume_pending
    assert not by_key[suspended.session_key].resume_pending
    assert store.suspend_recently_active(120) == 0  # no double marking


def test_prune_keeps_suspended_active_and_recent(make_store, store_dir, clock: FakeClock):
    live_keys: set[str] = set()
    store = SessionStore(
        store_dir, make_store().config, has_active_processes_fn=live_keys.__contains__, clock=clock
    )
    try:
        old = store.get_or_create_session(dm("1"))
        store.append_messages(old.session_id, turn("keep my transcript"))
        susp = store.get_or_create_session(dm("2"))
        store.suspend_session(susp.session_key)
        busy = store.get_or_create_session(dm("3"))
        live_keys.add(busy.session_key)
        clock.advance(10 * 86400)
        fresh = store.get_or_create_session(dm("4"))
        assert store.prune_old_entries(0) == 0
        assert store.prune_old_entries(-1) == 0
        assert store.prune_old_entries(5) == 1
        keys = {e.session_key for e in store.list_sessions()}
        assert keys == {susp.session_key, busy.session_key, fresh.session_key}
        assert store.load_transcript(old.session_id)[0]["content"] == "keep my transcript"
        assert store.has_any_sessions()
    finally:
        store.close()


def test_list_sessions_sorted_and_filtered(store: SessionStore, clock: FakeClock):
    a = store.get_or_create_session(dm("a"))
    clock.advance(3600)
    b = store.get_or_create_session(dm("b"))
    assert [e.session_key for e in store.list_sessions()] == [b.session_key, a.session_key]
    assert [e.session_key for e in store.list_sessions(active_minutes=10)] == [b.session_key]


def test_lookup_by_session_id(store: SessionStore):
    entry = store.get_or_create_session(dm())
    assert store.lookup_by_session_id(entry.session_id).session_key == entry.session_key


def test_concurrent_callers_for_a_new_key_get_one_id(store: SessionStore):
    ids: list[str] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        ids.append(store.get_or_create_session(dm("race")).session_id)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1
    assert len(store.sessions_for_key("agent:main:telegram:dm:race")) == 1


def test_colliding_keys_of_different_conversations_never_merge(store: SessionStore):
    shared_thread = SessionSource(
        platform="discord", chat_id="g", chat_type="group", thread_id="X", user_id="u1"
    )
    user_x = SessionSource(platform="discord", chat_id="g", chat_type="group", user_id="X")
    a = store.get_or_create_session(shared_thread)
    b = store.get_or_create_session(user_x)
    assert a.session_key == "agent:main:discord:group:g:X"
    assert b.session_key != a.session_key
    assert b.session_id != a.session_id
    # Stable: the same sources map to the same lanes again.
    assert store.get_or_create_session(user_x).session_key == b.session_key
    assert store.get_or_create_session(shared_thread).session_key == a.session_key


def test_whatsapp_alias_learned_once_never_flips(store: SessionStore):
    phone = SessionSource(platform="whatsapp", chat_id="15551234567@s.whatsapp.net")
    lid = SessionSource(platform="whatsapp", chat_id="999888@lid")
    a = store.get_or_create_session(phone)
    assert store.learn_identity_alias("whatsapp", "999888@lid", "15551234567") == "15551234567"
    assert store.get_or_create_session(lid).session_id == a.session_id
    # A later, conflicting mapping does not move the alias.
    assert store.learn_identity_alias("whatsapp", "999888@lid", "1777") == "15551234567"
    assert store.get_or_create_session(lid).session_id == a.session_id


def test_resolve_identity_reads_the_learned_alias_without_writing(store: SessionStore):
    assert store.resolve_identity("whatsapp", "US.1349") == "US.1349"
    store.learn_identity_alias("whatsapp", "US.1349", "+1 555 123 4567")
    assert store.resolve_identity("whatsapp", "US.1349") == "15551234567"
    assert store.resolve_identity("whatsapp", "15551234567:3@s.whatsapp.net") == "15551234567"


def test_append_and_tail_read(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    for i in range(30):
        store.append_messages(sid, turn(f"q{i}", f"a{i}"))
    tail = store.load_transcript(sid, limit=3)
    assert [m["content"] for m in tail] == ["a28", "q29", "a29"]
    assert len(store.load_transcript(sid)) == 60
    assert store.load_transcript(sid, limit=0) == []
    assert len(store.load_transcript(sid, limit=100)) == 60
    # A session without messages, and one that does not exist, read as empty.
    empty = store.get_or_create_session(dm("someone-else")).session_id
    assert store.load_transcript(empty, limit=3) == store.load_transcript(empty) == []
    assert store.load_transcript("20260101_000000_deadbeef", limit=3) == []


def test_duplicate_append_is_a_noop(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    msg = {"role": "user", "content": "once", "message_id": "m-1"}
    store.append_to_transcript(sid, msg)
    store.append_to_transcript(sid, msg)
    ids = store.append_messages(sid, turn("t"), idempotency_key="turn-7")
    again = store.append_messages(sid, turn("t"), idempotency_key="turn-7")
    assert all(ids)
    assert again == [None, None]
    assert [m["content"] for m in store.load_transcript(sid)] == ["once", "t", "ok"]


def test_skip_db_writes_nothing(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    store.append_to_transcript(sid, {"role": "user", "content": "x"}, skip_db=True)
    assert store.load_transcript(sid) == []


def test_tool_messages_round_trip(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    msgs = [
        {"role": "user", "content": "use a tool"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "content": "42", "tool_call_id": "c1"},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    store.append_messages(sid, msgs)
    loaded = store.load_transcript(sid)
    assert loaded[1]["tool_calls"] == [call]
    assert loaded[2]["tool_call_id"] == "c1"
    assert loaded[3]["content"] == [{"type": "text", "text": "done"}]
    assert all("timestamp" in m for m in loaded)


def test_invalid_message_changes_nothing(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    with pytest.raises(InvalidEntryError):
        store.append_messages(sid, [{"role": "user", "content": "fine"}, {"role": "wizard"}])
    assert store.load_transcript(sid) == []


def test_append_to_unknown_or_hostile_session_id_raises(store: SessionStore):
    with pytest.raises(SessionNotFoundError):
        store.append_messages("20260101_000000_00000000", turn("x"))
    with pytest.raises(InvalidSessionIdError):
        store.append_messages("../../etc", turn("x"))


@pytest.mark.sqlite_only
def test_one_turn_is_one_transaction(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    statements: list[str] = []
    conn = store.database.conn
    conn.set_trace_callback(statements.append)
    try:
        store.append_messages(sid, [*turn("a"), {"role": "user", "content": "b"}])
    finally:
        conn.set_trace_callback(None)
    assert [s for s in statements if s.startswith("BEGIN")] == ["BEGIN IMMEDIATE"]
    assert sum(s == "COMMIT" for s in statements) == 1
    assert sum(s.startswith("INSERT INTO entries") for s in statements) == 3
    # Begin, the session row (kept from its creation: only checked against other
    # connections' commits), 3 inserts, commit.
    assert len(statements) == 6
    assert statements[1] == "PRAGMA data_version"


_FIRST_TURN = [
    "BEGIN IMMEDIATE",
    "SELECT data, platform,",
    "INSERT INTO sessions",
    "INSERT INTO routes",
    "INSERT INTO entries",
    "INSERT INTO entries",
    "INSERT INTO entries",
    "COMMIT",
]


@pytest.mark.sqlite_only
@pytest.mark.parametrize(
    ("savepoints", "statements"),
    [
        # The append is a savepoint of its own: ten statements.
        (True, [*_FIRST_TURN[:4], "SAVEPOINT sp1", *_FIRST_TURN[4:7], "RELEASE sp1", "COMMIT"]),
        # As the gateway's accept: eight.
        (False, _FIRST_TURN),
    ],
)
def test_a_new_conversation_and_its_first_turn_are_few_statements(
    store: SessionStore, savepoints: bool, statements: list[str]
):
    store.get_or_create_session(dm("earlier"))  # not the connection's first transaction
    traced: list[str] = []
    conn = store.database.conn
    conn.set_trace_callback(traced.append)
    try:
        with store.atomic(savepoints=savepoints):
            sid = store.get_or_create_session(dm()).session_id
            store.append_messages(sid, [*turn("a"), {"role": "user", "content": "b"}])
    finally:
        conn.set_trace_callback(None)
    # Begin, the key's route (none), the session row, the route, 3 inserts, commit: the row
    # the transaction just wrote is not checked against other connections' commits
    # (`PRAGMA data_version`) nor read back.
    assert [s.strip().split(" (")[0][:22] for s in traced] == statements
    assert [m["content"] for m in store.load_transcript(sid)] == ["a", "ok", "b"]


def test_a_conversation_created_in_a_transaction_is_appended_under_its_leaf(make_store):
    """The row a transaction created is used as written; after its commit it is kept like
    any other and dropped when another connection commits."""
    first, second = make_store(), make_store()
    with first.atomic():
        sid = first.get_or_create_session(dm()).session_id
        first.append_messages(sid, turn("one"))
        first.append_messages(sid, turn("two"))
    second.append_messages(sid, turn("three"))
    first.append_messages(sid, turn("four"))
    contents = [m["content"] for m in first.load_transcript(sid)]
    assert contents == ["one", "ok", "two", "ok", "three", "ok", "four", "ok"]
    events = first.load_events(sid)
    assert [e["parent_id"] for e in events[1:]] == [e["id"] for e in events[:-1]]


def test_appends_from_two_stores_on_one_database_chain_in_order(make_store):
    """A session row one store keeps is dropped when another connection commits: each
    append goes under the leaf the other one wrote, never a stale one."""
    first, second = make_store(), make_store()
    sid = first.get_or_create_session(dm()).session_id
    first.append_messages(sid, turn("one"))
    second.append_messages(sid, turn("two"))
    first.append_messages(sid, turn("three"))
    second.append_messages(sid, turn("four"))
    for store in (first, second):
        contents = [m["content"] for m in store.load_transcript(sid)]
        assert contents == ["one", "ok", "two", "ok", "three", "ok", "four", "ok"]
        events = store.load_events(sid)
        assert [e["parent_id"] for e in events[1:]] == [e["id"] for e in events[:-1]]
    first.rewind_session(sid, n=1)
    second.append_messages(sid, turn("five"))
    assert [m["content"] for m in first.load_transcript(sid)][-4:] == ["three", "ok", "five", "ok"]


def test_a_rolled_back_append_leaves_the_next_one_under_the_old_leaf(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    store.append_messages(sid, turn("kept"))

    def change_of_mind() -> None:
        with store.atomic():
            store.append_messages(sid, turn("undone"))
            raise RuntimeError("changed its mind")

    with pytest.raises(RuntimeError):
        change_of_mind()
    store.append_messages(sid, turn("next"))
    assert [m["content"] for m in store.load_transcript(sid)] == ["kept", "ok", "next", "ok"]


def _traced(store: SessionStore, call) -> list[str]:
    statements: list[str] = []
    conn = store.database.conn
    conn.set_trace_callback(statements.append)
    try:
        call()
    finally:
        conn.set_trace_callback(None)
    return [" ".join(s.split()) for s in statements]


@pytest.mark.sqlite_only
def test_creating_a_conversation_is_four_statements(store: SessionStore):
    # A route lookup, the session row under a fresh id (no lookup first), the route row. (The
    # store's very first write also reads `data_version` once, for the rows it keeps.)
    store.get_or_create_session(dm("first"))
    statements = _traced(store, lambda: store.get_or_create_session(dm("new")))
    assert [s.split(" (")[0].split(" WHERE")[0] for s in statements] == [
        "BEGIN IMMEDIATE",
        "SELECT data, platform, chat_type, chat_id, thread_id, participant_id FROM routes",
        "INSERT INTO sessions",
        "INSERT INTO routes",
        "COMMIT",
    ]


@pytest.mark.sqlite_only
def test_a_new_conversations_first_turn_does_not_read_back_its_session_row(store):
    def first_turn() -> None:
        with store.atomic():
            entry = store.get_or_create_session(dm("first"))
            store.append_messages(entry.session_id, turn("hi"))

    statements = _traced(store, first_turn)
    assert not any(s.startswith("SELECT s.sid") for s in statements)
    # The group's first call marks nothing: only the append after it is a savepoint.
    assert [s for s in statements if s.startswith(("BEGIN", "SAVEPOINT", "RELEASE"))] == [
        "BEGIN IMMEDIATE",
        "SAVEPOINT sp1",
        "RELEASE sp1",
    ]
    assert sum(s.startswith("INSERT INTO entries") for s in statements) == 2
    # The next turn reads the row as stored: the appended messages are its leaf.
    _, entry = store.resolve_route(dm("first"))
    assert entry is not None
    store.append_messages(entry.session_id, turn("again"))
    assert [m["content"] for m in store.load_transcript(entry.session_id)] == [
        "hi",
        "ok",
        "again",
        "ok",
    ]


def test_a_conversation_created_in_a_rolled_back_group_is_gone(store: SessionStore):
    """The row a group remembers having created goes with the savepoint that undoes it."""
    created: list = []

    def change_of_mind() -> None:
        with store.atomic():
            created.append(store.get_or_create_session(dm("undone")))
            raise RuntimeError("the caller changed its mind")

    with store.atomic():
        with pytest.raises(RuntimeError):
            change_of_mind()
        entry = created[0]
        with pytest.raises(SessionNotFoundError):
            store.append_messages(entry.session_id, turn("lost"))
        kept = store.get_or_create_session(dm("kept"))
        store.append_messages(kept.session_id, turn("stays"))
    assert store.get_session(entry.session_key) is None
    assert store.session_info(entry.session_id) is None
    assert len(store.load_transcript(kept.session_id)) == 2


@pytest.mark.sqlite_only
def test_a_message_to_a_known_lane_touches_its_route_without_the_session_id(store):
    key = store.get_or_create_session(dm("known")).session_key
    statements = _traced(store, lambda: store.get_or_create_session(dm("known")))
    writes = [s for s in statements if s.startswith(("INSERT", "UPDATE"))]
    # One UPDATE that sets neither the session id nor the key's parts: SQLite leaves the
    # session-id index alone, and nothing is read for the parts.
    assert len(writes) == 1
    assert writes[0].startswith("UPDATE routes SET updated_at")
    assert "session_id =" not in writes[0].split("WHERE")[0]
    # A usage update is a read and the same one UPDATE.
    statements = _traced(store, lambda: store.record_turn(key, input_tokens=3))
    assert [s.split()[0] for s in statements] == ["BEGIN", "SELECT", "UPDATE", "COMMIT"]
    # A new session id on the key (a reset) is still written, index and all.
    entry = store.reset_session(key)
    assert store.get_session(key).session_id == entry.session_id
    assert store.lookup_by_session_id(entry.session_id).session_key == key


def test_rewrite_keeps_old_rows_as_inactive_branch(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    store.append_messages(sid, turn("one") + turn("two"))
    store.rewrite_transcript(sid, turn("one", "better"))
    assert [m["content"] for m in store.load_transcript(sid)] == ["one", "better"]
    every = store.load_events(sid, branch="all")
    # The common prefix ("one") is kept, not copied: four originals plus "better".
    assert len(every) == 5
    assert sum(e["on_path"] for e in every) == 2


def test_rewind_moves_leaf_and_keeps_audit_trail(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    store.append_messages(sid, turn("first"))
    store.append_messages(sid, turn("second"))
    store.append_messages(sid, turn("third"))
    result = store.rewind_session(sid, n=2)
    assert result == {"rewound_count": 4, "turns_undone": 2, "target_text": "second"}
    assert [m["content"] for m in store.load_transcript(sid)] == ["first", "ok"]
    assert len(store.load_events(sid, branch="all")) == 6
    store.append_messages(sid, turn("again"))
    assert [m["content"] for m in store.load_transcript(sid)] == ["first", "ok", "again", "ok"]


def test_rewind_with_nothing_to_undo_returns_zeros(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    assert store.rewind_session(sid) == {"rewound_count": 0, "turns_undone": 0, "target_text": ""}
    assert store.rewind_session("20260101_000000_00000000")["rewound_count"] == 0


def test_rewind_more_turns_than_exist_undoes_all(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    store.append_messages(sid, turn("only"))
    assert store.rewind_session(sid, n=5)["turns_undone"] == 1
    assert store.load_transcript(sid) == []


def test_search_finds_active_messages_only(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    store.append_messages(sid, turn("the purple elephant", "noted"))
    store.append_messages(sid, turn("a green giraffe", "noted"))
    hits = store.search("elephant")
    assert len(hits) == 1
    assert hits[0]["session_id"] == sid
    assert "[elephant]" in hits[0]["snippet"]
    assert set(hits[0]) == {"session_id", "session_key", "role", "snippet", "timestamp"}
    store.rewind_session(sid, n=2)
    assert store.search("elephant") == []


@pytest.mark.parametrize("query", ["NOT", "a OR", '"', "*", "elephant)", "NEAR(", "", "-x"])
def test_search_sanitises_query_syntax(store: SessionStore, query: str):
    sid = store.get_or_create_session(dm()).session_id
    store.append_messages(sid, turn("NOT a problem"))
    assert isinstance(store.search(query), list)


@pytest.mark.sqlite_only
def test_corrupt_search_index_falls_back_to_scan(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    store.append_messages(sid, turn("findable words"))
    assert store.search("findable")
    conn = store.database.conn
    with store.database.transaction():
        conn.execute("DELETE FROM entries_fts_data WHERE id > 1")
    hits, degraded = store.search_detailed("findable")
    assert degraded
    assert hits
    assert hits[0]["session_id"] == sid
    store.append_messages(sid, turn("writes go on"))
    assert store.rebuild_search_index() > 0
    hits, degraded = store.search_detailed("findable")
    assert not degraded
    assert hits


@pytest.mark.sqlite_only
def test_files_are_private(store: SessionStore, store_dir: Path):
    store.get_or_create_session(dm())
    store.flush_mirror()
    assert os.stat(store_dir).st_mode & 0o777 == 0o700
    for name in ("state.db", "sessions.json"):
        assert os.stat(store_dir / name).st_mode & 0o777 == 0o600


@pytest.mark.sqlite_only
def test_pragmas_are_set(store: SessionStore):
    conn = store.database.conn
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] >= 1000


def test_mirror_is_written_with_readme_first(make_store, store_dir: Path):
    store = make_store(mirror_sessions_json=True)
    entry = store.get_or_create_session(dm())
    store.flush_mirror()
    data = json.loads((store_dir / "sessions.json").read_text())
    assert next(iter(data)) == "_README"
    assert data[entry.session_key]["session_id"] == entry.session_id


def test_the_mirror_is_kept_on_sqlite_and_not_on_postgres_unless_asked(
    make_store, store_dir: Path, store_url: str | None
):
    store = make_store()
    store.get_or_create_session(dm())
    store.flush_mirror()
    assert store.keeps_mirror is (store_url is None)
    assert (store_dir / "sessions.json").exists() is (store_url is None)


def test_homes_sharing_a_database_each_skip_their_own_unchanged_mirror(
    tmp_path: Path, clock, store_url: str | None, monkeypatch: pytest.MonkeyPatch
):
    # Two instances on one PostgreSQL, each with its mirror turned on: each one's stamp is its
    # own, so the other's write never makes a start parse its file again.
    from sessiongate import GatewayConfig
    from sessiongate.store import _imports

    config = {"mirror_sessions_json": True, **({"store": {"url": store_url}} if store_url else {})}

    def open_home(name: str) -> SessionStore:
        return SessionStore(tmp_path / name, GatewayConfig(**config), clock=clock)  # type: ignore[arg-type]

    for name in ("a", "b"):
        with open_home(name) as store:
            store.get_or_create_session(dm(name))
            store.flush_mirror()
    parsed: list[Path] = []
    read = _imports.read_sessions_json

    def counted(path: Path, **kwargs: object):
        parsed.append(path)
        return read(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_imports, "read_sessions_json", counted)
    for name in ("a", "b"):
        with open_home(name):
            pass
    assert parsed == []


@pytest.mark.sqlite_only
def test_mirror_key_missing_from_db_is_imported(make_store, store_dir: Path):
    store = make_store()
    entry = store.get_or_create_session(dm())
    store.close()
    os.remove(store_dir / "state.db")
    for extra in ("state.db-wal", "state.db-shm"):
        if (store_dir / extra).exists():
            os.remove(store_dir / extra)
    again = make_store()
    assert again.get_session(entry.session_key).session_id == entry.session_id


@pytest.mark.parametrize(
    "content",
    ["{not json", "[1, 2]", '{"k": {"session_id": "../../etc/passwd"}}', "\x00\x01"],
)
def test_hostile_sessions_json_is_backed_up_never_fatal(make_store, store_dir: Path, content: str):
    store = make_store()
    entry = store.get_or_create_session(dm())
    store.close()
    (store_dir / "sessions.json").write_text(content)
    again = make_store()
    assert again.problems
    assert any(p.name.startswith("sessions.json.bad-") for p in store_dir.iterdir())
    assert again.get_session(entry.session_key).session_id == entry.session_id


def test_close_is_idempotent(store: SessionStore):
    store.close()
    store.close()


@pytest.mark.sqlite_only
def test_corrupt_state_db_refuses_to_open_with_clear_error(make_store, store_dir: Path):
    from sessiongate.errors import StoreCorruptError

    store_dir.mkdir(parents=True)
    (store_dir / "state.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreCorruptError, match="doctor"):
        make_store()


@pytest.mark.sqlite_only
def test_two_connections_see_each_others_writes(make_store, store_dir: Path):
    a = make_store()
    entry = a.get_or_create_session(dm())
    a.append_messages(entry.session_id, turn("from a"))
    conn = sqlite3.connect(store_dir / "state.db")
    try:
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 2
    finally:
        conn.close()


def test_switching_back_reopens_the_closed_window(store: SessionStore):
    first = store.get_or_create_session(dm())
    store.append_messages(first.session_id, turn("remember the blue door"))
    store.reset_session(first.session_key)
    store.switch_session(first.session_key, first.session_id)
    context = store.model_context(first.session_id)
    assert [m["content"] for m in context.messages] == ["remember the blue door", "ok"]
    kinds = [e["type"] for e in store.load_events(first.session_id, branch="all")]
    assert "reset" in kinds  # the boundary stays in the tree as the record


def test_a_drawn_session_id_that_exists_is_drawn_again(store: SessionStore):
    taken = store.get_or_create_session(dm()).session_id
    draws = iter([taken, taken, "20260101_000000_0000beef"])
    with store.database.read() as conn:
        assert conn.unused_session_id(lambda: next(draws)) == "20260101_000000_0000beef"


def test_resolve_route_reads_without_creating(store: SessionStore):
    key, entry = store.resolve_route(dm("new"))
    assert key == "agent:main:telegram:dm:new"
    assert entry is None
    assert not store.has_any_sessions()


@pytest.mark.sqlite_only
def test_the_mirrors_own_last_write_is_not_parsed_again(make_store, store_dir: Path):
    store = make_store()
    entry = store.get_or_create_session(dm())
    store.flush_mirror()
    store.close()
    os.remove(store_dir / "state.db")  # would be re-imported if the file were read
    for extra in ("state.db-wal", "state.db-shm"):
        if (store_dir / extra).exists():
            os.remove(store_dir / extra)
    again = make_store()  # a new database has no stamp: the mirror is imported
    assert again.get_session(entry.session_key) is not None
    again.flush_mirror()
    again.close()
    data = json.loads((store_dir / "sessions.json").read_text())
    data["agent:main:telegram:dm:added-by-hand"] = {
        **data[entry.session_key],
        "session_key": "agent:main:telegram:dm:added-by-hand",
        "session_id": "20260101_000000_abcdef01",
    }
    (store_dir / "sessions.json").write_text(json.dumps(data))
    third = make_store()  # an edited file no longer matches the stamp: it is read
    assert third.get_session("agent:main:telegram:dm:added-by-hand") is not None


@pytest.mark.sqlite_only
def test_an_unchanged_mirror_is_skipped_at_open(make_store, store_dir: Path):
    store = make_store()
    entry = store.get_or_create_session(dm())
    store.flush_mirror()
    store.close()
    conn = sqlite3.connect(store_dir / "state.db")
    with conn:
        conn.execute("DELETE FROM routes")
    conn.close()
    again = make_store()
    assert again.get_session(entry.session_key) is None  # the file was not parsed


def test_search_finds_new_messages_after_the_newest_session_is_deleted(store: SessionStore):
    a = store.get_or_create_session(dm("a"))
    b = store.get_or_create_session(dm("b"))
    store.append_messages(a.session_id, turn("alpha words"))
    store.append_messages(b.session_id, turn("bravo words", "bravo reply"))
    assert len(store.search("words")) == 2  # the index has caught up past b's rows
    store.delete_session(b.session_key)
    # b's entry ids are free again (INTEGER PRIMARY KEY reuses the highest ones).
    store.append_messages(a.session_id, turn("charlie zebra", "delta zebra"))
    hits, degraded = store.search_detailed("zebra")
    assert not degraded
    assert sorted(h["snippet"] for h in hits) == ["charlie [zebra]", "delta [zebra]"]
    assert store.search("bravo") == []
    assert store.search_index_status()["integrity_error"] is None


@pytest.mark.sqlite_only
def test_search_indexes_only_user_and_assistant_messages(store: SessionStore):
    sid = store.get_or_create_session(dm()).session_id
    store.append_messages(
        sid,
        [
            {"role": "user", "content": "visible walrus"},
            {"role": "tool", "content": "tool walrus", "tool_call_id": "t1"},
            {"role": "system", "content": "system walrus"},
            {"role": "assistant", "content": "answer walrus"},
        ],
    )
    store.append_entry(
        sid, {"type": "compaction", "summary": "summary walrus", "tokens_before": 10}
    )
    assert sorted(h["role"] for h in store.search("walrus")) == ["assistant", "user"]
    with store.database.read() as conn:
        indexed = conn.execute(
            "SELECT count(*) FROM entries_fts WHERE entries_fts MATCH 'walrus'"
        ).fetchone()[0]
    assert indexed == 2
    with store.database.transaction() as conn:
        # A database indexed under the old, wider rule also has its tool row in the index.
        conn.execute(
            "INSERT INTO entries_fts (rowid, content) "
            "SELECT id, content FROM entries WHERE role = 'tool'"
        )
    # Deleting the lane takes exactly the indexed rows out of the index, old rule or new.
    store.delete_session(store.lookup_by_session_id(sid).session_key)
    with store.database.read() as conn:
        assert conn.execute("SELECT count(*) FROM entries_fts_docsize").fetchone()[0] == 0
    assert store.search_index_status()["integrity_error"] is None


def test_switch_session_refuses_another_keys_session(store: SessionStore):
    mine = store.get_or_create_session(dm("mine"))
    store.append_messages(mine.session_id, turn("private"))
    other = store.get_or_create_session(dm("other"))
    assert store.switch_session(other.session_key, mine.session_id) is None
    # Even with the owner checked by the caller: it is still `mine`'s current session.
    assert store.switch_session(other.session_key, mine.session_id, owner_checked=True) is None
    assert store.get_session(other.session_key).session_id == other.session_id
    assert store.session_info(mine.session_id)["ended_at"] is None


def test_switch_session_takes_an_ended_session_of_another_key_only_when_told(store):
    mine = store.get_or_create_session(dm("mine"))
    store.append_messages(mine.session_id, turn("private"))
    store.reset_session(mine.session_key)
    other = store.get_or_create_session(dm("other"))
    assert store.switch_session(other.session_key, mine.session_id) is None
    switched = store.switch_session(other.session_key, mine.session_id, owner_checked=True)
    assert switched is not None
    assert switched.session_id == mine.session_id


def test_whatsapp_an_id_that_keys_a_lane_stays_canonical(store: SessionStore):
    lid = SessionSource(platform="whatsapp", chat_id="999@lid")
    phone = SessionSource(platform="whatsapp", chat_id="15550001@s.whatsapp.net")
    first = store.get_or_create_session(lid)
    assert store.learn_identity_alias("whatsapp", "999@lid", "15550001") == "999"
    assert store.get_or_create_session(lid).session_id == first.session_id
    assert store.get_or_create_session(phone).session_id == first.session_id


def test_whatsapp_an_alias_target_never_becomes_an_alias(store: SessionStore):
    one = SessionSource(platform="whatsapp", chat_id="111@lid")
    two = SessionSource(platform="whatsapp", chat_id="222@s.whatsapp.net")
    three = SessionSource(platform="whatsapp", chat_id="333@s.whatsapp.net")
    assert store.learn_identity_alias("whatsapp", "111@lid", "222") == "222"
    lane = store.get_or_create_session(two)
    # 222 is canonical now: learning 222 → 333 maps 333 to 222 instead of moving the lane.
    assert store.learn_identity_alias("whatsapp", "222", "333") == "222"
    for source in (one, two, three):
        assert store.get_or_create_session(source).session_key == lane.session_key


def test_whatsapp_two_canonical_ids_are_never_merged(store: SessionStore):
    a = store.get_or_create_session(SessionSource(platform="whatsapp", chat_id="444"))
    b = store.get_or_create_session(SessionSource(platform="whatsapp", chat_id="555"))
    assert store.learn_identity_alias("whatsapp", "444", "555") == "444"
    assert store.get_or_create_session(SessionSource(platform="whatsapp", chat_id="444")) == (
        store.get_session(a.session_key)
    )
    assert store.resolve_route(SessionSource(platform="whatsapp", chat_id="555"))[0] == (
        b.session_key
    )


def test_a_deleted_incognito_key_answers_deleted(store: SessionStore):
    ghost = store.create_incognito_session(SessionSource(platform="telegram", chat_id="1"))
    assert store.tombstone(ghost.session_key) is None  # alive
    assert store.delete_session(ghost.session_key)
    assert store.tombstone(ghost.session_key) == "deleted"
    assert "was deleted" in store.missing_message(ghost.session_key)


def test_a_route_read_back_after_its_write_is_not_decoded_again(store):
    # The backend tells the decoded entries the text it writes, in the form the database
    # gives it back (jsonb reorders keys on PostgreSQL): the next read shares the object.
    entry = store.get_or_create_session(SessionSource(platform="telegram", chat_id="decoded"))
    written = store.set_session_fields(entry.session_key, label="Zoë's chat", input_tokens=3)
    assert store.get_session(entry.session_key) is written
