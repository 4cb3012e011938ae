"""Lane and leader leases with epochs on a real PostgreSQL (DESIGN decision 12): scripted
interleavings of two instances, each with its own connection, on one private schema.

Time is the database's: a lease is expired by writing its `expires_at` into the past, never
by sleeping.
"""

from __future__ import annotations

import contextlib
import threading

import pytest

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.errors import (
    InvalidEntryError,
    LeaseLostError,
    SessionNotFoundError,
    StoreCorruptError,
)
from sessiongate.store.lanes import Inbound, InboxKind, LaneStore
from sessiongate.store.ownership import Ownership

SOURCE = SessionSource(platform="api", chat_id="1")


@pytest.fixture
def pair(tmp_path, pg_schema, clock):
    """Two instances (a store, its lanes and its ownership each) on one database."""
    opened = []

    def instance(name: str):
        config = GatewayConfig(store={"url": pg_schema.url})  # type: ignore[arg-type]
        store = SessionStore(tmp_path / name, config, clock=clock)
        own = Ownership(store.database, instance_id=name)  # type: ignore[arg-type]
        own.start()
        opened.append(store)
        return store, LaneStore(store), own

    yield instance("a"), instance("b")
    for store in opened:
        store.close()


_EXPIRE = {
    "lane_lease": "UPDATE lane_lease SET expires_at = now() - interval '1 second'",
    "leader_lease": "UPDATE leader_lease SET expires_at = now() - interval '1 second'",
}


def expire(store: SessionStore, table: str = "lane_lease") -> None:
    with store.database.transaction() as tx:
        tx.execute(_EXPIRE[table])  # type: ignore[attr-defined]


def test_one_owner_at_a_time_and_each_takeover_raises_the_epoch(pair):
    (store_a, _, a), (_store_b, _, b) = pair
    first = a.claim("k")
    assert first is not None
    assert first.epoch == 1
    assert b.claim("k") is None
    expire(store_a)
    second = b.claim("k")
    assert second is not None
    assert second.epoch == 2
    assert a.claim("k") is None


def test_a_stale_owner_cannot_commit_an_outcome_and_nothing_of_it_is_written(pair):
    (store_a, lanes_a, a), (store_b, _, b) = pair
    entry = store_a.get_or_create_session(SOURCE)
    lanes_a.accept(
        Inbound(source=SOURCE, text="hi", message_id="m1"),
        session_key=entry.session_key,
        session_id=entry.session_id,
        kind=InboxKind.SLOT,
        cap=32,
    )
    lease = a.claim(entry.session_key)
    assert lease is not None
    claim = lanes_a.claim_next(entry.session_key, entry.session_id)
    assert claim is not None
    expire(store_a)  # a pauses past its lease (SIGSTOP) ...
    assert b.claim(entry.session_key) is not None  # ... and b takes the lane over
    with pytest.raises(LeaseLostError), a.fenced(lease):
        lanes_a.commit_reply(claim, [{"role": "user", "content": "hi"}], reply="stale")
    assert a.fenced_commits == 1
    assert store_b.load_transcript(entry.session_id) == []
    turn = LaneStore(store_b).get_turn(claim.turn.id)
    assert turn is not None
    assert turn.state == "running"  # still the successor's to resume, not replied


def test_a_lost_lease_fails_the_transaction_even_when_nothing_reads_before_the_commit(pair):
    (store_a, _lanes_a, a), (store_b, _, b) = pair
    entry = store_a.get_or_create_session(SOURCE)
    lease = a.claim(entry.session_key)
    assert lease is not None
    expire(store_a)
    successor = b.claim(entry.session_key)
    assert successor is not None
    # The body only queues (the lane lock): the renewal's refusal comes with the commit's
    # answer, and is still the lease's error.
    with pytest.raises(LeaseLostError), a.fenced(lease, lock_lane=True):
        pass
    assert a.fenced_commits == 1
    # A refusal inside a nested call (a savepoint made after the failed renewal) too.
    with pytest.raises(LeaseLostError), a.fenced(lease):
        store_a.suspend_session(entry.session_key)
    assert a.fenced_commits == 2
    assert store_b.get_session(entry.session_key).suspended is False
    with b.fenced(successor):
        pass  # the successor's lease is untouched


