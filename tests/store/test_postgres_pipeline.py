"""The writer's pipeline on PostgreSQL: a queued statement waits in the client's buffer
until a statement is read (or the pipeline syncs), and then reaches the server, in order,
with its error raised at that read."""

from __future__ import annotations

import psycopg
import pytest

from sessiongate.store.postgres._pipeline import Wire
from sessiongate.store.postgres.database import _connect

_LOCK_IT = "SELECT v FROM t WHERE id = 1 FOR UPDATE NOWAIT"


@pytest.fixture
def wired(pg_schema):
    """The writer's kind of connection on a table of one row, its `Wire`, and a second
    connection to look from."""
    conn = _connect(pg_schema.url)
    other = psycopg.connect(pg_schema.url, autocommit=True)
    conn.execute("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)")
    conn.execute("INSERT INTO t VALUES (1, 0)")
    with conn, other:
        yield conn, Wire(conn), other


def test_a_queued_write_reaches_the_server_with_the_next_read(wired):
    conn, wire, other = wired
    wire.begin()
    conn.execute("UPDATE t SET v = 1 WHERE id = 1")
    # Not sent yet: the server has not locked the row.
    assert other.execute(_LOCK_IT).fetchone() == (0,)
    assert conn.execute("SELECT v FROM t WHERE id = 1").fetchone() == (1,)
    with pytest.raises(psycopg.errors.LockNotAvailable):
        other.execute(_LOCK_IT)
    wire.commit()
    assert other.execute("SELECT v FROM t").fetchall() == [(1,)]


def test_the_commit_sends_what_nobody_read(wired):
    conn, wire, other = wired
    wire.begin()
    for v in (2, 3):
        conn.execute("UPDATE t SET v = %s WHERE id = 1", (v,))
    wire.commit()
    assert other.execute("SELECT v FROM t").fetchall() == [(3,)]


def test_a_queued_write_fails_at_the_next_read_and_commits_nothing(wired):
    conn, wire, other = wired
    wire.begin()
    conn.execute("UPDATE t SET v = 5 WHERE id = 1")
    conn.execute("INSERT INTO t VALUES (1, 9)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("SELECT count(*) FROM t").fetchone()
    wire.rollback()
    assert other.execute("SELECT id, v FROM t").fetchall() == [(1, 0)]


def test_a_rowcount_is_its_statements_own(wired):
    conn, wire, _ = wired
    wire.begin()
    assert conn.execute("UPDATE t SET v = 7 WHERE id = 1").rowcount == 1
    assert conn.execute("UPDATE t SET v = 7 WHERE id = 2").rowcount == 0
    wire.commit()


def test_outside_a_transaction_a_statement_is_answered_at_once(wired):
    conn, _, other = wired
    conn.execute("UPDATE t SET v = 4 WHERE id = 1")
    assert other.execute("SELECT v FROM t").fetchall() == [(4,)]
