"""The PostgreSQL store across a server restart and a crash, on a private cluster
(`tests/pg_cluster.py`; the shared server is never restarted).

A restart ends every session: the writer, the pooled readers, the wake-up listener and its
liveness lock. What was committed is there afterwards (fsync on, WAL recovery after the
crash), the writer connects again on the next call after the one that found its connection
dead, a pooled reader that died meanwhile is replaced without failing a read, the listener
connects again and listens again, and the others' liveness probe does not take every free
lock after a restart for a process gone.
"""

from __future__ import annotations

import uuid

import pytest

from postgres_support import wait_for, with_schema
from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.errors import StoreUnavailableError
from sessiongate.store.ownership import Ownership
from sessiongate.store.postgres.wakeups import Wakeups

SOURCE = SessionSource(platform="api", chat_id="1")


@pytest.fixture
def schema_url(private_cluster):
    import psycopg

    name = f"sg_restart_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(private_cluster.url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    return with_schema(private_cluster.url, name)


@pytest.fixture
def open_store(tmp_path, schema_url, clock):
    opened: list[SessionStore] = []

    def make(name: str) -> SessionStore:
        config = GatewayConfig(store={"url": schema_url})  # type: ignore[arg-type]
        store = SessionStore(tmp_path / name, config, clock=clock)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def _first_call_after_a_restart(call):
    """The first call on a connection the server dropped may fail (it finds the connection
    dead); the next one connects again and must succeed."""
    try:
        return call()
    except StoreUnavailableError:
        return call()


@pytest.mark.parametrize("how", ["restart", "crash"])
def test_what_was_committed_survives_and_the_writer_connects_again(
    how, open_store, private_cluster
):
    store = open_store("a")
    entry = store.get_or_create_session(SOURCE)
    store.append_messages(entry.session_id, [{"role": "user", "content": "before"}])
    getattr(private_cluster, how)()
    _first_call_after_a_restart(lambda: store.get_session(entry.session_key))
    store.append_messages(entry.session_id, [{"role": "user", "content": "after"}])
    contents = [e.get("content") for e in store.load_events(entry.session_id)]
    assert contents[-2:] == ["before", "after"]


def test_a_snapshot_read_after_a_restart_does_not_fail_on_a_dead_pooled_connection(
    open_store, private_cluster
):
    store = open_store("a")
    entry = store.get_or_create_session(SOURCE)
    store.append_messages(entry.session_id, [{"role": "user", "content": "hi"}])
    db = store.database
    with db.snapshot() as tx:  # a pooled reader is open, and idle afterwards
        tx.conn.execute("SELECT 1")
    private_cluster.restart()
    with db.snapshot() as tx:  # the dead one is dropped and another taken, not an error
        assert tx.conn.execute("SELECT 1").fetchone() == (1,)


def test_the_listener_listens_again_and_takes_its_liveness_lock_again(open_store, private_cluster):
    sa, sb = open_store("a"), open_store("b")
    a = Ownership(sa.database, instance_id="a")  # type: ignore[arg-type]
    b = Ownership(sb.database, instance_id="b")  # type: ignore[arg-type]
    a.start()
    b.start()
    heard: list[str] = []
    link = Wakeups(sa.database._dsn, heard.append)  # type: ignore[attr-defined]
    link.listen("a")
    try:
        assert a.claim("lane") is not None
        assert wait_for(lambda: b.nudge("lane") and "lane" in heard)
        private_cluster.restart()
        heard.clear()
        _first_call_after_a_restart(lambda: b.nudge("lane"))
        # A hint sent while the listener was away is gone; one sent once it is back arrives.
        assert wait_for(lambda: b.nudge("lane") and "lane" in heard)
        with sb.database.read() as tx:
            (locks,) = tx.conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            ).fetchone()
        assert locks == 1  # a's liveness lock, held again on the new server
    finally:
        link.close()


def test_a_restart_is_not_taken_for_every_process_gone(open_store, private_cluster):
    sa, sb = open_store("a"), open_store("b")
    a = Ownership(sa.database, instance_id="a")  # type: ignore[arg-type]
    # A grace no loaded machine outruns: the probe below comes within it however long the
    # restart and the calls before it took (the rule, not the clock, is under test).
    b = Ownership(sb.database, instance_id="b", restart_grace=3600)  # type: ignore[arg-type]
    a.start()
    b.start()
    with sa.database.transaction() as tx:
        # As `hold_liveness` leaves it: a's listener held its lock before the restart.
        tx.conn.execute("UPDATE instances SET probe_ready = true WHERE instance_id = 'a'")
    private_cluster.crash()
    _first_call_after_a_restart(lambda: b.instances())
    with sb.database.transaction() as tx:
        tx.conn.execute(
            "UPDATE instances SET heartbeat_at = now() - interval '1 hour' WHERE instance_id = 'a'"
        )
    # a's heartbeat is late and its lock is free, as every instance's is just after a restart:
    # its listener may not be back yet, so the probe leaves it to the TTL ...
    assert b.reap_vanished() == []
    # ... which still reaps an instance that stays silent.
    assert b.reap(stale_after=60) == ["a"]
