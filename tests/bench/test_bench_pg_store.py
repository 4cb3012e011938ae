"""The PostgreSQL store beside plain psycopg 3 in the benchmark: skipped with the reason without
a server; with one, a tiny run on the real server where every acknowledged message is counted
back, nothing is lost, and the report renders. No speed is asserted."""

from __future__ import annotations

from sessiongate_bench.pg_store import (
    PgStoreSizes,
    pg_store_goals,
    pg_store_lines,
    run_pg_store_section,
)
from sessiongate_bench.postgres import ENV_URL

TINY = PgStoreSizes(
    conversations=5,
    messages=40,
    rounds=2,
    writers=3,
    writer_turns=4,
    tail_messages=60,
    tail_reads=6,
    traced_turns=3,
)


def test_without_a_url_the_section_is_skipped_and_the_report_says_why():
    section = run_pg_store_section(None, quick=True)
    assert section["status"] == "skipped"
    assert ENV_URL in section["reason"]
    assert f"Not measured: {section['reason']}." in pg_store_lines(section)
    goals = pg_store_goals({"pg_store": section})
    assert len(goals) == 2
    assert all(g["passed"] is None for g in goals)
    assert all(g["measured"].startswith("not measured") for g in goals)


def test_a_tiny_run_on_a_real_server_counts_every_message(pg_schema):
    from postgres_support import SERVER_URL

    section = run_pg_store_section(SERVER_URL, quick=True, sizes=TINY)
    assert section["status"] == "ok", section.get("reason")

    appends = section["appends"]
    for side in ("sessiongate", "psycopg"):
        assert len(appends[side]["rounds"]) == TINY.rounds
        assert appends[side]["msg_per_s"] > 0
    assert appends["ratio"] > 0

    writers = section["writers"]
    assert writers["threads"] == TINY.writers
    for side in ("sessiongate", "psycopg"):
        w = writers[side]
        assert w["errors"] == 0, w["error_kinds"]
        assert w["lost"] == 0
        # Turns of 2, 3, 4, 2 messages per thread, every round: all acknowledged and stored.
        expected = TINY.rounds * TINY.writers * (2 + 3 + 4 + 2)
        assert w["acknowledged"] == w["stored"] == expected

    tail = section["tail_50"]
    assert tail["sessiongate"]["p50_ms"] > 0
    assert tail["psycopg"]["p50_ms"] > 0
    trips = section["round_trips"]
    for side in ("sessiongate", "psycopg"):
        assert trips[side]["commits_per_append"] == 1.0
        assert trips[side]["round_trips_per_append"] >= 1

    text = "\n".join(pg_store_lines(section))
    assert "| appends msg/s |" in text
    assert f"| {TINY.writers} writers msg/s" in text
    assert "| tail 50 p50 / p99 |" in text
    goals = pg_store_goals({"pg_store": section})
    assert [g["passed"] is not None for g in goals] == [True, True]
    assert "lost 0" in goals[1]["measured"]
