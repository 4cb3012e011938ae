from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sessiongate import GatewayConfig, Platform, SessionSource, SessionStore
from sessiongate.config import load_config

# A hang guard for a subprocess, never a timing assertion (as in conftest.py).
PROCESS_TIMEOUT = 60


def _json(result):
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_list_prints_every_seeded_session(sg, home, seeded):
    data = _json(sg("sessions", "list", "--home", str(home), "--json"))
    assert data["total"] == 2
    assert {row["session_key"] for row in data["sessions"]} == set(seeded.values())
    row = data["sessions"][0]
    assert {"archived", "pinned", "unread", "total_tokens", "next_reset_at"} <= row.keys()


def test_list_as_a_table_names_the_sessions(sg, home, seeded):
    result = sg("sessions", "list", "--home", str(home))
    assert result.returncode == 0, result.stderr
    assert "2 of 2 sessions" in result.stdout
    assert "alice" in result.stdout


def test_list_of_an_empty_home_is_empty(sg, home):
    assert _json(sg("sessions", "list", "--home", str(home), "--json"))["total"] == 0


def test_show_prints_the_row_and_transcript(sg, home, seeded):
    data = _json(
        sg("sessions", "show", seeded["alice"], "--home", str(home), "--transcript", "--json")
    )
    assert data["session"]["session_key"] == seeded["alice"]
    assert [e["content"] for e in data["events"]] == [
        "the quick brown fox",
        "echo: the quick brown fox",
    ]


def test_show_of_an_unknown_key_fails_with_a_message(sg, home, seeded):
    result = sg("sessions", "show", "agent:main:telegram:dm:nobody", "--home", str(home))
    assert result.returncode == 1
    assert "no session with key" in result.stderr


def test_search_finds_a_word_of_one_transcript(sg, home, seeded):
    data = _json(sg("sessions", "search", "lazy", "--home", str(home), "--json"))
    assert {hit["session_key"] for hit in data["results"]} == {seeded["bob"]}
    assert data["degraded"] is False


def test_search_with_query_syntax_is_plain_text(sg, home, seeded):
    data = _json(sg("sessions", "search", 'NOT "fox OR', "--home", str(home), "--json"))
    assert isinstance(data["results"], list)


def test_export_then_import_into_another_home_round_trips(sg, home, seeded, tmp_path):
    dump = tmp_path / "dump.json"
    result = sg("sessions", "export", "--home", str(home), "--output", str(dump))
    assert result.returncode == 0, result.stderr
    assert oct(dump.stat().st_mode & 0o777) == "0o600"
    other = tmp_path / "other"
    report = _json(sg("sessions", "import", str(dump), "--home", str(other), "--json"))
    assert report == {"imported": 2, "skipped": 0, "messages": 4, "problems": []}
    shown = _json(
        sg("sessions", "show", seeded["bob"], "--home", str(other), "--transcript", "--json")
    )
    assert [e["content"] for e in shown["events"]] == [
        "a lazy dog sleeps",
        "echo: a lazy dog sleeps",
    ]
    again = _json(sg("sessions", "import", str(dump), "--home", str(other), "--json"))
    assert again["imported"] == 0
    assert again["skipped"] == 2
    store = SessionStore(other / "sessions", GatewayConfig())
    try:
        entry = store.get_session(seeded["bob"])
        assert entry is not None
        assert len(store.load_transcript(entry.session_id)) == 2
    finally:
        store.close()


def test_export_never_leaves_the_file_readable_by_others(home, tmp_path, env):
    # Created with the umask's 0644 and only then chmodded, the file was readable by others
    # while it was written, and stayed so, half-written, when the write failed. A file-size
    # limit (32 KiB: `ulimit -f` counts 512-byte blocks) makes the write fail half-way; Python
    # ignores SIGXFSZ, so the write raises EFBIG. Opening the store writes less than that.
    store = SessionStore(home / "sessions", GatewayConfig())
    try:
        entry = store.get_or_create_session(SessionSource(platform=Platform.TELEGRAM, chat_id="a"))
        # Six bytes each in the JSON document (`\u0001`): far over the limit.
        store.append_messages(entry.session_id, [{"role": "user", "content": "\x01" * 100_000}])
    finally:
        store.close()
    dump = tmp_path / "dump.json"
    script = 'umask 022; ulimit -f 64; exec "$0" -m sessiongate "$@"'
    args = ["sessions", "export", "--home", str(home), "--output", str(dump)]
    result = subprocess.run(
        ["/bin/sh", "-c", script, sys.executable, *args],
        capture_output=True,
        text=True,
        env=env(),
        timeout=PROCESS_TIMEOUT,
        check=False,
    )
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert f"cannot write {dump}" in result.stderr
    # Nothing half-written is left behind.
    assert not dump.exists()


def test_export_over_an_existing_file_makes_it_private(sg, home, seeded, tmp_path):
    dump = tmp_path / "dump.json"
    dump.write_text("old", encoding="utf-8")
    dump.chmod(0o644)
    result = sg("sessions", "export", "--home", str(home), "--output", str(dump))
    assert result.returncode == 0, result.stderr
    assert dump.stat().st_mode & 0o777 == 0o600
    assert json.loads(dump.read_text(encoding="utf-8"))["format"] == "sessiongate.export"


