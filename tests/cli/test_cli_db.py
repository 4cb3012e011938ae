"""`sessiongate db status|upgrade` on both backends, through the real command."""

from __future__ import annotations

import json
import os

import pytest

from sessiongate import GatewayConfig, SessionSource, SessionStore
from sessiongate.store.platform_state import PlatformState, SendRecord


def test_sqlite_status_shows_pending_then_upgrade_applies_them(tmp_path, sg):
    home = tmp_path / "home"
    before = sg("db", "status", "--home", str(home), "--json")
    assert before.returncode == 0, before.stderr
    info = json.loads(before.stdout)
    assert info["backend"] == "sqlite"
    assert all(m["applied_at"] is None for m in info["migrations"])
    upgraded = sg("db", "upgrade", "--home", str(home), "--json")
    assert json.loads(upgraded.stdout) == {"applied": [m["version"] for m in info["migrations"]]}
    again = sg("db", "upgrade", "--home", str(home))
    assert again.stdout.strip() == "up to date"
    after = json.loads(sg("db", "status", "--home", str(home), "--json").stdout)
    assert all(m["applied_at"] for m in after["migrations"])


def test_postgres_upgrade_then_a_store_opens_on_the_same_schema(tmp_path, pg_schema, sg, env):
    pg_env = env(SESSIONGATE_STORE__URL=pg_schema.url)
    home = str(tmp_path / "home")
    status = json.loads(sg("db", "status", "--home", home, "--json", env=pg_env).stdout)
    assert status["backend"] == "postgresql"
    assert [m["applied_at"] for m in status["migrations"]] == [None] * len(status["migrations"])
    upgraded = sg("db", "upgrade", "--home", home, "--json", env=pg_env)
    assert upgraded.returncode == 0, upgraded.stderr
    assert json.loads(upgraded.stdout)["applied"] == [m["version"] for m in status["migrations"]]
    config = GatewayConfig(store={"url": pg_schema.url})  # type: ignore[arg-type]
    with SessionStore(tmp_path / "sessions", config) as store:
        store.get_or_create_session(SessionSource(platform="api", chat_id="1"))
        assert store.has_any_sessions()
    # Nothing was written to an embedded database meanwhile.
    assert not (tmp_path / "sessions" / "state.db").exists()


def test_an_unreachable_server_is_one_line_and_exit_1(tmp_path, sg, env):
    result = sg(
        "db",
        "status",
        "--home",
        str(tmp_path),
        env=env(SESSIONGATE_STORE__URL="postgresql://nobody@127.0.0.1:1/none"),
    )
    assert result.returncode == 1
    assert "cannot connect" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_url_too_malformed_to_split_is_one_line_without_its_password(tmp_path, sg, env):
    # An unclosed IPv6 bracket: libpq refuses it, quoting it whole, and Python cannot split it.
    url = "postgresql://nobody:s3cret@[::1/none"
    result = sg("db", "status", "--home", str(tmp_path), env=env(SESSIONGATE_STORE__URL=url))
    assert result.returncode == 1
    assert "cannot connect to postgresql://nobody:***@[::1/none" in result.stderr
    assert "s3cret" not in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("url", ["mysql://x", "sqlite:///", "sqlite://relative"])
def test_a_store_url_of_no_known_kind_is_a_config_error(tmp_path, url, sg, env):
    result = sg("db", "status", "--home", str(tmp_path), env=env(SESSIONGATE_STORE__URL=url))
    assert result.returncode == 2
    assert "store.url" in result.stderr


