"""The durable inbound queue and the turn journal (`LaneStore`), on a real state.db."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from sessiongate import SessionSource
from sessiongate.core.transcript import build_model_context
from sessiongate.errors import MessageIdConflictError, SessionNotFoundError, StaleWriteError
from sessiongate.store.lanes import AcceptStatus, Inbound, InboxKind, LaneStore, TurnState
from sessiongate.store.tree import INLINE_CONTEXT_ENTRIES

if TYPE_CHECKING:
    from sessiongate import SessionStore
    from sessiongate.core.clock import FakeClock
    from sessiongate.store.lanes import InboxItem

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


@pytest.mark.sqlite_only
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


def test_a_message_id_is_scoped_to_its_sender_and_lane(store, lanes):
    # A shared lane (one key for the whole group): Bob's "m1" is not Alice's "m1".
    alice = SessionSource(platform="api", chat_id="g", chat_type="group", user_id="alice")
    bob = SessionSource(platform="api", chat_id="g", chat_type="group", user_id="bob")
    entry = _entry(store, alice)
    first = _accept(lanes, entry, "from alice", message_id="m1", source=alice)
    second = _accept(lanes, entry, "from bob", message_id="m1", source=bob)
    assert (first.status, second.status) == (AcceptStatus.ACCEPTED, AcceptStatus.MERGED)
    assert lanes.get_item(first.inbox_id).text == "from alice\nfrom bob"
    # Two threads of one chat are two lanes: the same id and sender in each is two messages.
    one = SessionSource(platform="api", chat_id="g", chat_type="group", thread_id="7")
    two = SessionSource(platform="api", chat_id="g", chat_type="group", thread_id="8")
    in_one, in_two = _entry(store, one), _entry(store, two)
    assert _accept(lanes, in_one, "hi", message_id="t", source=one).status is AcceptStatus.ACCEPTED
    assert _accept(lanes, in_two, "hi", message_id="t", source=two).status is AcceptStatus.ACCEPTED
    assert lanes.lookup_seen(Inbound(one, "hi", message_id="t"), in_one.session_key).inbox_id != (
        lanes.lookup_seen(Inbound(two, "hi", message_id="t"), in_two.session_key).inbox_id
    )


def test_a_reused_message_id_with_other_content_is_a_conflict_that_writes_nothing(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "hi", message_id="m1")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    lanes.commit_reply(claim, [{"role": "user", "content": "hi"}], reply="secret reply")
    before = _rows(store, "SELECT count(*) FROM inbox UNION ALL SELECT count(*) FROM turns")
    with pytest.raises(MessageIdConflictError) as caught:
        _accept(lanes, entry, "something else", message_id="m1")
    # Nothing of the stored message is disclosed, and nothing was written.
    assert caught.value.code == "message_id_conflict"
    assert caught.value.data == {"message_id": "m1"}
    assert "secret" not in caught.value.message
    assert _rows(store, "SELECT count(*) FROM inbox UNION ALL SELECT count(*) FROM turns") == before
    with pytest.raises(MessageIdConflictError):
        lanes.lookup_seen(Inbound(SOURCE, "something else", message_id="m1"), entry.session_key)
    # The same content again is still the ordinary redelivery.
    assert _accept(lanes, entry, "hi", message_id="m1").status is AcceptStatus.DUPLICATE


def test_migration_four_scopes_old_dedup_records_by_their_senders(tmp_path, clock):
    """A state.db written before migration 4 keeps its records, each with the sender of the
    turn it points at, and with no fingerprint (a redelivery is still a duplicate)."""
    from sessiongate import GatewayConfig, SessionStore
    from sessiongate.store.sqlite import _schema

    home = tmp_path / "old"
    home.mkdir()
    conn = sqlite3.connect(home / "state.db")
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at TEXT NOT NULL)"
    )
    for version, name, statements in _schema.MIGRATIONS[:3]:
        for statement in statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 'then')", (version, name))
    source = '{"platform": "telegram", "chat_id": "c1", "user_id": "u1"}'
    conn.execute(
        "INSERT INTO turns (id, session_key, session_id, state, source, accepted_at) "
        "VALUES (5, 'k', 's', 'delivered', ?, 1)",
        (source,),
    )
    conn.execute(
        "INSERT INTO inbound_seen (platform, chat_id, message_id, session_key, session_id, "
        "inbox_id, turn_id, status, reply, seen_at) "
        "VALUES ('telegram', 'c1', 'm1', 'k', 's', NULL, 5, 'accepted', NULL, 1)"
    )
    conn.commit()
    conn.close()
    with SessionStore(home, GatewayConfig(), clock=clock) as upgraded:
        rows = _rows(
            upgraded, "SELECT message_id, session_key, sender_id, content_hash FROM inbound_seen"
        )
    assert rows == [("m1", "k", "u1", None)]


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
    # A second commit of the same turn is refused as a whole: no duplicate transcript rows,
    # and nothing new of it (a message more, its usage) either.
    more = [*messages, {"role": "assistant", "content": "again"}]
    with pytest.raises(StaleWriteError, match="only delivery remains"):
        lanes.commit_reply(claim, more, reply="again", input_tokens=5)
    assert len(store.load_transcript(entry.session_id)) == 2
    assert store.get_session(entry.session_key).input_tokens == 7
    lanes.mark_delivered(claim.turn.id)
    assert lanes.get_turn(claim.turn.id).state is TurnState.DELIVERED


@pytest.mark.parametrize("event_kind", ["heartbeat", "cron", "system"])
def test_a_system_event_reply_is_no_activity(store, lanes, clock: FakeClock, event_kind):
    entry = _entry(store)
    store.patch_session(entry.session_key, unread=False)  # the user has read everything
    clock.advance(60)
    _accept(lanes, entry, "tick", event_kind=event_kind)
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    lanes.commit_reply(claim, [{"role": "user", "content": "tick"}], reply="ok", input_tokens=4)
    after = store.get_session(entry.session_key)
    assert after.last_activity_at is None
    assert not after.unread
    assert after.input_tokens == 4  # usage still counts


def test_a_user_reply_is_activity(store, lanes, clock: FakeClock):
    entry = _entry(store)
    store.patch_session(entry.session_key, unread=False)
    clock.advance(60)
    _accept(lanes, entry, "hi")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    lanes.commit_reply(claim, [{"role": "user", "content": "hi"}], reply="hello")
    after = store.get_session(entry.session_key)
    assert after.last_activity_at == clock.now()
    assert after.unread


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
    stored = lanes.commit_reply(resumed, [{"role": "user", "content": "hi"}], reply="ok")
    assert stored.counter_reset() is True
    assert lanes.restart_count(entry.session_key) == 0


@pytest.mark.parametrize("ending", ["interrupted", "failed"])
def test_a_resumed_turn_that_ends_without_a_crash_resets_the_stuck_loop_counter(
    store, lanes, ending
):
    # A resumed turn cut off by a newer message (or failing) broke the crash loop: the next
    # turn of the lane to be cut off by a crash starts a new count, and is not suspended early.
    entry = _entry(store)
    _accept(lanes, entry, "hi")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    lanes.requeue(claim.turn.id, resume_reason="restart_interrupted")
    resumed, count = lanes.claim_resume(claim.turn.id)
    assert count == 1
    if ending == "interrupted":
        lanes.commit_interrupted(resumed, reason="interrupt", messages=[])
    else:
        lanes.commit_failure(resumed, error="boom", notice="sorry", messages=[])
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
    assert lanes.lookup_seen(Inbound(SOURCE, "hi", message_id="m1"), entry.session_key) is None


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


@pytest.mark.sqlite_only
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


def _statements(store: SessionStore) -> tuple[list[str], object]:
    traced: list[str] = []
    store.database.conn.set_trace_callback(traced.append)
    return traced, lambda: store.database.conn.set_trace_callback(None)


@pytest.mark.sqlite_only
def test_accept_and_claim_is_one_transaction_that_claims_the_new_row(store, lanes):
    entry = _entry(store)
    traced, stop = _statements(store)
    acceptance, claim = lanes.accept_and_claim(
        Inbound(SOURCE, "hi", message_id="m1"), entry=entry, kind=InboxKind.SLOT, cap=32
    )
    stop()
    assert [s for s in traced if s.startswith(("BEGIN", "COMMIT", "SAVEPOINT"))] == [
        "BEGIN IMMEDIATE",
        "COMMIT",
    ]
    # The row just written is claimed as built, not read back.
    assert not any(s.startswith("SELECT id, session_key, kind") for s in traced)
    assert acceptance.status is AcceptStatus.ACCEPTED
    assert (claim.item.id, claim.item.text, claim.item.message_ids) == (
        acceptance.inbox_id,
        "hi",
        ("m1",),
    )
    assert (claim.turn.session_id, claim.entry) == (entry.session_id, entry)
    assert lanes.get_turn(claim.turn.id).state is TurnState.RUNNING
    assert lanes.queue_depth(entry.session_key) == 0
    # The dedup record already names the turn.
    seen = lanes.lookup_seen(Inbound(SOURCE, "hi", message_id="m1"), entry.session_key)
    assert (seen.turn_id, seen.pending) == (claim.turn.id, True)
    # What the claim carries is what a reload of the row gives.
    stored = lanes.get_item(claim.item.id)
    assert (stored.text, stored.parts, stored.source, stored.accepted_at) == (
        claim.item.text,
        claim.item.parts,
        claim.item.source,
        claim.item.accepted_at,
    )


def test_accept_and_claim_takes_the_oldest_waiting_row_first(store, lanes):
    entry = _entry(store)
    waiting = _accept(lanes, entry, "waited", kind=InboxKind.QUEUED, message_id="m0")
    acceptance, claim = lanes.accept_and_claim(
        Inbound(SOURCE, "new", message_id="m1"), entry=entry, kind=InboxKind.QUEUED, cap=32
    )
    assert claim.item.id == waiting.inbox_id
    assert acceptance.depth == 2
    assert lanes.queue_depth(entry.session_key) == 1
    key = entry.session_key
    assert lanes.lookup_seen(Inbound(SOURCE, "waited", message_id="m0"), key).turn_id == (
        claim.turn.id
    )
    assert lanes.lookup_seen(Inbound(SOURCE, "new", message_id="m1"), key).turn_id is None


def test_accept_and_claim_claims_nothing_for_a_duplicate_or_a_full_lane(store, lanes):
    entry = _entry(store)
    inbound = Inbound(SOURCE, "hi", message_id="m1")
    lanes.accept_and_claim(inbound, entry=entry, kind=InboxKind.SLOT, cap=32)
    again, claim = lanes.accept_and_claim(inbound, entry=entry, kind=InboxKind.SLOT, cap=32)
    assert (again.status, claim) == (AcceptStatus.DUPLICATE, None)
    _accept(lanes, entry, "q", kind=InboxKind.QUEUED)
    full, claim = lanes.accept_and_claim(
        Inbound(SOURCE, "more"), entry=entry, kind=InboxKind.QUEUED, cap=1
    )
    assert (full.status, claim) == (AcceptStatus.FULL, None)


@pytest.mark.sqlite_only
def test_a_receipt_only_reply_is_delivered_in_the_outcome_commit(store, lanes):
    entry = _entry(store)
    _, claim = lanes.accept_and_claim(
        Inbound(SOURCE, "hi"), entry=entry, kind=InboxKind.SLOT, cap=32
    )
    traced, stop = _statements(store)
    lanes.commit_reply(claim, [{"role": "user", "content": "hi"}], reply="ok", delivered=True)
    stop()
    assert traced.count("BEGIN IMMEDIATE") == 1
    # The entry seen at the claim had no resume flag: there is none to clear.
    assert sum(s.startswith("UPDATE turns") for s in traced) == 1
    turn = lanes.get_turn(claim.turn.id)
    assert (turn.state, turn.reply) == (TurnState.DELIVERED, "ok")
    assert turn.finished_at == turn.delivered_at is not None
    with pytest.raises(StaleWriteError, match="finished and delivered"):
        lanes.commit_reply(claim, [{"role": "user", "content": "hi"}], reply="ok")


def test_claim_item_claims_that_row_once(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "hi")
    item = lanes.peek_next(entry.session_key)
    assert lanes.has_pending(entry.session_key)
    claim = lanes.claim_item(item, entry)
    assert (claim.item.id, claim.turn.session_id) == (item.id, entry.session_id)
    assert not lanes.has_pending(entry.session_key)
    with pytest.raises(LookupError):
        lanes.claim_item(item, entry)


def test_discard_pending_events_keeps_user_rows_and_the_named_row(store, lanes):
    entry = _entry(store)
    slot = _accept(lanes, entry, "user text")
    first = _accept(lanes, entry, "beat", kind=InboxKind.QUEUED, event_kind="heartbeat")
    second = _accept(lanes, entry, "cron", kind=InboxKind.QUEUED, event_kind="cron")
    queued = _accept(lanes, entry, "/queue item", kind=InboxKind.QUEUED)
    assert lanes.discard_pending_events(entry.session_key, keep=second.inbox_id) == [first.inbox_id]
    assert lanes.discard_pending_events(entry.session_key) == [second.inbox_id]
    remaining = []
    while (claim := lanes.claim_next(entry.session_key, entry.session_id)) is not None:
        remaining.append(claim.item.id)
    assert remaining == [slot.inbox_id, queued.inbox_id]


def test_resolve_reads_the_route_without_touching_it(store, lanes, clock):
    assert lanes.resolve(SOURCE) == ("agent:main:telegram:dm:c1", None)
    assert store.list_sessions() == []
    entry = _entry(store)
    clock.advance(60)
    assert lanes.resolve(SOURCE) == (entry.session_key, entry)
    assert store.get_session(entry.session_key) == entry


def test_prune_keeps_the_dedup_record_of_a_row_that_still_waits(store, lanes, clock):
    entry = _entry(store)
    _accept(lanes, entry, "waiting", message_id="m1")
    clock.advance(30 * 86400)
    assert lanes.prune(clock.now()) == (0, 0)
    again = _accept(lanes, entry, "waiting", message_id="m1")
    assert again.status is AcceptStatus.DUPLICATE


# ---------------------------------------------------------------------- incognito lanes


def test_an_incognito_lane_keeps_its_inbox_and_journal_in_memory(store, lanes):
    durable = _entry(store)
    hidden = store.create_incognito_session(SOURCE)
    _accept(lanes, durable, "on disk")
    accepted = _accept(lanes, hidden, "in memory", message_id="m1")
    assert lanes.get_item(accepted.inbox_id).text == "in memory"
    assert _rows(store, "SELECT text FROM inbox") == [("on disk",)]
    assert lanes.total_queued() == 2
    assert set(lanes.lanes_with_pending()) == {durable.session_key, hidden.session_key}
    claim = lanes.claim_next(hidden.session_key, hidden.session_id)
    assert not lanes.is_durable_turn(claim.turn.id)
    assert lanes.get_turn(claim.turn.id).state is TurnState.RUNNING
    assert [t.id for t in lanes.turns_in_state(TurnState.RUNNING)] == [claim.turn.id]
    messages = [{"role": "user", "content": "in memory"}, {"role": "assistant", "content": "ok"}]
    lanes.commit_reply(claim, messages, reply="ok")
    lanes.mark_delivered(claim.turn.id)
    assert lanes.get_turn(claim.turn.id).state is TurnState.DELIVERED
    assert [m["content"] for m in store.load_transcript(hidden.session_id)] == ["in memory", "ok"]
    seen = lanes.lookup_seen(Inbound(SOURCE, "in memory", message_id="m1"), hidden.session_key)
    assert (seen.session_key, seen.reply) == (hidden.session_key, "ok")
    assert _rows(store, "SELECT count(*) FROM turns") == [(0,)]
    assert _rows(store, "SELECT count(*) FROM inbound_seen") == [(0,)]


def test_a_bare_turn_id_names_one_turn_whichever_database_holds_it(store, lanes):
    # Both databases hold turns; each id, given alone (as `GET /v1/turns/{id}` gets it),
    # must find its own lane's turn and row, never the other database's.
    durable, hidden = _entry(store), store.create_incognito_session(SOURCE)
    claims = {}
    for entry, text in ((durable, "on disk"), (hidden, "in memory")):
        accepted = _accept(lanes, entry, text)
        claims[entry.session_key] = lanes.claim_next(entry.session_key, entry.session_id)
        assert lanes.get_item(accepted.inbox_id).session_key == entry.session_key
    on_disk, in_memory = claims[durable.session_key], claims[hidden.session_key]
    assert on_disk.turn.id != in_memory.turn.id
    assert on_disk.item.id != in_memory.item.id
    assert lanes.get_turn(on_disk.turn.id).session_key == durable.session_key
    assert lanes.get_turn(in_memory.turn.id).session_key == hidden.session_key
    assert (lanes.is_durable_turn(on_disk.turn.id), lanes.is_durable_turn(in_memory.turn.id)) == (
        True,
        False,
    )
    assert _rows(store, "SELECT session_key FROM turns") == [(durable.session_key,)]


def test_nothing_incognito_survives_reopening_and_its_key_is_refused(make_store):
    store = make_store()
    lanes = LaneStore(store)
    hidden = store.create_incognito_session(SOURCE)
    _accept(lanes, hidden, "in memory")
    claim = lanes.claim_next(hidden.session_key, hidden.session_id)
    store.close()
    reopened = make_store()
    again = LaneStore(reopened)
    assert again.get_turn(claim.turn.id) is None
    assert again.get_item(claim.item.id) is None
    assert again.total_queued() == 0
    assert not reopened.is_incognito(hidden.session_key)
    assert reopened.tombstone(hidden.session_key) == "incognito"
    with pytest.raises(SessionNotFoundError, match="ended when the gateway restarted"):
        reopened.refresh_lane(hidden.session_key)


def test_an_incognito_outcome_rolls_back_as_a_whole(store, lanes):
    hidden = store.create_incognito_session(SOURCE)
    _accept(lanes, hidden, "hi")
    claim = lanes.claim_next(hidden.session_key, hidden.session_id)
    with pytest.raises(Exception, match="role"):
        lanes.commit_reply(claim, [{"role": "user", "content": "hi"}, {"role": "bad"}], reply="x")
    assert store.load_transcript(hidden.session_id) == []
    assert lanes.get_turn(claim.turn.id).state is TurnState.RUNNING
    assert lanes.get_item(claim.item.id) is not None


def test_atomic_spans_both_databases(store, lanes):
    durable = _entry(store)
    hidden = store.create_incognito_session(SOURCE)

    def accept_both_then_fail() -> None:
        with lanes.atomic():
            _accept(lanes, durable, "a")
            _accept(lanes, hidden, "b")
            raise RuntimeError

    with pytest.raises(RuntimeError):
        accept_both_then_fail()
    assert lanes.total_queued() == 0


def test_dropping_a_pending_row_forgets_its_message_ids_so_a_retry_runs(store, lanes):
    # The row of an archived lane is dropped unrun: a dedup record left behind would answer
    # the sender's retry (after unarchiving) with `duplicate`, and the message would never run.
    entry = _entry(store)
    slot = _accept(lanes, entry, "one", message_id="m1")
    _accept(lanes, entry, "two", message_id="m2")  # merged into the same slot row
    queued = _accept(lanes, entry, "three", kind=InboxKind.QUEUED, message_id="m3")
    assert lanes.drop_pending(slot.inbox_id) is True
    assert lanes.get_item(slot.inbox_id) is None
    for message_id in ("m1", "m2"):
        inbound = Inbound(source=SOURCE, text="again", message_id=message_id)
        assert lanes.lookup_seen(inbound, entry.session_key) is None
    # The other row's record is untouched.
    inbound = Inbound(source=SOURCE, text="three", message_id="m3")
    assert lanes.lookup_seen(inbound, entry.session_key).inbox_id == queued.inbox_id
    retry = _accept(lanes, entry, "one", message_id="m1")
    assert retry.status is AcceptStatus.ACCEPTED
    assert retry.inbox_id != slot.inbox_id


def test_dropping_a_claimed_row_keeps_it_and_its_dedup_record(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "running", message_id="m1")
    claim = lanes.claim_next(entry.session_key, entry.session_id)
    assert lanes.drop_pending(claim.item.id) is False
    seen = lanes.lookup_seen(
        Inbound(source=SOURCE, text="running", message_id="m1"), entry.session_key
    )
    assert seen is not None
    assert seen.turn_id == claim.turn.id


def _user_message(item: InboxItem, turn_id: int) -> dict[str, object]:
    return {"role": "user", "content": item.text}


@pytest.mark.sqlite_only
def test_the_claim_stores_the_user_message_in_its_one_transaction(store, lanes):
    entry = _entry(store)
    traced, stop = _statements(store)
    _, claim = lanes.accept_and_claim(
        Inbound(SOURCE, "hi"), entry=entry, kind=InboxKind.SLOT, cap=32, user_message=_user_message
    )
    stop()
    # The user message rides on the claim (a savepoint inside it).
    assert [s for s in traced if s.startswith(("BEGIN", "COMMIT"))] == ["BEGIN IMMEDIATE", "COMMIT"]
    assert claim.user_entry_id is not None


def test_the_claim_transaction_stores_the_user_message_and_a_turn_takes_its_row_id(store, lanes):
    entry = _entry(store)
    acceptance, claim = lanes.accept_and_claim(
        Inbound(SOURCE, "hi"), entry=entry, kind=InboxKind.SLOT, cap=32, user_message=_user_message
    )
    assert claim.turn.id == acceptance.inbox_id
    assert claim.user_entry_id is not None
    assert [(m["role"], m["content"]) for m in store.load_transcript(entry.session_id)] == [
        ("user", "hi")
    ]
    # The outcome appends the same number again: a no-op, never a second copy.
    lanes.commit_reply(claim, [{"role": "user", "content": "hi"}], reply="ok")
    assert len(store.load_transcript(entry.session_id)) == 1


def test_turn_messages_are_keyed_by_turn_and_number_and_a_retry_is_a_noop(store, lanes):
    entry = _entry(store)
    _, claim = lanes.accept_and_claim(
        Inbound(SOURCE, "hi"), entry=entry, kind=InboxKind.SLOT, cap=32, user_message=_user_message
    )
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    first = lanes.append_turn_messages(
        claim.turn, [{"role": "assistant", "content": None, "tool_calls": [call]}], first_index=1
    )
    again = lanes.append_turn_messages(
        claim.turn, [{"role": "assistant", "content": None, "tool_calls": [call]}], first_index=1
    )
    lanes.append_turn_messages(
        claim.turn, [{"role": "tool", "tool_call_id": "c1", "content": "ok"}], first_index=2
    )
    assert first[0] is not None
    assert again == [None]
    numbers = [(n, m["role"]) for n, _, m in lanes.turn_messages(claim.turn)]
    assert numbers == [(0, "user"), (1, "assistant"), (2, "tool")]


def test_a_turn_whose_row_id_an_older_journal_holds_takes_the_next_free_id(store, lanes):
    entry = _entry(store)
    accepted = _accept(lanes, entry, "first")
    held = accepted.inbox_id
    assert accepted.turn_id() == held  # told the turn that will answer it
    # A journal from before turns took their row's id: some turn already has this one.
    with store.database.transaction() as conn:
        conn.insert_turn(
            session_key=entry.session_key,
            session_id=entry.session_id,
            inbox_id=held,
            source={},
            accepted_at=0,
            started_at=0,
        )
    first = lanes.claim_next(entry.session_key, entry.session_id, user_message=_user_message)
    assert first.turn.id == held + 1
    lanes.commit_reply(first, [{"role": "user", "content": "first"}], reply="ok")
    # The next row's id is the turn just drawn: it moves on again, never onto a taken id,
    # and its acceptance names no turn.
    assert _accept(lanes, entry, "second").turn_id() is None
    second = lanes.claim_next(entry.session_key, entry.session_id, user_message=_user_message)
    assert second.item.id == held + 1
    assert second.turn.id == held + 2
    # Each turn reads back only its own numbered messages.
    assert [m["content"] for _, _, m in lanes.turn_messages(first.turn)] == ["first"]
    assert [m["content"] for _, _, m in lanes.turn_messages(second.turn)] == ["second"]


def _user_message(item, turn_id):
    return {"role": "user", "content": item.text}


def test_the_context_read_right_after_a_claim_holds_its_user_message(store, lanes):
    entry = _entry(store)
    _accept(lanes, entry, "hi")
    claim = lanes.claim_next(entry.session_key, entry.session_id, user_message=_user_message)
    assert claim is not None
    assert claim.user_entry_id is not None
    context = store.short_model_context(entry.session_id, INLINE_CONTEXT_ENTRIES)
    assert [m["content"] for m in context.messages] == ["hi"]


def test_a_write_between_a_claim_and_its_context_read_is_in_the_context(store, lanes):
    # PostgreSQL sends the context read with the claim's commit; a transaction after it must
    # not be answered from that read.
    entry = _entry(store)
    _accept(lanes, entry, "hi")
    lanes.claim_next(entry.session_key, entry.session_id, user_message=_user_message)
    store.append_messages(entry.session_id, [{"role": "assistant", "content": "later"}])
    context = store.short_model_context(entry.session_id, INLINE_CONTEXT_ENTRIES)
    assert [m["content"] for m in context.messages] == ["hi", "later"]
    # Another session's read right after a claim is its own, not the one sent ahead.
    other = _entry(store, SessionSource(platform="telegram", chat_id="other"))
    _accept(lanes, entry, "again")
    store.append_messages(other.session_id, [{"role": "user", "content": "elsewhere"}])
    lanes.claim_next(entry.session_key, entry.session_id, user_message=_user_message)
    context = store.short_model_context(other.session_id, INLINE_CONTEXT_ENTRIES)
    assert [m["content"] for m in context.messages] == ["elsewhere"]


def test_a_claim_inside_an_outer_transaction_tells_its_user_entry_after_the_commit(store, lanes):
    # As the gateway claims: the accept and its claim inside the routing's transaction. On
    # PostgreSQL the user message's append is answered with that commit, not before it.
    from sessiongate.store.changes import ChangeKind

    entry = _entry(store)
    told: list = []
    store.add_change_listener(told.extend)
    _, claim = _claim_as_routed(lanes, entry, _user_message)
    assert claim is not None
    stored = claim.user_entry_id
    assert stored is not None
    assert claim.user_entry_id == stored  # asked again: the same answer
    appended = [c.entry_id for c in told if c.kind is ChangeKind.TRANSCRIPT_APPENDED]
    assert appended == [stored]
    assert [m["content"] for m in store.load_transcript(entry.session_id)] == ["hi"]


def _claim_as_routed(lanes, entry, user_message):
    """`accept_and_claim` inside the routing's transaction, as the gateway calls it."""
    with lanes.atomic():
        return lanes.accept_and_claim(
            Inbound(SOURCE, "hi"),
            entry=entry,
            kind=InboxKind.SLOT,
            cap=32,
            user_message=user_message,
        )


