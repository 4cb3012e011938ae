"""`store.prepare_threshold`: when the writer's statements become server-side prepared ones
on PostgreSQL (never, for PgBouncer in transaction mode)."""

from __future__ import annotations

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


def _wire(pg_schema):
    import psycopg

    from sessiongate.store.postgres._pipeline import Wire

    conn = psycopg.connect(pg_schema.url, autocommit=True)
    conn.prepare_threshold = 5
    for i in range(5):
        conn.execute(_STATEMENT, (i,))
    for _ in range(2):  # a rollback psycopg has seen before no longer clears its cache
        conn.execute("ROLLBACK")
    return conn, Wire(conn)


def test_a_parse_an_aborted_pipeline_skipped_is_not_taken_for_prepared(pg_schema):
    import psycopg

    conn, wire = _wire(pg_schema)
    with conn:
        wire.begin()
        conn.cursor().execute("SELECT 1/0")
        conn.cursor().execute(_STATEMENT, (1,))  # its sixth run: the one that prepares it
        with pytest.raises(psycopg.errors.DivisionByZero):
            wire.commit()
        wire.rollback()
        wire.begin()
        cursor = conn.cursor()
        cursor.execute(_STATEMENT, (2,))
        assert cursor.fetchone() == (3,)
        wire.commit()


def test_the_same_inside_a_savepoint_that_is_rolled_back(pg_schema):
    import psycopg

    conn, wire = _wire(pg_schema)
    with conn:
        wire.begin()
        wire.control("SAVEPOINT s")
        conn.cursor().execute("SELECT 1/0")
        conn.cursor().execute(_STATEMENT, (1,))
        with pytest.raises(psycopg.errors.DivisionByZero):
            wire.settle()
        wire.undo_savepoint("s")
        cursor = conn.cursor()
        cursor.execute(_STATEMENT, (2,))
        assert cursor.fetchone() == (3,)
        wire.commit()