def _seed_home(home):
    """A home with what a copy must carry: trees with branches, row state, aliases, a queued
    message, a tombstone, and what a platform adapter keeps."""
    from sessiongate.store.lanes import Inbound, InboxKind, LaneStore

    with SessionStore(home / "sessions", GatewayConfig()) as store:
        for i in range(30):
            entry = store.get_or_create_session(SessionSource(platform="api", chat_id=f"c{i}"))
            for j in range(5):
                store.append_messages(
                    entry.session_id,
                    [
                        {"role": "user", "content": f"question {i}.{j} about zebras"},
                        {"role": "assistant", "content": f"answer {i}.{j}", "metadata": {"n": j}},
                    ],
                )
            if i % 3 == 0:
                store.rewind_session(entry.session_id, 1)
            if i == 1:
                store.patch_session(entry.session_key, pinned=True, label="the first")
        store.learn_identity_alias("whatsapp", "123@lid", "4915555@s.whatsapp.net")
        gone = store.get_or_create_session(SessionSource(platform="api", chat_id="gone"))
        store.delete_session(gone.session_key)
        LaneStore(store).accept(
            Inbound(
                source=SessionSource(platform="api", chat_id="c2"), text="queued", message_id="q1"
            ),
            session_key=entry.session_key,
            session_id=entry.session_id,
            kind=InboxKind.QUEUED,
            cap=32,
        )
        platform = PlatformState(store)
        platform.claim_events("telegram", ["u1", "u2"], owner="boot")
        platform.finish_events("telegram", ["u1"])
        for user in ("7", "8"):
            pairing = platform.request_pairing(
                "telegram",
                user_id=user,
                chat_id=user,
                user_name=None,
                ttl_seconds=600,
                max_pending=3,
            )
        assert pairing.code is not None
        assert platform.approve_pairing(pairing.code)
        platform.mark_thread("telegram", "c1", "t1")
        platform.record_send("telegram", 5, "unconfirmed", "timed out")
        return {
            e.session_key: store.load_events(e.session_id, branch="all")
            for e in store.list_sessions()
        }