def test_an_owner_commits_under_its_lease_and_the_commit_renews_it(pair):
    (store_a, _lanes_a, a), _ = pair
    entry = store_a.get_or_create_session(SOURCE)
    lease = a.claim(entry.session_key)
    assert lease is not None
    with a.fenced(lease):
        store_a.append_messages(entry.session_id, [{"role": "user", "content": "kept"}])
    assert [m["content"] for m in store_a.load_transcript(entry.session_id)] == ["kept"]
    assert a.fenced_commits == 0


def test_a_takeover_waits_for_the_owners_fenced_commit_and_then_fails(pair):
    (store_a, _, a), (_, _, b) = pair
    lease = a.claim("k")
    assert lease is not None
    inside = threading.Event()
    results: list[object] = []

    def take_over() -> None:
        inside.wait()
        results.append(b.claim("k"))

    thief = threading.Thread(target=take_over)
    thief.start()
    with a.fenced(lease):
        # The renewal is sent with the transaction's next statements: once one was read, it
        # has run, and its row lock is held to the commit. The takeover's upsert blocks on it.
        store_a.get_session("agent:main:telegram:dm:none")
        inside.set()
        thief.join(timeout=0.5)
        assert thief.is_alive()
    thief.join(timeout=30)
    assert results == [None]  # it saw the renewed lease, unexpired


def test_a_heartbeat_renews_live_leases_but_never_revives_an_expired_one(pair):
    (store_a, _, a), (_, _, b) = pair
    assert a.claim("k1") is not None
    assert a.claim("k2") is not None
    assert a.heartbeat() == 2
    expire(store_a)
    assert a.heartbeat() == 0
    assert b.claim("k1") is not None


def test_release_is_refused_while_a_message_waits(pair):
    (store_a, lanes_a, a), (_, _, b) = pair
    entry = store_a.get_or_create_session(SOURCE)
    lease = a.claim(entry.session_key)
    assert lease is not None
    accepted = lanes_a.accept(
        Inbound(source=SOURCE, text="wait for me"),
        session_key=entry.session_key,
        session_id=entry.session_id,
        kind=InboxKind.SLOT,
        cap=32,
    )
    assert not a.release(lease)  # the accepted message keeps its owner
    assert accepted.inbox_id is not None
    assert lanes_a.drop_pending(accepted.inbox_id)
    assert a.release(lease)
    taken = b.claim(entry.session_key)
    assert taken is not None
    assert taken.epoch == lease.epoch + 1


def test_a_leader_renews_at_its_epoch_and_a_successor_fences_it(pair):
    (store_a, _, a), (_, _, b) = pair
    lead = a.claim_leader("telegram:poller")
    assert lead is not None
    assert b.claim_leader("telegram:poller") is None
    again = a.claim_leader("telegram:poller")
    assert again == lead  # a renewal keeps the epoch
    expire(store_a, "leader_lease")
    successor = b.claim_leader("telegram:poller")
    assert successor is not None
    assert successor.epoch == lead.epoch + 1
    with pytest.raises(LeaseLostError), a.fenced(lead):
        pass


def test_instances_list_heartbeats_lanes_and_roles_and_the_dead_are_reaped(pair):
    (store_a, _, a), (_, _, b) = pair
    a.claim("k1")
    b.claim("k2")
    b.claim("k3")
    b.claim_leader("discord:gateway")
    listed = {i["instance_id"]: i for i in a.instances()}
    assert {k: (v["lanes"], v["leader_of"], v["state"]) for k, v in listed.items()} == {
        "a": (1, [], "live"),
        "b": (2, ["discord:gateway"], "live"),
    }
    with store_a.database.transaction() as tx:
        tx.execute(  # type: ignore[attr-defined]
            "UPDATE instances SET heartbeat_at = now() - interval '1 hour' WHERE instance_id = 'b'"
        )
    assert a.reap() == ["b"]
    with pytest.raises(LeaseLostError):
        b.heartbeat()  # b learns it was declared dead and must stop
    assert a.claim("k2") is not None  # its lanes moved on at once
    assert a.claim_leader("discord:gateway") is not None


