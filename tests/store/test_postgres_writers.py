"""The PostgreSQL backend's writers: one connection per thread for the length of its outermost
transaction, so calls on different threads overlap their round trips, while one thread's
nested calls share one transaction (`store/postgres/database.py`)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from sessiongate.errors import StoreUnavailableError
from sessiongate.store.postgres.database import PostgresDatabase

# A hang guard, not a timing check: each wait below ends as soon as its condition holds.
GUARD_SECONDS = 30


@pytest.fixture
def db(pg_schema):
    database = PostgresDatabase(pg_schema.url, writers=2)
    with database.transaction() as tx:
        tx.conn.execute("CREATE TABLE t (n integer)")
    yield database
    database.close()


def _count(db: PostgresDatabase) -> int:
    with db.read() as tx:
        row = tx.conn.execute("SELECT count(*) FROM t").fetchone()
    assert row is not None
    return int(row[0])


def _held_open(db: PostgresDatabase, opened: threading.Event, go: threading.Event) -> None:
    with db.transaction() as tx:
        tx.conn.execute("INSERT INTO t VALUES (1)")
        opened.set()
        assert go.wait(GUARD_SECONDS)


def test_a_transaction_on_another_thread_commits_while_one_stays_open(db):
    opened, go = threading.Event(), threading.Event()
    with ThreadPoolExecutor(2) as pool:
        holder = pool.submit(_held_open, db, opened, go)
        assert opened.wait(GUARD_SECONDS)

        def insert() -> int:
            with db.transaction() as tx:
                tx.conn.execute("INSERT INTO t VALUES (2)")
            return _count(db)

        # One writer behind one lock would wait here for the open transaction to end.
        assert pool.submit(insert).result(GUARD_SECONDS) == 1
        go.set()
        holder.result(GUARD_SECONDS)
    assert _count(db) == 2
    assert db.writers == 2


def test_nested_calls_on_one_thread_share_its_writer_and_roll_back_alone(db):
    def nested_call_fails(outer: object) -> None:
        with db.transaction() as inner:
            assert inner is outer
            inner.conn.execute("INSERT INTO t VALUES (2)")
            raise RuntimeError("the nested call fails")

    with db.transaction() as tx:
        tx.conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(RuntimeError):
            nested_call_fails(tx)
        with db.read() as read:
            assert read is tx
            assert read.conn.execute("SELECT count(*) FROM t").fetchone() == (1,)
    assert _count(db) == 1
    assert db.writers == 1  # one thread at a time: one connection


def test_a_thread_waits_for_a_writer_when_all_are_taken(db):
    opened = [threading.Event(), threading.Event()]
    go = threading.Event()
    done = threading.Event()
    with ThreadPoolExecutor(3) as pool:
        holders = [pool.submit(_held_open, db, opened[i], go) for i in range(2)]
        assert all(event.wait(GUARD_SECONDS) for event in opened)

        def third() -> None:
            with db.transaction() as tx:
                tx.conn.execute("INSERT INTO t VALUES (3)")
            done.set()

        waiting = pool.submit(third)
        assert not done.is_set()  # both writers are in open transactions
        go.set()
        waiting.result(GUARD_SECONDS)
        for holder in holders:
            holder.result(GUARD_SECONDS)
    assert db.writers == 2
    assert _count(db) == 3


def test_a_call_on_an_event_loop_is_counted_as_the_loop_waiting(db):
    before = db.loop_waits

    async def on_the_loop() -> int:
        inline = _count(db)
        await asyncio.to_thread(_count, db)  # off the loop: not counted
        return inline

    asyncio.run(on_the_loop())
    assert db.loop_waits == before + 1


def test_a_closed_store_refuses_new_calls_and_lets_one_in_flight_finish(db):
    opened, go = threading.Event(), threading.Event()
    with ThreadPoolExecutor(1) as pool:
        holder = pool.submit(_held_open, db, opened, go)
        assert opened.wait(GUARD_SECONDS)
        db.close()
        with pytest.raises(StoreUnavailableError):
            _count(db)
        go.set()
        holder.result(GUARD_SECONDS)  # as a close waited for the one writer before
    assert all(writer.conn.closed for writer in db._writers)  # closed when given back
