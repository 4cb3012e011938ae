"""`sessiongate forget`: a plan changes nothing, the erasure prints its receipt, a malformed
user is a usage error."""

from __future__ import annotations

import json


def test_forget_plans_then_erases_one_person(sg, home, seeded):
    plan = sg("forget", "--user", "telegram:alice", "--dry-run", "--home", str(home), "--json")
    assert plan.returncode == 0, plan.stderr
    planned = json.loads(plan.stdout)
    assert planned["keys"] == [seeded["alice"]]
    assert planned["receipt_id"] is None
    listed = json.loads(sg("sessions", "list", "--home", str(home), "--json").stdout)
    assert listed["total"] == 2

    done = sg("forget", "--user", "telegram:alice", "--home", str(home))
    assert done.returncode == 0, done.stderr
    assert "erasure receipt #1" in done.stdout
    assert "lanes deleted" in done.stdout
    listed = json.loads(sg("sessions", "list", "--home", str(home), "--json").stdout)
    assert [row["session_key"] for row in listed["sessions"]] == [seeded["bob"]]
    hits = json.loads(sg("sessions", "search", "fox", "--home", str(home), "--json").stdout)
    assert hits["results"] == []
    assert b"quick brown" not in (home / "sessions" / "state.db").read_bytes()


def test_forget_refuses_a_malformed_user(sg, home, seeded):
    result = sg("forget", "--user", "alice", "--home", str(home))
    assert result.returncode == 2
    assert "<platform>:<user_id>" in result.stderr


def test_forget_beside_a_serving_gateway_says_how_to_erase_through_it(sg, home, seeded):
    from sessiongate.gateway.recovery import HomeLock

    lock = HomeLock(home)
    lock.acquire()
    try:
        result = sg("forget", "--user", "telegram:bob", "--home", str(home))
    finally:
        lock.release()
    assert result.returncode == 0, result.stderr
    assert "POST /v1/erasure" in result.stderr