def test_copy_moves_a_home_onto_postgres_and_verifies_it(tmp_path, pg_schema, sg):

    home = tmp_path / "home"
    expected = _seed_home(home)
    result = sg("db", "copy", "--to", pg_schema.url, "--home", str(home), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["verified"] is True
    assert report["tables"]["entries"]["rows"] == report["tables"]["entries"]["target_rows"] >= 300
    config = GatewayConfig(store={"url": pg_schema.url})  # type: ignore[arg-type]
    with SessionStore(tmp_path / "pg-sessions", config) as store:
        copied = {
            e.session_key: store.load_events(e.session_id, branch="all")
            for e in store.list_sessions()
        }
        assert copied == expected
        hits = store.search("zebras", limit=5)
        assert len(hits) == 5
        assert {"session_id", "session_key", "role", "snippet", "timestamp"} <= set(hits[0])
        assert store.tombstone("agent:main:api:dm:gone") == "deleted"
        assert store.get_session("agent:main:api:dm:c1").label == "the first"
        platform = PlatformState(store)
        assert not platform.claim_event("telegram", "u1", owner="new-boot")  # finished
        assert platform.is_paired("telegram", "8")
        assert not platform.is_paired("telegram", "7")
        assert platform.has_thread("telegram", "c1", "t1")
        assert platform.get_send("telegram", 5) == SendRecord("unconfirmed", "timed out")
        # New rows take ids past the copied ones.
        entry = store.get_or_create_session(SessionSource(platform="api", chat_id="new"))
        store.append_messages(entry.session_id, [{"role": "user", "content": "after the copy"}])
    # The target is now served, with rows of its own: a second copy is refused whole.
    before = _target_rows(pg_schema.url)
    again = sg("db", "copy", "--to", pg_schema.url, "--home", str(home), "--json")
    assert again.returncode == 1
    assert json.loads(again.stderr)["error"]["code"] == "conflict"
    assert "already holds sessiongate data" in json.loads(again.stderr)["error"]["message"]
    assert _target_rows(pg_schema.url) == before
    resumed = sg("db", "copy", "--to", pg_schema.url, "--home", str(home), "--resume")
    assert resumed.returncode == 1
    assert "not an unfinished copy" in resumed.stderr
    assert _target_rows(pg_schema.url) == before


def _target_rows(url):
    """Every row of every table in the schema `url` names (nothing when it has no tables)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        names = [
            name
            for (name,) in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() ORDER BY table_name"
            )
        ]
        return {
            name: sorted(map(repr, conn.execute(f"SELECT * FROM {name}").fetchall()))  # noqa: S608
            for name in names
        }


def test_a_database_another_instance_serves_is_refused_before_any_write(tmp_path, pg_schema, sg):
    home = tmp_path / "home"
    _seed_home(home)
    config = GatewayConfig(store={"url": pg_schema.url})  # type: ignore[arg-type]
    with SessionStore(tmp_path / "serving", config) as store:
        entry = store.get_or_create_session(SessionSource(platform="api", chat_id="c1"))
        store.append_messages(entry.session_id, [{"role": "user", "content": "live"}])
        before = _target_rows(pg_schema.url)
        for extra in ((), ("--resume",)):
            result = sg("db", "copy", "--to", pg_schema.url, "--home", str(home), *extra)
            assert result.returncode == 1, result.stdout
            assert "Traceback" not in result.stderr
            assert _target_rows(pg_schema.url) == before
        assert [e.get("content") for e in store.load_events(entry.session_id)][-1] == "live"


def test_a_copy_is_refused_while_a_gateway_holds_the_home(tmp_path, pg_schema, sg):
    from sessiongate.gateway.recovery import HomeLock

    home = tmp_path / "home"
    _seed_home(home)
    lock = HomeLock(home)  # the gateway's own lock, held by this process
    lock.acquire()
    try:
        result = sg("db", "copy", "--to", pg_schema.url, "--home", str(home), "--json")
    finally:
        lock.release()
    assert result.returncode == 1
    error = json.loads(result.stderr)["error"]
    assert error["code"] == "home_in_use"
    assert f"pid {os.getpid()}" in error["message"]
    assert _target_rows(pg_schema.url) == {}  # not even the migrations ran
    done = sg("db", "copy", "--to", pg_schema.url, "--home", str(home), "--json")
    assert done.returncode == 0, done.stderr


def test_a_copy_killed_midway_resumes_and_verifies(tmp_path, pg_schema, sg, env):
    import signal
    import subprocess
    import sys
    import time

    import psycopg

    home = tmp_path / "home"
    _seed_home(home)
    args = [sys.executable, "-m", "sessiongate", "db", "copy", "--to", pg_schema.url]
    child = subprocess.Popen(
        [*args, "--home", str(home), "--batch", "1", "--json"],
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with psycopg.connect(pg_schema.url, autocommit=True) as conn:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:  # a hang guard, not a timing assertion
                ready = conn.execute("SELECT to_regclass('meta') IS NOT NULL").fetchone()
                if ready and ready[0]:
                    found = conn.execute("SELECT 1 FROM meta WHERE key = 'copy:entries'")
                    if found.fetchone():
                        break
                time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    plain = sg(*args[3:], "--home", str(home))
    assert plain.returncode == 1
    assert "unfinished copy" in plain.stderr
    assert "--resume" in plain.stderr
    other = tmp_path / "other"
    _seed_home(other)
    elsewhere = sg(*args[3:], "--home", str(other), "--resume")
    assert elsewhere.returncode == 1
    assert "not an unfinished copy" in elsewhere.stderr
    resumed = sg(*args[3:], "--home", str(home), "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert report["verified"] is True
    assert report["tables"]["entries"]["copied"] < report["tables"]["entries"]["rows"]


def test_the_copy_carries_every_column_of_every_table(tmp_path):
    # A column a migration adds must be added to the copy too, or `db copy` drops it.
    from sessiongate.store.copy import TABLES

    with SessionStore(tmp_path / "s", GatewayConfig()) as store, store.database.read() as tx:
        tables = {
            name
            for (name,) in tx.execute(  # type: ignore[attr-defined]
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' AND name NOT LIKE 'entries_fts%'"
            )
        }
        assert tables - {"schema_migrations"} == {t.name for t in TABLES}
        for table in TABLES:
            info = tx.execute(f"PRAGMA table_info({table.name})").fetchall()  # type: ignore[attr-defined]
            assert [c for c, _ in table.columns] == [row[1] for row in info], table.name


@pytest.mark.parametrize("command", ["status", "upgrade"])
def test_a_missing_postgres_driver_is_the_one_line_install_hint(tmp_path, command, sg, env):
    # The interpreter starts with psycopg unimportable, as it is without the extra.
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nsys.modules['psycopg'] = None\nsys.modules['psycopg_pool'] = None\n"
    )
    path = os.pathsep.join(p for p in (str(blocker), os.environ.get("PYTHONPATH")) if p)
    url = "postgresql://nobody@127.0.0.1:1/none"
    result = sg(
        "db",
        command,
        "--home",
        str(tmp_path / "home"),
        env=env(SESSIONGATE_STORE__URL=url, PYTHONPATH=path),
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: store.url names PostgreSQL, which needs psycopg 3 and psycopg_pool: "
        "pip install 'sessiongate[postgres]'"
    ]
