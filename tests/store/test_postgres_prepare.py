"""`store.prepare_threshold`: when the writer's statements become server-side prepared ones
on PostgreSQL (never, for PgBouncer in transaction mode)."""

from __future__ import annotations

import time

import pytest

from sessiongate import GatewayConfig, SessionSource, SessionStore


def _prepared_after_turns(pg_schema, tmp_path, threshold: int | None, turns: int) -> int:
    config = GatewayConfig(store={"url": pg_schema.url, "prepare_threshold": threshold})  # type: ignore[arg-type]
    store = SessionStore(tmp_path / "sessions", config)
    try:
        entry = store.get_or_create_session(SessionSource(platform="telegram", chat_id="1"))
        for i in range(turns):
            store.append_messages(entry.session_id, [{"role": "user", "content": f"m{i}"}])
        conn = store.database.conn  # type: ignore[attr-defined]
        row = conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()
        return int(row[0])
    finally:
        store.close()


def test_unset_never_prepares(pg_schema, tmp_path):
    assert _prepared_after_turns(pg_schema, tmp_path, None, 10) == 0


def test_zero_prepares_at_the_first_run(pg_schema, tmp_path):
    assert _prepared_after_turns(pg_schema, tmp_path, 0, 1) > 0


def test_the_default_prepares_what_repeats(pg_schema, tmp_path):
    assert _prepared_after_turns(pg_schema, tmp_path, 5, 1) == 0
    assert _prepared_after_turns(pg_schema, tmp_path / "again", 5, 10) > 0


def test_a_negative_threshold_is_refused():
    with pytest.raises(ValueError, match="prepare_threshold"):
        GatewayConfig(store={"prepare_threshold": -1})  # type: ignore[arg-type]


# What the writer's pipeline does when an error ends it: a statement that reached the
# threshold in the same pipeline had its `Parse` skipped by the server.
_STATEMENT = "SELECT %s::int + 1"


@pytest.fixture
def wired(pg_schema):
    """A connection whose `_STATEMENT` is one run from being prepared, its `Wire`, and a
    second connection holding an advisory lock (to keep a statement of the first waiting)."""
    import psycopg

    from sessiongate.store.postgres._pipeline import Wire

    conn = psycopg.connect(pg_schema.url, autocommit=True)
    blocker = psycopg.connect(pg_schema.url, autocommit=True)
    conn.prepare_threshold = 5
    for i in range(5):
        conn.execute(_STATEMENT, (i,))
    for _ in range(2):  # a rollback psycopg has seen before no longer clears its cache
        conn.execute("ROLLBACK")
        with conn.transaction():
            for control in ("SAVEPOINT s", "ROLLBACK TO SAVEPOINT s", "RELEASE SAVEPOINT s"):
                conn.execute(control)
    blocker.execute("SELECT pg_advisory_lock(7)")
    with conn, blocker:
        yield conn, Wire(conn), blocker


def _fail_before_the_prepare(conn, blocker) -> None:
    """Queue a statement that waits on the lock, then the run that prepares `_STATEMENT`,
    then cancel the first once the server waits in it: the error comes after both were
    sent, whatever the timing (a cancel that arrived before it waited would be lost)."""
    conn.cursor().execute("SELECT pg_advisory_xact_lock(7)")
    conn.cursor().execute(_STATEMENT, (1,))
    pid = conn.info.backend_pid
    deadline = time.monotonic() + 30  # a hang guard, never a timing assertion
    while not blocker.execute(_WAITING, (pid,)).fetchone()[0]:
        assert time.monotonic() < deadline, "the statement never waited on the lock"
    blocker.execute("SELECT pg_cancel_backend(%s)", (pid,))


_WAITING = "SELECT count(*) > 0 FROM pg_locks WHERE pid = %s AND NOT granted"


def test_a_parse_an_aborted_pipeline_skipped_is_not_taken_for_prepared(wired):
    import psycopg

    conn, wire, blocker = wired
    wire.begin()
    _fail_before_the_prepare(conn, blocker)
    with pytest.raises(psycopg.errors.QueryCanceled):
        wire.commit()
    wire.rollback()
    wire.begin()
    cursor = conn.cursor()
    cursor.execute(_STATEMENT, (2,))
    assert cursor.fetchone() == (3,)
    wire.commit()


def test_the_same_inside_a_savepoint_that_is_rolled_back(wired):
    import psycopg

    conn, wire, blocker = wired
    wire.begin()
    wire.control("SAVEPOINT s")
    _fail_before_the_prepare(conn, blocker)
    with pytest.raises(psycopg.errors.QueryCanceled):
        wire.settle()
    wire.undo_savepoint("s")
    cursor = conn.cursor()
    cursor.execute(_STATEMENT, (2,))
    assert cursor.fetchone() == (3,)
    wire.commit()