@pytest.mark.parametrize(
    ("text", "name"),
    [("nul\x00inside", "Ann"), ("lone \ud800 surrogate", "Ann"), ("plain", "A\x00nn")],
    ids=["nul", "surrogate", "nul-in-metadata"],
)
def test_a_user_message_the_database_could_refuse_is_left_to_the_outcome(store, lanes, text, name):
    entry = _entry(store)
    message = {"role": "user", "content": text, "metadata": {"sender": name}}
    acceptance, claim = _claim_as_routed(lanes, entry, lambda item, turn_id: message)
    # The claim stands (its row and turn committed). The message is stored as it is where
    # the database takes it (SQLite takes NUL), else not at all: the outcome appends it again.
    assert claim is not None
    assert acceptance.status is AcceptStatus.ACCEPTED
    assert lanes.get_turn(claim.turn.id).state is TurnState.RUNNING
    stored = [m["content"] for m in store.load_transcript(entry.session_id)]
    assert stored == ([] if claim.user_entry_id is None else [text])


def test_a_message_appended_ahead_to_a_session_gone_stores_nothing(store):
    gone = store.get_or_create_session(SessionSource(platform="telegram", chat_id="gone"))
    store.delete_session(gone.session_key)
    with store.database.transaction():
        entry_id = store.append_message_ahead(
            gone.session_id, {"role": "user", "content": "x"}, idempotency_key="k"
        )
    # Not sent ahead here (SQLite), or sent and answered: no entry.
    assert entry_id is None or entry_id() is None