def test_export_to_stdout_is_one_json_document(sg, home, seeded):
    data = _json(sg("sessions", "export", "--home", str(home), "--key", seeded["alice"]))
    assert data["format"] == "sessiongate.export"
    assert [s["entry"]["session_key"] for s in data["sessions"]] == [seeded["alice"]]


def test_import_of_a_sessions_json_file_brings_in_the_routes(sg, home, seeded, tmp_path):
    mirror = home / "sessions" / "sessions.json"
    assert mirror.exists()
    other = tmp_path / "other"
    report = _json(sg("sessions", "import", str(mirror), "--home", str(other), "--json"))
    assert report["imported"] == 2


def test_import_of_a_malformed_file_is_a_usage_error(sg, home, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    result = sg("sessions", "import", str(bad), "--home", str(home))
    assert result.returncode == 2
    assert "cannot read" in result.stderr


def test_import_reports_bad_entries_and_exits_1(sg, home, tmp_path):
    dump = tmp_path / "dump.json"
    dump.write_text(
        json.dumps({"format": "sessiongate.export", "version": 1, "sessions": [{"entry": 5}]}),
        encoding="utf-8",
    )
    result = sg("sessions", "import", str(dump), "--home", str(home), "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["problems"]


def test_import_of_a_bad_transcript_leaves_no_half_imported_key(sg, home, tmp_path):
    key = "agent:main:telegram:dm:carol"
    entry = {
        "session_key": key,
        "session_id": "20250101_000000_cccccccc",
        "created_at": "2025-01-01T00:00:00+00:00",
        "updated_at": "2025-01-01T00:00:00+00:00",
    }
    good = {"type": "message", "role": "user", "content": "hello carol"}
    # Valid ISO-8601 text with no UTC equivalent.
    bad = {**good, "timestamp": "0001-01-01T00:00:00+14:00"}

    def dump(events):
        path = tmp_path / "dump.json"
        document = {"format": "sessiongate.export", "version": 1}
        document["sessions"] = [{"entry": entry, "events": events}]
        path.write_text(json.dumps(document), encoding="utf-8")
        return str(path)

    result = sg("sessions", "import", dump([good, bad]), "--home", str(home), "--json")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["imported"] == 0
    assert report["messages"] == 0
    assert len(report["problems"]) == 1
    assert key in report["problems"][0]
    # Nothing of the entry was kept, so a corrected file imports it whole.
    fixed = _json(sg("sessions", "import", dump([good]), "--home", str(home), "--json"))
    assert fixed == {"imported": 1, "skipped": 0, "messages": 1, "problems": []}
    store = SessionStore(home / "sessions", GatewayConfig())
    try:
        assert [m["content"] for m in store.load_transcript(entry["session_id"])] == ["hello carol"]
    finally:
        store.close()


def test_import_skips_keys_the_api_could_never_address(sg, home, tmp_path):
    # A key with a raw control character looks like another key in listings, and one over
    # the API's 4096-character bound can never be addressed; both are reported, not stored.
    def entry(key: str, n: int) -> dict:
        return {
            "session_key": key,
            "session_id": f"20990101_000000_0000000{n}",
            "created_at": "2025-01-01T00:00:00+00:00",
            "updated_at": "2025-01-01T00:00:00+00:00",
        }

    bad = ["agent:main:api:dm:imp6\n", "x" * 5000, "agent:main:api:dm:bell\x07", "del\x7f"]
    good = "agent:main:api:dm:ok"
    keys = [*bad, good]
    document = {
        "format": "sessiongate.export",
        "version": 1,
        "sessions": [
            {"entry": entry(key, n), "events": [{"role": "user", "content": "hi"}]}
            for n, key in enumerate(keys)
        ],
    }
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps(document), encoding="utf-8")
    result = sg("sessions", "import", str(dump), "--home", str(home), "--json")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert (report["imported"], report["skipped"], report["messages"]) == (1, 0, 1)
    assert len(report["problems"]) == len(bad)
    assert "control character" in report["problems"][0]
    assert "4096" in report["problems"][1]
    store = SessionStore(home / "sessions", GatewayConfig())
    try:
        assert [e.session_key for e in store.list_sessions()] == [good]
        for n, key in enumerate(bad):
            assert store.get_session(key) is None
            assert store.session_info(entry(key, n)["session_id"]) is None
    finally:
        store.close()


def test_prune_without_an_age_is_refused(sg, home, seeded):
    result = sg("sessions", "prune", "--home", str(home))
    assert result.returncode == 2
    assert "--max-age-days" in result.stderr


def test_prune_drops_old_routes_and_keeps_transcripts(sg, home, seeded):
    data = _json(sg("sessions", "prune", "--home", str(home), "--max-age-days", "30", "--json"))
    assert data["pruned"] == 2
    assert _json(sg("sessions", "list", "--home", str(home), "--json"))["total"] == 0
    hits = _json(sg("sessions", "search", "fox", "--home", str(home), "--json"))["results"]
    assert hits


def test_user_text_with_markup_and_undecodable_keys_are_plain_output_or_one_line_errors(sg, home):
    from sessiongate import GatewayConfig, SessionSource, SessionStore

    with SessionStore(home / "sessions", GatewayConfig()) as store:
        entry = store.get_or_create_session(SessionSource(platform="telegram", chat_id="a[/]b"))
        store.append_messages(entry.session_id, [{"role": "user", "content": "hi [/] [red]"}])
    shown = sg("sessions", "show", entry.session_key, "-t", "--home", str(home))
    assert shown.returncode == 0, shown.stderr
    assert "hi [/] [red]" in shown.stdout
    for args in (("sessions", "list"), ("sessions", "search", "hi")):
        result = sg(*args, "--home", str(home))
        # Folded over table lines, the key is not one string; what matters is no markup error.
        assert (result.returncode, result.stderr) == (0, "")
    for key in ("x[/]y", "\udcff\udcfe"):
        result = sg("sessions", "show", key, "--home", str(home))
        assert result.returncode == 1
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith("error:")


def test_list_and_search_filter_by_agent(sg, tmp_path):
    home = tmp_path / "home"
    config_path = tmp_path / "config.yaml"
    config_path.write_text(
        "agents:\n  support: {kind: echo}\n"
        "bindings:\n  - {platform: telegram, chat_id: vip, agent: support}\n"
    )
    config = load_config(config_path, environ={})
    with SessionStore(home / "sessions", config) as store:
        for chat in ("vip", "alice"):
            entry = store.get_or_create_session(
                SessionSource(platform=Platform.TELEGRAM, chat_id=chat)
            )
            store.append_messages(entry.session_id, [{"role": "user", "content": f"needle {chat}"}])
    args = ("--home", str(home), "--config", str(config_path), "--json")
    listed = _json(sg("sessions", "list", "--agent", "support", *args))
    assert [row["session_key"] for row in listed["sessions"]] == ["agent:support:telegram:dm:vip"]
    assert listed["sessions"][0]["agent"] == "support"
    assert listed["sessions"][0]["cost_status"] == "unknown"
    found = _json(sg("sessions", "search", "needle", "--agent", "main", *args))
    assert {hit["session_key"] for hit in found["results"]} == {"agent:main:telegram:dm:alice"}
    bad = sg("sessions", "list", "--agent", "Not:An:Id", "--home", str(home))
    assert bad.returncode == 2
    assert "agent id" in bad.stderr


def test_prune_dry_run_shows_the_retention_plan_the_real_run_carries_out(sg, home, seeded):
    config = home / "retention.yaml"
    config.write_text("retention:\n  max_sessions: 1\n")
    args = ("sessions", "prune", "--home", str(home), "--config", str(config), "--json")
    plan = _json(sg(*args, "--dry-run"))
    # Both lanes are as old (seeded at one time); the key decides, and one goes.
    assert [r["reason"] for r in plan["retention"]] == ["max_sessions"]
    assert _json(sg("sessions", "list", "--home", str(home), "--json"))["total"] == 2
    done = _json(sg(*args))
    assert done["retention"] == plan["retention"]
    listed = _json(sg("sessions", "list", "--home", str(home), "--json"))
    assert listed["total"] == 1
    gone = plan["retention"][0]["session_key"]
    assert gone not in {row["session_key"] for row in listed["sessions"]}


@pytest.mark.parametrize(
    "args",
    [
        ["show"],
        ["context"],
        ["branches"],
        ["rewind"],
        ["fork"],
        ["compact"],
        ["reset"],
        ["pin"],
        ["archive"],
        ["read"],
        ["label", "x"],
        ["delete", "--yes"],
    ],
)
def test_a_missing_session_is_the_api_s_error_code_under_json(sg, home, seeded, args):
    missing = "agent:main:telegram:dm:nobody"
    result = sg("sessions", args[0], missing, *args[1:], "--home", str(home), "--json")
    assert result.returncode == 1, result.stdout
    assert json.loads(result.stderr)["error"]["code"] == "session_not_found"


def test_at_80_columns_keys_fold_only_between_parts_and_no_column_is_empty(sg, home, env):
    from sessiongate import GatewayConfig, SessionSource, SessionStore

    keys = []
    with SessionStore(home / "sessions", GatewayConfig()) as store:
        for chat in ("-1001234567890", "family-group-chat"):
            source = SessionSource(
                platform="telegram", chat_id=chat, user_id="987654321", chat_type="group"
            )
            keys.append(store.get_or_create_session(source).session_key)
    result = sg("sessions", "list", "--home", str(home), env=env(COLUMNS="80"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines)
    header = next(line for line in lines if "session key" in line)
    assert "flags" not in header  # no session has a flag: no empty column
    # The key column's text, row by row: each fold ends at a `:`.
    cells = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    folded: list[str] = []
    for cell in cells:
        if folded and not folded[-1].endswith(":"):
            folded.append(cell)
        elif folded and folded[-1].endswith(":") and not cell.startswith("agent:"):
            folded[-1] += cell
        else:
            folded.append(cell)
    assert sorted(folded) == sorted(keys)
