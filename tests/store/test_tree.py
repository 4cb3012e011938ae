from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from sessiongate import SessionSource, SessionStore
from sessiongate.core.keys import parse_session_key
from sessiongate.errors import (
    EntryNotFoundError,
    ForkTooLargeError,
    InvalidEntryError,
    SessionBusyError,
    SessionNotFoundError,
)
from suite_support import lane, talk

if TYPE_CHECKING:
    from sessiongate.core.clock import FakeClock


def user_ids(store: SessionStore, sid: str) -> list[int]:
    return [e["id"] for e in store.load_events(sid) if e.get("role") == "user"]


def test_rewind_to_user_message_keeps_old_branch_as_tip(store: SessionStore):
    _, sid = lane(store)
    talk(store, sid, "one", "two", "three")
    target = user_ids(store, sid)[1]
    result = store.rewind_to(sid, target)
    assert result == {"status": "rewound", "editor_text": "two", "rewound_count": 4}
    assert [m["content"] for m in store.load_transcript(sid)] == ["one", "re: one"]
    branches = store.list_branches(sid)
    assert len(branches) == 2
    assert [b["active"] for b in branches].count(True) == 1
    old = next(b for b in branches if not b["active"])
    assert old["message_count"] == 6
    assert old["headline"] == "three"


def test_rewind_to_statuses(store: SessionStore):
    _, sid = lane(store)
    ids = talk(store, sid, "one", "two")
    assert store.rewind_to(sid, 999_999)["status"] == "missing"
    assert store.rewind_to(sid, ids[1])["status"] == "not_user_message"
    store.rewind_to(sid, ids[2])
    assert store.rewind_to(sid, ids[2])["status"] == "off_active_path"
    _, other = lane(store, "2")
    assert store.rewind_to(other, ids[0])["status"] == "missing"


def test_switch_branch_statuses_and_round_trip(store: SessionStore):
    _, sid = lane(store)
    talk(store, sid, "one", "two")
    old_leaf = store.list_branches(sid)[0]["leaf_entry_id"]
    store.rewind_to(sid, user_ids(store, sid)[1])
    talk(store, sid, "two, edited")
    assert store.switch_branch(sid, 999_999) == "missing"
    first = user_ids(store, sid)[0]
    assert store.switch_branch(sid, first) == "not_a_tip"
    assert store.switch_branch(sid, old_leaf) == "switched"
    assert [m["content"] for m in store.load_transcript(sid)][-2:] == ["two", "re: two"]
    assert store.switch_branch(sid, old_leaf) == "already_active"
    branches = store.list_branches(sid)
    assert len(branches) == 2
    inactive = next(b for b in branches if not b["active"])
    assert inactive["headline"] == "two, edited"
    assert store.switch_branch(sid, inactive["leaf_entry_id"]) == "switched"
    assert store.load_transcript(sid)[-2]["content"] == "two, edited"


def test_branch_listing_with_many_tips(store: SessionStore):
    _, sid = lane(store)
    talk(store, sid, "root")
    for i in range(50):
        talk(store, sid, f"variant {i}")
        store.rewind_session(sid, 1)
    branches = store.list_branches(sid)
    assert len(branches) == 51  # 50 abandoned variants + the active leaf
    assert sum(b["active"] for b in branches) == 1


def test_message_fork_copies_prefix_and_leaves_source_untouched(store: SessionStore):
    key, sid = lane(store)
    talk(store, sid, "one", "two", "three")
    before = store.load_transcript(sid)
    child, text = store.fork_session(key, entry_id=user_ids(store, sid)[2])
    assert text == "three"
    assert parse_session_key(child.session_key)["fork_id"]
    assert child.forked_from_parent
    assert child.parent_session_key == key
    assert [m["content"] for m in store.load_transcript(child.session_id)] == [
        "one",
        "re: one",
        "two",
        "re: two",
    ]
    assert store.load_transcript(sid) == before
    assert store.session_info(child.session_id)["parent_session_id"] == sid
    talk(store, child.session_id, "diverge")
    assert len(store.load_transcript(sid)) == 6