def test_an_instance_declared_dead_inside_a_transaction_loses_its_session_and_its_locks(pair):
    # A process paused in the middle of a (pipelined) transaction holds its row locks, and the
    # server's idle-in-transaction timeout never sees it idle: declaring it dead ends its
    # session, so neither the reaper nor the successor waits for it to wake.
    (_store_a, _, a), (store_b, _, b) = pair
    lease = a.claim("k")
    assert lease is not None
    paused, wake = threading.Event(), threading.Event()
    outcome: list[BaseException] = []

    def paused_owner() -> None:
        try:
            with a.fenced(lease):
                paused.set()
                wake.wait(timeout=60)
        except BaseException as exc:  # the commit of a session that was ended
            outcome.append(exc)

    owner = threading.Thread(target=paused_owner)
    owner.start()
    assert paused.wait(timeout=30)
    with store_b.database.transaction() as tx:
        # a's last heartbeat as old as its session; b's in the future (not stale itself)
        tx.execute(  # type: ignore[attr-defined]
            "UPDATE instances SET heartbeat_at = CASE instance_id WHEN 'b' "
            "THEN now() + interval '1 hour' ELSE (SELECT backend_start FROM pg_stat_activity "
            "WHERE pid = backend_pid) END"
        )
    reaped: list[list[str]] = []
    reaper = threading.Thread(target=lambda: reaped.append(b.reap(stale_after=0)))
    reaper.start()
    reaper.join(timeout=30)
    try:
        assert not reaper.is_alive(), "the reaper waited for the paused instance"
        assert reaped == [["a"]]
        taken = b.claim("k")
        assert taken is not None
        assert taken.epoch == lease.epoch + 1
    finally:
        wake.set()
        owner.join(timeout=30)
        reaper.join(timeout=30)
    assert outcome, "the paused owner's commit went through"


def test_a_clean_stop_frees_the_leases_at_once(pair):
    (_, _, a), (_, _, b) = pair
    assert a.claim("k") is not None
    a.stop()
    assert b.claim("k") is not None


def test_two_instances_routing_a_new_conversation_at_once_share_one_session(pair):
    # Under READ COMMITTED nothing locks a row that does not exist yet: the route of a new
    # key is locked by key, so the second instance waits and then finds the first's session.
    (store_a, _, _), (store_b, _, _) = pair
    source = SessionSource(platform="api", chat_id="new-at-once")
    found: list[str] = []
    second = threading.Thread(
        target=lambda: found.append(store_b.get_or_create_session(source).session_id)
    )
    with store_a.database.transaction():
        first = store_a.get_or_create_session(source)
        second.start()
        second.join(timeout=0.5)
        assert second.is_alive()  # waiting on the first's lock, not creating its own
    second.join(timeout=30)
    assert found == [first.session_id]


def _age_heartbeat(store, name: str) -> None:
    with store.database.transaction() as tx:
        tx.conn.execute(
            "UPDATE instances SET heartbeat_at = now() - interval '1 hour' WHERE instance_id = %s",
            (name,),
        )


def test_a_vanished_process_is_reaped_at_once_and_a_silent_live_one_is_not(pair, pg_schema):
    from sessiongate.store.postgres.wakeups import Wakeups

    (sa, _, a), (sb, _, b) = pair
    link = Wakeups(pg_schema.url, lambda _key: None, hints=False)
    link.listen("a")
    lease = a.claim("lane")
    assert lease is not None

    def probe_ready() -> bool:
        with sb.database.read() as tx:
            row = tx.conn.execute(
                "SELECT probe_ready FROM instances WHERE instance_id = 'a'"
            ).fetchone()
        return bool(row[0])

    for _ in range(500):  # the link's thread takes the lock (a hang guard)
        if probe_ready():
            break
        threading.Event().wait(0.01)
    _age_heartbeat(sa, "a")
    # Late but still holding its liveness lock (paused, or cut off): the TTL decides.
    assert b.reap_vanished() == []
    link.close()  # the process is gone: its session, and with it the lock
    reaped: list[str] = []
    for _ in range(500):  # the server ends the closed session a moment later (a hang guard)
        reaped = b.reap_vanished()
        if reaped:
            break
        threading.Event().wait(0.01)
    assert reaped == ["a"]
    assert b.claim("lane") is not None  # its lane moves on now, at a higher epoch
    with pytest.raises(LeaseLostError):
        a.heartbeat()


