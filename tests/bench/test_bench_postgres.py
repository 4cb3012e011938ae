"""The gateway on PostgreSQL in the benchmark: skipped with a reason without a server, and
with one, a real child process on a real server whose round trips are counted from libpq's
protocol trace. No speed is asserted; the counts and the shape of the results are."""

from __future__ import annotations

import tempfile

import pytest

from sessiongate_bench.postgres import (
    ENV_URL,
    count_trace,
    postgres_url_from,
    run_postgres_section,
)
from sessiongate_bench.report import _postgres_lines, evaluate_goals


def test_without_a_url_the_section_is_skipped_with_how_to_name_one():
    result = run_postgres_section(None, chats=2, turns=2, timeout_s=30)
    assert result["status"] == "skipped"
    assert "--postgres-url" in result["reason"]
    assert ENV_URL in result["reason"]


def test_the_option_wins_over_the_environment(monkeypatch):
    assert postgres_url_from(None) is None
    monkeypatch.setenv(ENV_URL, "postgresql://env@127.0.0.1/db")
    assert postgres_url_from(None) == "postgresql://env@127.0.0.1/db"
    assert postgres_url_from("postgresql://opt@127.0.0.1/db") == "postgresql://opt@127.0.0.1/db"


def test_a_server_that_does_not_answer_is_a_skip_not_a_failure():
    result = run_postgres_section(
        "postgresql://nobody:secret@127.0.0.1:1/none", chats=2, turns=2, timeout_s=30
    )
    assert result["status"] == "skipped"
    assert "no PostgreSQL server answers" in result["reason"]
    assert "secret" not in result["reason"]


def test_the_report_says_why_postgres_was_not_measured():
    gateway = {
        "status": "ok",
        "in_process": {"turns_per_s": 1000.0, "overhead_ms": {"p50_ms": 1.0, "p99_ms": 2.0}},
        "postgres": {"status": "skipped", "reason": "no PostgreSQL URL"},
    }
    goals = {g["goal"]: g for g in evaluate_goals({"stores": {}, "gateway": gateway})}
    assert goals["Gateway on PostgreSQL ≥ 500 turns/s in process"]["passed"] is None
    assert "no PostgreSQL URL" in goals["PostgreSQL round trips ≤ 4 a turn"]["measured"]


def test_the_trace_counts_one_round_trip_per_wait_for_the_server(pg_schema):
    import psycopg

    with (
        psycopg.connect(pg_schema.url, autocommit=True) as conn,
        tempfile.TemporaryFile("w+") as trace,
    ):
        conn.pgconn.trace(trace.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        conn.execute("SELECT 1").fetchone()  # one round trip
        with conn.pipeline():
            conn.execute("BEGIN")
            conn.execute("SELECT 2")
            assert conn.execute("SELECT 3").fetchone() == (3,)  # one flush for all three
            conn.execute("COMMIT")  # and the sync at the end
        conn.pgconn.untrace()
        trace.seek(0)
        counts = count_trace(iter(trace))
    assert counts == {"round_trips": 3, "statements": 5, "commits": 1}


def test_the_section_measures_one_instance_on_a_real_server(pg_schema):
    from postgres_support import SERVER_URL

    section = run_postgres_section(SERVER_URL, chats=5, turns=20, timeout_s=300)
    assert section["status"] == "ok", section.get("reason")
    inproc = section["in_process"]
    assert inproc["turns"] == 20
    assert inproc["turns_per_s"] > 0
    # One transaction routes, accepts and claims; one commits the outcome.
    assert inproc["transactions_per_turn"] == pytest.approx(2.0, abs=0.05)
    assert inproc["statements_per_turn"] >= inproc["round_trips_per_turn"] >= 2
    # A chat's first turn creates its session and takes its lane: more of everything.
    first = inproc["first_turn"]
    assert first["round_trips_per_turn"] > inproc["round_trips_per_turn"]
    assert first["transactions_per_turn"] > inproc["transactions_per_turn"]
    gateway = {
        "status": "ok",
        "in_process": {"turns_per_s": 1000.0, "overhead_ms": {"p50_ms": 1.0, "p99_ms": 2.0}},
        "postgres": section,
    }
    goals = {g["goal"]: g for g in evaluate_goals({"stores": {}, "gateway": gateway})}
    assert goals["PostgreSQL round trips ≤ 4 a turn"]["passed"] is not None
    # And again with commits that do not wait for the disk (SQLite's default durability).
    assert inproc["async_commit"]["turns"] == 20
    assert inproc["async_commit"]["transactions_per_turn"] == pytest.approx(2.0, abs=0.05)
    default, async_commit = _postgres_lines(gateway)
    assert f"{inproc['round_trips_per_turn']:.2f} round trips" in default
    assert "synchronous_commit=off" in async_commit