def test_fork_whole_branch_and_last_completed(store: SessionStore):
    key, sid = lane(store)
    talk(store, sid, "one")
    store.append_messages(sid, [{"role": "user", "content": "in progress"}])
    whole, _ = store.fork_session(key)
    assert len(store.load_transcript(whole.session_id)) == 3
    with pytest.raises(SessionBusyError):
        store.fork_session(key, busy=True)
    done, _ = store.fork_session(key, fork_from="last-completed", busy=True)
    assert [m["content"] for m in store.load_transcript(done.session_id)] == ["one", "re: one"]
    with pytest.raises(InvalidEntryError):
        store.fork_session(key, fork_from="sideways")


def test_last_completed_fork_stops_before_a_turn_that_is_still_calling_tools(store):
    key, sid = lane(store)
    talk(store, sid, "one")
    call = {"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{}"}}
    store.append_messages(
        sid,
        [
            {"role": "user", "content": "look it up"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"},
        ],
    )
    done, _ = store.fork_session(key, fork_from="last-completed", busy=True)
    copied = store.load_transcript(done.session_id)
    assert [m["content"] for m in copied] == ["one", "re: one"]
    assert not any(m.get("tool_calls") or m["role"] == "tool" for m in copied)
    # Once the turn's final answer is stored, the whole tool exchange comes along.
    store.append_messages(sid, [{"role": "assistant", "content": "it is found"}])
    done, _ = store.fork_session(key, fork_from="last-completed")
    roles = [m["role"] for m in store.load_transcript(done.session_id)]
    assert roles == ["user", "assistant", "user", "assistant", "tool", "assistant"]


def test_fork_inherits_model_and_starts_fresh_counters(store: SessionStore):
    key, _sid = lane(store)
    store.set_session_fields(key, model_override="big-model")
    store.record_turn(key, input_tokens=100, output_tokens=10)
    child, _ = store.fork_session(key)
    assert child.model_override == "big-model"
    assert child.input_tokens == 0
    assert child.total_tokens == 0


def test_a_fork_into_a_thread_source_becomes_that_lane_once(store: SessionStore):
    # The group's shared lane: everyone in the thread could read it.
    group = store.get_or_create_session(
        SessionSource(platform="telegram", chat_id="1", chat_type="group")
    )
    key, sid = group.session_key, group.session_id
    talk(store, sid, "one")
    thread = SessionSource(
        platform="telegram", chat_id="1", chat_type="group", thread_id="9", chat_name="Ops"
    )
    child, _ = store.fork_session(key, automatic=True, into=thread)
    assert store.resolve_route(thread) == (child.session_key, child)
    assert child.session_key != key
    assert child.parent_session_key == key
    assert (child.chat_type, child.display_name) == ("group", "Ops")
    assert [m["content"] for m in store.load_transcript(child.session_id)] == ["one", "re: one"]
    again, _ = store.fork_session(key, automatic=True, into=thread)
    assert again.session_id == child.session_id  # an existing lane is returned untouched


def test_a_shared_thread_is_never_forked_from_one_persons_lane(store: SessionStore):
    alice = SessionSource(platform="slack", chat_id="C1", chat_type="group", user_id="alice")
    entry = store.get_or_create_session(alice)
    store.append_messages(
        entry.session_id,
        [
            {"role": "user", "content": "the root", "metadata": {"message_ids": ["T1"]}},
            {"role": "assistant", "content": "re: the root"},
            {"role": "user", "content": "private note"},
        ],
    )
    thread = SessionSource(
        platform="slack", chat_id="C1", chat_type="group", user_id="alice", thread_id="T1"
    )
    child, _ = store.fork_session(entry.session_key, automatic=True, into=thread)
    assert child.extra == {"fork_isolated": True, "fork_refused": True}
    assert child.forked_from_parent
    # Only the thread's parent message, which the channel shows everyone.
    [seed] = store.load_transcript(child.session_id)
    assert (seed["role"], seed["content"]) == ("user", "the root")
    assert store.model_context(child.session_id).messages[0]["content"] == "the root"


def test_a_per_user_thread_may_carry_its_persons_lane(make_store):
    store = make_store(thread_sessions_per_user=True)
    alice = SessionSource(platform="slack", chat_id="C1", chat_type="group", user_id="alice")
    entry = store.get_or_create_session(alice)
    talk(store, entry.session_id, "mine")
    thread = SessionSource(
        platform="slack", chat_id="C1", chat_type="group", user_id="alice", thread_id="T2"
    )
    own, _ = store.fork_session(entry.session_key, automatic=True, into=thread)
    assert own.extra == {}
    assert [m["content"] for m in store.load_transcript(own.session_id)] == ["mine", "re: mine"]


def test_fork_admission(store: SessionStore):
    key, sid = lane(store)
    talk(store, sid, "x" * 4000)
    with pytest.raises(ForkTooLargeError):
        store.fork_session(key, max_tokens=100)
    child, _ = store.fork_session(key, max_tokens=100, automatic=True)
    assert child.forked_from_parent
    assert store.load_transcript(child.session_id) == []


def test_fork_errors(store: SessionStore):
    key, sid = lane(store)
    ids = talk(store, sid, "one")
    with pytest.raises(SessionNotFoundError):
        store.fork_session("agent:main:telegram:dm:nobody")
    with pytest.raises(EntryNotFoundError):
        store.fork_session(key, entry_id=12345)
    with pytest.raises(InvalidEntryError):
        store.fork_session(key, entry_id=ids[1])


def test_model_context_follows_reset_boundary(make_store):
    store = make_store(reset_mode="boundary")
    key, sid = lane(store)
    talk(store, sid, "before")
    store.reset_session(key)
    talk(store, sid, "after")
    context = store.model_context(sid)
    assert [m["content"] for m in context.messages] == ["after", "re: after"]
    assert len(store.load_transcript(sid)) == 4


@pytest.mark.sqlite_only
def test_incognito_lives_in_memory_and_is_hidden(make_store, store_dir):
    store = make_store()
    source = SessionSource(platform="telegram", chat_id="1")
    normal = store.get_or_create_session(source)
    ghost = store.create_incognito_session(source)
    assert ghost.incognito
    assert ghost.session_key != normal.session_key
    store.append_messages(ghost.session_id, [{"role": "user", "content": "whisper quietly"}])
    assert store.load_transcript(ghost.session_id)[0]["content"] == "whisper quietly"
    assert store.search("whisper") == []
    assert ghost.session_key not in {e.session_key for e in store.list_sessions()}
    assert [e.session_key for e in store.list_incognito()] == [ghost.session_key]
    child, _ = store.fork_session(ghost.session_key)
    assert store.is_incognito(child.session_key)
    store.flush_mirror()
    on_disk = (store_dir / "state.db").read_bytes() + (store_dir / "sessions.json").read_bytes()
    wal = store_dir / "state.db-wal"
    if wal.exists():
        on_disk += wal.read_bytes()
    assert b"whisper" not in on_disk
    store.close()
    again = make_store()
    assert again.get_session(ghost.session_key) is None
    assert again.tombstone(ghost.session_key) == "incognito"
    assert again.load_transcript(ghost.session_id) == []


def test_reconnect_resume_keeps_visible_session_once(make_store, clock: FakeClock):
    store = make_store(reset_policy={"mode": "idle", "idle_minutes": 5})
    source = SessionSource(platform="telegram", chat_id="1")
    first = store.get_or_create_session(source)
    clock.advance(600)
    kept = store.get_or_create_session(source, visible_session_id=first.session_id)
    assert kept.session_id == first.session_id
    clock.advance(600)
    rotated = store.get_or_create_session(source)
    assert rotated.session_id != first.session_id
    assert rotated.auto_reset_reason == "idle"


def test_a_second_reconnect_claim_on_the_same_session_is_an_ordinary_stale_send(
    make_store, clock: FakeClock
):
    store = make_store(reset_policy={"mode": "daily", "at_hour": 4})
    source = SessionSource(platform="telegram", chat_id="1")
    first = store.get_or_create_session(source)
    clock.advance(86_400)
    kept = store.get_or_create_session(source, visible_session_id=first.session_id)
    assert kept.session_id == first.session_id
    again = store.get_or_create_session(source, visible_session_id=first.session_id)
    assert (again.session_id != first.session_id, again.auto_reset_reason) == (True, "daily")


def test_a_lane_addressed_by_key_follows_its_reset_policy(make_store, clock: FakeClock):
    store = make_store(reset_policy={"mode": "idle", "idle_minutes": 5})
    source = SessionSource(platform="telegram", chat_id="1")
    parent = store.get_or_create_session(source)
    store.append_messages(parent.session_id, [{"role": "user", "content": "hi"}])
    fork, _ = store.fork_session(parent.session_key, fork_from="active")
    clock.advance(120)
    touched = store.refresh_lane(fork.session_key)
    assert touched.session_id == fork.session_id
    assert touched.last_interaction_at == clock.now()
    assert touched.origin == fork.origin
    assert store.refresh_lane(fork.session_key, event_kind="heartbeat").last_interaction_at == (
        touched.last_interaction_at
    )
    clock.advance(600)
    rotated = store.refresh_lane(fork.session_key)
    assert (rotated.session_id != fork.session_id, rotated.auto_reset_reason) == (True, "idle")
    assert store.get_session(parent.session_key).session_id == parent.session_id
    with pytest.raises(SessionNotFoundError):
        store.refresh_lane("agent:main:telegram:dm:nobody")


def test_an_incognito_lane_rotates_in_memory(make_store, clock: FakeClock):
    store = make_store(reset_policy={"mode": "idle", "idle_minutes": 5})
    ghost = store.create_incognito_session(SessionSource(platform="telegram", chat_id="1"))
    clock.advance(600)
    rotated = store.refresh_lane(ghost.session_key)
    assert rotated.session_id != ghost.session_id
    store.append_messages(rotated.session_id, [{"role": "user", "content": "secret"}])
    with store.database.read() as conn:
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0


def test_system_events_never_extend_freshness(make_store, clock: FakeClock):
    store = make_store(reset_policy={"mode": "idle", "idle_minutes": 5})
    source = SessionSource(platform="telegram", chat_id="1")
    first = store.get_or_create_session(source)
    for _ in range(5):
        clock.advance(120)
        assert store.get_or_create_session(source, event_kind="heartbeat").session_id == (
            first.session_id
        )
    assert store.get_or_create_session(source).session_id != first.session_id


def test_detached_view_with_admission_survives_appends_not_rewinds(store: SessionStore):
    _, sid = lane(store)
    talk(store, sid, "one", "two")
    admitted = store.append_messages(sid, [{"role": "user", "content": "three"}])[0]
    view = store.read_model_context(sid, admission_entry_id=admitted)
    assert [m["content"] for m in view.context.messages] == ["one", "re: one", "two", "re: two"]
    store.append_messages(sid, [{"role": "assistant", "content": "re: three"}])
    assert store.is_view_current(view)
    store.rewind_session(sid, 1)
    assert not store.is_view_current(view)


def test_detached_view_without_admission_is_stale_after_an_append(store: SessionStore):
    _, sid = lane(store)
    talk(store, sid, "one")
    view = store.read_model_context(sid)
    assert store.is_view_current(view)
    talk(store, sid, "two")
    assert not store.is_view_current(view)
    with pytest.raises(EntryNotFoundError):
        store.read_model_context(sid, admission_entry_id=999_999)


def test_detached_view_reads_from_another_thread_while_writes_go_on(store: SessionStore):
    import threading

    _, sid = lane(store)
    talk(store, sid, *[f"m{i}" for i in range(200)])
    results: list[int] = []

    def reader() -> None:
        results.extend(len(store.read_model_context(sid).context.messages) for _ in range(20))

    thread = threading.Thread(target=reader)
    thread.start()
    talk(store, sid, *[f"n{i}" for i in range(50)])
    thread.join()
    assert len(results) == 20
    assert all(400 <= n <= 500 and n % 2 == 0 for n in results)  # whole turns only


def test_short_model_context_reads_only_short_paths(make_store):
    store = make_store()
    entry = store.get_or_create_session(SessionSource(platform="telegram", chat_id="1"))
    store.append_messages(entry.session_id, [{"role": "user", "content": "a"}] * 3)
    short = store.short_model_context(entry.session_id, 3)
    assert short is not None
    assert short.messages == store.model_context(entry.session_id).messages
    assert store.short_model_context(entry.session_id, 2) is None
    assert store.short_model_context("20260101_000000_deadbeef", 2).messages == []
