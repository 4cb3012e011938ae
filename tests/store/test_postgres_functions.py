"""The PostgreSQL schema's own functions: the time conversions are exact and inlined, so no
statement pays for a SQL function call per value."""

from __future__ import annotations

import pytest

from sessiongate.store.postgres.database import PostgresDatabase

# The epoch, either side of it, a moment of 2025 and one of 2200, to the microsecond.
VALUES = [0, 1, -1, 1_764_700_000_123_456, 7_258_118_400_654_321]


@pytest.fixture
def conn(pg_schema):
    database = PostgresDatabase(pg_schema.url)
    try:
        yield database.conn
    finally:
        database.close()


def test_microseconds_go_there_and_back_exactly(conn):
    for us in VALUES:
        row = conn.execute("SELECT sg_us(sg_ts(%s::bigint))", (us,)).fetchone()
        assert row == (us,)


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT sg_ts(g) FROM generate_series($1::bigint, $1 + 1) g",
        "SELECT sg_us(now() + g * interval '1s') FROM generate_series($1::bigint, $1 + 1) g",
    ],
)
def test_the_planner_inlines_the_conversions(conn, statement):
    conn.execute(f"PREPARE probe(bigint) AS {statement}")
    plan = "\n".join(row[0] for row in conn.execute("EXPLAIN VERBOSE EXECUTE probe(1)"))
    assert "sg_ts" not in plan
    assert "sg_us" not in plan
