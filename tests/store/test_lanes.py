"""The durable inbound queue and the turn journal (`LaneStore`), on a real state.db."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from sessiongate import SessionSource
from sessiongate.core.transcript import build_model_context
from sessiongate.errors import StaleWriteError
from sessiongate.store.lanes import AcceptStatus, Inbound, InboxKind, LaneStore, TurnState

if TYPE_CHECKING:
    from sessiongate import SessionStore
    from sessiongate.core.clock import FakeClock

SOURCE = SessionSource(platform="telegram", chat_id="c1", user_id="u1", user_name="Ann")


@pytest.fixture
def lanes(store: SessionStore) -> LaneStore:
    return LaneStore(store)


def _entry(store: SessionStore, source: SessionSource = SOURCE):
    return store.get_or_create_session(source)


def _accept(lanes, entry, text, *, kind=InboxKind.SLOT, cap=32, **fields):
    inbound = Inbound(source=fields.pop("source", SOURCE), text=text, **fields)
    return lanes.accept(
        inbound, session_key=entry.session_key, session_id=entry.session_id, kind=kind, cap=cap
    )


def _rows(store: SessionStore, sql: str) -> list[tuple]:
    with store.database.read() as conn:
        return conn.execute(sql).fetchall()


def test_migration_three_creates_the_gateway_tables(store):
    versions = [r[0] for r in _rows(store, "SELECT version FROM schema_migrations")]
    assert 3 in versions
    tables = {r[0] for r in _rows(store, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"inbox", "inbound_seen", "turns", "restart_counts"} <= tables


def test_follow_ups_merge_into_the_pending_slot(store, lanes):
    entry = _entry(store)
    first = _accept(lanes, entry, "one", message_id="m1", media=("a.png",))
    second = _accept(lanes, entry, "two", message_id="m2", media=("b.png",))
    assert (first.status, second.status) == (AcceptStatus.ACCEPTED, AcceptStatus.MERGED)
    assert first.inbox_id == second.inbox_id
    item = lanes.get_item(first.inbox_id)
    assert item.text == "one\ntwo"
    assert item.media == ("a.png", "b.png")
    assert item.message_id == "m2"
    assert item.message_ids == ("m1", "m2")
    assert [p["text"] for p in item.parts] == ["one", "two"]
    assert lanes.queue_depth(entry.session_key) == 1


def test_queued_items_are_their_own_rows_and_run_after_the_slot(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "q1", kind=InboxKind.QUEUED)
    _accept(lanes, entry, "q2", kind=InboxKind.QUEUED)
    _accept(lanes, entry, "slot")
    assert lanes.queue_depth(entry.session_key) == 3
    order = []
    while (claim := lanes.claim_next(entry.session_key, entry.session_id)) is not None:
        order.append(claim.item.text)
        lanes.commit_reply(claim, [{"role": "user", "content": claim.item.text}], reply="ok")
    assert order == ["slot", "q1", "q2"]


def test_the_cap_refuses_a_new_row_and_writes_nothing(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "q1", kind=InboxKind.QUEUED, cap=2)
    _accept(lanes, entry, "q2", kind=InboxKind.QUEUED, cap=2)
    full = _accept(lanes, entry, "q3", kind=InboxKind.QUEUED, cap=2, message_id="m3")
    assert full.status is AcceptStatus.FULL
    assert full.inbox_id is None
    assert lanes.queue_depth(entry.session_key) == 2
    # Not remembered as seen: a retry once there is room is accepted.
    assert _rows(store, "SELECT count(*) FROM inbound_seen") == [(0,)]


def test_a_redelivered_message_id_is_a_duplicate(store, lanes):
    entry = _entry(store)
    first = _accept(lanes, entry, "hi", message_id="m1")
    again = _accept(lanes, entry, "hi", message_id="m1")
    assert again.status is AcceptStatus.DUPLICATE
    assert again.seen.inbox_id == first.inbox_id
    assert again.seen.pending
    assert lanes.queue_depth(entry.session_key) == 1
    # The same id in another chat is another message.
    other = SessionSource(platform="telegram", chat_id="c2", user_id="u1")
    assert _accept(lanes, _entry(store, other), "hi", message_id="m1", source=other).status is (
        AcceptStatus.ACCEPTED
    )


def test_a_duplicate_after_the_turn_carries_its_reply(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "hi", message_id="m1")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    lanes.commit_reply(claim, [{"role": "user", "content": "hi"}], reply="hello")
    seen = _accept(lanes, entry, "hi", message_id="m1").seen
    assert (seen.turn_id, seen.reply, seen.turn_state, seen.pending) == (
        claim.turn.id,
        "hello",
        TurnState.REPLIED,
        False,
    )


def test_claiming_marks_the_row_and_journals_the_turn_running(store, lanes):
    entry = _entry(store)
    accepted = _accept(lanes, entry, "hi")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    assert claim.item.id == accepted.inbox_id
    assert lanes.get_turn(claim.turn.id).state is TurnState.RUNNING
    # The claimed row is kept (a crash must not lose it) but is no longer pending: a
    # follow-up starts a new slot instead of merging into the running turn.
    assert lanes.get_item(accepted.inbox_id) is not None
    assert lanes.queue_depth(entry.session_key) == 0
    follow = _accept(lanes, entry, "more")
    assert follow.status is AcceptStatus.ACCEPTED
    assert follow.inbox_id != accepted.inbox_id


def test_the_reply_outcome_commits_everything_once(store, lanes):
    entry = _entry(store)
    store.mark_resume_pending(entry.session_key, "restart_interrupted")
    _accept(lanes, entry, "hi")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    lanes.commit_reply(claim, messages, reply="hello", input_tokens=7, output_tokens=3)
    assert [m["content"] for m in store.load_transcript(entry.session_id)] == ["hi", "hello"]
    assert lanes.get_turn(claim.turn.id).state is TurnState.REPLIED
    assert lanes.get_item(claim.item.id) is None
    after = store.get_session(entry.session_key)
    assert (after.resume_pending, after.input_tokens, after.last_prompt_tokens) == (False, 7, 7)
    # A second commit of the same turn is refused as a whole: no duplicate transcript rows.
    with pytest.raises(StaleWriteError, match="only delivery remains"):
        lanes.commit_reply(claim, messages, reply="hello")
    assert len(store.load_transcript(entry.session_id)) == 2
    lanes.mark_delivered(claim.turn.id)
    assert lanes.get_turn(claim.turn.id).state is TurnState.DELIVERED


def test_a_failed_commit_rolls_back_the_whole_outcome(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "hi")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    with pytest.raises(Exception, match="role"):
        lanes.commit_reply(claim, [{"role": "user", "content": "hi"}, {"role": "bad"}], reply="x")
    assert store.load_transcript(entry.session_id) == []
    assert lanes.get_turn(claim.turn.id).state is TurnState.RUNNING
    assert lanes.get_item(claim.item.id) is not None


def test_failure_keeps_the_user_message_and_hides_the_notice_from_the_model(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "hi")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    notice = {
        "role": "assistant",
        "content": "sorry",
        "metadata": {"exclude_from_context": True},
    }
    lanes.commit_failure(
        claim, error="boom", notice="sorry", messages=[{"role": "user", "content": "hi"}, notice]
    )
    turn = lanes.get_turn(claim.turn.id)
    assert (turn.state, turn.error, turn.reply) == (TurnState.FAILED, "boom", "sorry")
    context = build_model_context(store.load_events(entry.session_id))
    assert context.messages == [{"role": "user", "content": "hi"}]


def test_requeue_then_resume_counts_the_attempt_and_the_restart(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "hi")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    lanes.requeue(claim.turn.id, resume_reason="shutdown_timeout")
    assert lanes.get_turn(claim.turn.id).state is TurnState.ACCEPTED
    marked = store.get_session(entry.session_key)
    assert (marked.resume_pending, marked.resume_reason) == (True, "shutdown_timeout")
    resumed, count = lanes.claim_resume(claim.turn.id)
    assert (resumed.turn.attempt, resumed.turn.resumes, count) == (2, 1, 1)
    assert resumed.item.id == claim.item.id
    assert lanes.restart_count(entry.session_key) == 1
    # A resume is dispatched only from `accepted`.
    with pytest.raises(StaleWriteError, match="running"):
        lanes.claim_resume(claim.turn.id)
    assert lanes.commit_reply(resumed, [{"role": "user", "content": "hi"}], reply="ok") is True
    assert lanes.restart_count(entry.session_key) == 0


def test_interrupted_is_terminal(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "hi")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    lanes.commit_interrupted(
        claim, reason="interrupt", messages=[{"role": "user", "content": "hi"}]
    )
    with pytest.raises(StaleWriteError, match="was interrupted"):
        lanes.requeue(claim.turn.id, resume_reason=None)
    assert [m["content"] for m in store.load_transcript(entry.session_id)] == ["hi"]


def test_clear_pending_leaves_the_claimed_row(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "running")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    a = _accept(lanes, entry, "slot")
    b = _accept(lanes, entry, "queued", kind=InboxKind.QUEUED)
    assert lanes.clear_pending(entry.session_key) == [a.inbox_id, b.inbox_id]
    assert lanes.get_item(claim.item.id) is not None
    assert lanes.queue_depth(entry.session_key) == 0


def test_atomic_groups_calls_into_one_transaction(store, lanes):
    entry = _entry(store)

    def accept_then_fail() -> None:
        with lanes.atomic():
            _accept(lanes, entry, "hi", message_id="m1")
            raise RuntimeError

    with pytest.raises(RuntimeError):
        accept_then_fail()
    assert lanes.queue_depth(entry.session_key) == 0
    assert lanes.lookup_seen(Inbound(SOURCE, "hi", message_id="m1")) is None


def test_the_clean_shutdown_record_is_consumed_once(lanes, clock: FakeClock):
    assert lanes.consume_clean_shutdown() is None
    lanes.mark_clean_shutdown(clock.now())
    assert lanes.consume_clean_shutdown() == clock.now().isoformat()
    assert lanes.consume_clean_shutdown() is None


def test_restart_counts_merge_keeps_the_larger(lanes):
    lanes.merge_restart_counts({"k1": 2, "k2": 1})
    lanes.merge_restart_counts({"k1": 1, "k2": 3})
    assert lanes.restart_counts() == {"k1": 2, "k2": 3}


def test_prune_forgets_old_dedup_records_and_finished_turns(store, lanes, clock: FakeClock):
    entry = _entry(store)
    _accept(lanes, entry, "hi", message_id="m1")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    lanes.commit_reply(claim, [{"role": "user", "content": "hi"}], reply="ok")
    lanes.mark_delivered(claim.turn.id)
    clock.advance(10)
    assert lanes.prune(clock.now()) == (1, 1)
    assert lanes.get_turn(claim.turn.id) is None


def test_the_inbox_allows_one_pending_slot_per_lane(store):
    insert = (
        "INSERT INTO inbox (session_key, kind, text, parts, source, message_type, "
        "accepted_at, updated_at) VALUES ('k', 'slot', 't', '[]', '{}', 'text', 0, 0)"
    )
    with store.database.read() as conn:
        conn.execute(insert)
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(insert)


def test_ids_are_never_reused(store, lanes, clock):
    # Turn ids key the transcript's idempotency; inbox ids key the dedup records.
    entry = _entry(store)
    seen = []
    for text in ("a", "b"):
        accepted = _accept(lanes, entry, text)
        claim = lanes.claim_next(entry.session_key, entry.session_id)
        lanes.commit_reply(claim, [{"role": "user", "content": text}], reply="ok")
        lanes.mark_delivered(claim.turn.id)
        clock.advance(1)
        lanes.prune(clock.now())
        seen.append((accepted.inbox_id, claim.turn.id))
    assert seen[0][0] != seen[1][0]
    assert seen[0][1] != seen[1][1]