def test_a_claim_whose_answer_was_lost_is_taken_again_at_a_new_epoch(pair):
    (_, _, a), (_, _, b) = pair
    lost = a.claim("k")  # committed, but say the connection died before the answer came
    assert lost is not None
    again = a.claim("k")
    assert again is not None
    assert again.epoch == lost.epoch + 1  # whatever the lost answer's holder did is fenced
    assert b.claim("k") is None
    with pytest.raises(LeaseLostError), a.fenced(lost):
        pass
    with a.fenced(again):
        pass


def test_a_lock_held_by_a_cut_off_peer_fails_the_call_instead_of_freezing_the_writer(
    pair, pg_schema
):
    import psycopg

    from sessiongate.errors import StoreUnavailableError
    from sessiongate.store.postgres import database

    (store_a, lanes_a, _a), _ = pair
    writer = store_a.database.conn  # type: ignore[attr-defined]
    assert writer.execute("SHOW lock_timeout").fetchone() == (database.WRITER_LOCK_TIMEOUT,)
    writer.execute("SET lock_timeout = '200ms'")  # shorter, for the test's sake
    # A peer whose link went silent mid-transaction: its lane lock stays held until the
    # server ends its session (after it is declared dead, a TTL away).
    with psycopg.connect(pg_schema.url) as peer:
        peer.execute("INSERT INTO lane_seq (session_key, next_seq) VALUES ('k', 1)")
        peer.commit()
        peer.execute("SELECT 1 FROM lane_seq WHERE session_key = 'k' FOR UPDATE")
        outcome: list[BaseException | None] = []

        def accept_on_that_lane() -> None:
            try:
                with lanes_a.atomic():
                    lanes_a.lock_lane("k")
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        worker = threading.Thread(target=accept_on_that_lane)
        worker.start()
        worker.join(timeout=30)  # a hang guard: without the bound it waits for the peer
        assert not worker.is_alive()
        peer.rollback()
    assert len(outcome) == 1
    assert isinstance(outcome[0], StoreUnavailableError)
    # The writer goes on: its heartbeat, its reaper, its other lanes.
    with lanes_a.atomic():
        lanes_a.lock_lane("k")


def _held_lane(store, own):
    """SOURCE's session and its lane's lease, taken by `own`."""
    entry = store.get_or_create_session(SOURCE)
    lease = own.claim(entry.session_key)
    assert lease is not None
    return entry, lease


def test_inside_a_fence_a_failed_call_that_was_passed_over_commits_nothing(pair):
    # The fence's nested calls make no savepoints: a caller that catches one's failure and
    # goes on would commit what it wrote, so the commit refuses instead.
    (store_a, _lanes_a, a), _ = pair
    entry, lease = _held_lane(store_a, a)

    def pass_over_a_failure() -> None:
        with a.fenced(lease):
            store_a.append_messages(entry.session_id, [{"role": "user", "content": "kept?"}])
            with contextlib.suppress(SessionNotFoundError):
                store_a.append_messages(
                    "20260101_000000_deadbeef", [{"role": "user", "content": "x"}]
                )

    with pytest.raises(StoreCorruptError, match="nothing was committed"):
        pass_over_a_failure()
    assert store_a.load_transcript(entry.session_id) == []


def test_inside_a_fence_a_savepoint_rolls_back_only_its_own_failed_call(pair):
    (store_a, _lanes_a, a), _ = pair
    entry, lease = _held_lane(store_a, a)

    def fails_after_a_write() -> None:
        with store_a.database.savepoint():
            store_a.append_messages(entry.session_id, [{"role": "assistant", "content": "gone"}])
            store_a.append_messages(entry.session_id, [{"role": "user", "content": "bad\x00"}])

    with a.fenced(lease):
        store_a.append_messages(entry.session_id, [{"role": "user", "content": "kept"}])
        with pytest.raises(InvalidEntryError):
            fails_after_a_write()
        store_a.append_messages(entry.session_id, [{"role": "assistant", "content": "after"}])
    assert [m["content"] for m in store_a.load_transcript(entry.session_id)] == ["kept", "after"]
