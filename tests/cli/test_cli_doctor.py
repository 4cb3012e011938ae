from __future__ import annotations

import json
import os

from sessiongate import GatewayConfig, SessionStore
from sessiongate.store.sqlite import search as fts


def _report(result):
    return json.loads(result.stdout)


def _checks(report):
    return {c["name"]: c for c in report["checks"]}


def test_a_fresh_home_is_healthy_and_not_created(sg, home):
    result = sg("doctor", "--home", str(home), "--json")
    assert result.returncode == 0, result.stderr
    assert _report(result)["healthy"] is True
    assert not (home / "sessions" / "state.db").exists()


def test_a_seeded_home_passes_every_check(sg, home, seeded):
    result = sg("doctor", "--home", str(home), "--json", "--full")
    assert result.returncode == 0, result.stdout
    checks = _checks(_report(result))
    assert checks["database"]["detail"] == "integrity_check: ok"
    assert {"config", "database", "store", "search index", "sessions.json"} <= checks.keys()


def test_a_stale_search_index_is_a_problem_until_repaired(sg, home, seeded):
    store = SessionStore(home / "sessions", GatewayConfig())
    with store.database.transaction() as conn:
        fts.mark_stale(conn, RuntimeError("injected"))
    store.close()
    result = sg("doctor", "--home", str(home), "--json")
    assert result.returncode == 1
    assert _checks(_report(result))["search index"]["ok"] is False
    repaired = sg("doctor", "--home", str(home), "--json", "--repair")
    assert repaired.returncode == 0, repaired.stdout
    assert _checks(_report(repaired))["search index"]["repaired"] is True
    assert sg("doctor", "--home", str(home)).returncode == 0


def test_an_unreadable_sessions_json_is_rewritten_by_repair(sg, home, seeded):
    mirror = home / "sessions" / "sessions.json"
    mirror.write_text("{ torn", encoding="utf-8")
    result = sg("doctor", "--home", str(home), "--json")
    assert result.returncode == 1
    assert _checks(_report(result))["sessions.json"]["ok"] is False
    repaired = sg("doctor", "--home", str(home), "--json", "--repair")
    assert repaired.returncode == 0, repaired.stdout
    assert set(json.loads(mirror.read_text(encoding="utf-8"))) >= set(seeded.values())


def test_a_damaged_database_file_is_reported_not_crashed_on(sg, home, seeded):
    db = home / "sessions" / "state.db"
    for suffix in ("-wal", "-shm"):
        db.with_name(db.name + suffix).unlink(missing_ok=True)
    data = bytearray(db.read_bytes())
    data[:100] = b"\x00" * 100  # the header: SQLite no longer recognises the file
    db.write_bytes(bytes(data))
    result = sg("doctor", "--home", str(home))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "problem" in result.stdout


def test_a_bad_config_is_reported_as_a_check(sg, home, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("reset_policy: {timezone: Mars/Olympus}\n", encoding="utf-8")
    result = sg("doctor", "--home", str(home), "--config", str(bad), "--json")
    assert result.returncode == 1
    assert "Mars/Olympus" in _checks(_report(result))["config"]["detail"]


def test_sessions_json_problems_found_at_open_are_shown(sg, home, seeded):
    mirror = home / "sessions" / "sessions.json"
    hostile = "agent:main:telegram:dm:hostile"

    def plant() -> None:
        # The doctor's own open rewrites the mirror, so each run gets a fresh hostile file.
        data = json.loads(mirror.read_text(encoding="utf-8"))
        data[hostile] = {
            "session_key": hostile,
            "session_id": "20250101_000000_dddddddd",
            "created_at": "2025-01-01T00:00:00+00:00",
            "updated_at": "0001-01-01T00:00:00+14:00",
        }
        mirror.write_text(json.dumps(data), encoding="utf-8")

    plant()
    result = sg("doctor", "--home", str(home), "--json")
    assert result.returncode == 1, result.stdout
    check = _checks(_report(result))["sessions.json import"]
    assert check["ok"] is False
    assert hostile in check["detail"]
    assert any(hostile in p for p in check["problems"])
    # Logged at open too (on stderr), without a traceback.
    assert hostile in result.stderr
    assert "Traceback" not in result.stderr
    plant()
    text = sg("doctor", "--home", str(home))
    assert text.returncode == 1
    assert "sessions.json import" in text.stdout
    assert "hostile" in text.stdout
    # Skipped and backed up once; the next run has nothing to say about it.
    assert sg("doctor", "--home", str(home)).returncode == 0


def _write_config(home, text):
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(text)


def test_a_config_run_refuses_is_a_config_problem_with_run_s_own_message(sg, home):
    _write_config(home, "agent:\n  openai:\n    api_key: sk-x\n    tools: [sessions_lst]\n")
    run = sg("run", "--home", str(home), "--port", "0")
    assert run.returncode == 1
    (line,) = run.stderr.strip().splitlines()
    result = sg("doctor", "--home", str(home), "--json")
    assert result.returncode == 1
    config = _checks(_report(result))["config"]
    assert config["ok"] is False
    assert config["detail"] == line.removeprefix("error: ")
    assert "sessions_lst" in config["detail"]


def test_an_unsafe_listen_address_is_a_config_problem(sg, home):
    _write_config(home, "api:\n  host: 0.0.0.0\n")
    result = sg("doctor", "--home", str(home), "--json")
    assert result.returncode == 1
    assert "without an API token" in _checks(_report(result))["config"]["detail"]


def test_details_are_shown_as_written_not_read_as_markup(sg, home, seeded, tmp_path, env):
    # psycopg made unimportable, as without the extra: the store check names the install.
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['psycopg'] = None\n")
    path = os.pathsep.join(p for p in (str(blocker), os.environ.get("PYTHONPATH")) if p)
    result = sg(
        "doctor",
        "--home",
        str(home),
        env=env(
            PYTHONPATH=path,
            COLUMNS="300",
            SESSIONGATE_STORE__URL="postgresql://nobody@127.0.0.1:1/none",
        ),
    )
    assert result.returncode == 1
    assert "pip install 'sessiongate[postgres]'" in result.stdout


def test_one_mirrored_entry_is_one_entry(sg, home):
    from sessiongate import SessionSource

    with SessionStore(home / "sessions", GatewayConfig()) as store:
        store.get_or_create_session(SessionSource(platform="api", chat_id="only"))
    result = sg("doctor", "--home", str(home), "--json")
    assert _checks(_report(result))["sessions.json"]["detail"] == "readable, 1 entry"
