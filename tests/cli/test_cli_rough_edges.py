"""The command line's output for people and scripts: JSON errors under `--json`, plurals,
times to the second, `prune --dry-run`, the empty search, doctor's wording and its honest
report of a repair that failed."""

from __future__ import annotations

import json
import re

import pytest

from sessiongate import GatewayConfig, Platform, SessionSource, SessionStore


def _error(result, exit_code: int) -> dict:
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    assert result.stdout == ""
    return json.loads(result.stderr)["error"]


@pytest.mark.parametrize(
    ("args", "exit_code", "code"),
    [
        (("sessions", "show", "agent:main:api:dm:nobody"), 1, "session_not_found"),
        (("sessions", "branches", "not a key"), 2, "invalid_session_key"),
        (("sessions", "show"), 2, "invalid_usage"),  # click's own usage error
        (("sessions", "list", "--limit", "many"), 2, "invalid_usage"),
        (("sessions", "search", ""), 2, "invalid_usage"),
    ],
)
def test_json_errors_are_json_with_the_exit_code_kept(sg, home, seeded, args, exit_code, code):
    error = _error(sg(*args, "--home", str(home), "--json"), exit_code)
    assert error["code"] == code
    assert error["message"]


def test_errors_without_json_stay_one_line_of_text(sg, home, seeded):
    result = sg("sessions", "show", "agent:main:api:dm:nobody", "--home", str(home))
    assert result.returncode == 1
    assert result.stderr.startswith("error: ")


def test_an_empty_search_is_refused_like_the_api_refuses_it(sg, home, seeded):
    for query in ("", "   "):
        result = sg("sessions", "search", query, "--home", str(home))
        assert result.returncode == 2
        assert "query is empty" in result.stderr


def test_counts_agree_with_their_nouns_and_times_print_to_the_second(sg, home, seeded):
    hits = sg("sessions", "search", "lazy", "--home", str(home), "--limit", "1").stdout
    assert hits.startswith("1 hit ")
    listed = sg("sessions", "list", "--home", str(home)).stdout
    assert "2 of 2 sessions" in listed
    assert re.search(r"2020-01-01 00:00:00Z", listed), listed
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", listed)  # no fractions of a second
    branches = sg("sessions", "branches", seeded["alice"], "--home", str(home)).stdout
    assert "1 branch" in branches
    assert "1 branches" not in branches


def test_after_rewinding_everything_branches_mark_the_empty_active_position(sg, home, seeded):
    key = seeded["alice"]
    assert sg("sessions", "rewind", key, "--home", str(home)).returncode == 0
    table = sg("sessions", "branches", key, "--home", str(home)).stdout
    [marked] = [line for line in table.splitlines() if "*" in line]
    assert "(empty" in marked


def test_prune_dry_run_lists_what_prune_drops_and_drops_nothing(sg, home, seeded):
    args = ("sessions", "prune", "--home", str(home), "--max-age-days", "30")
    dry = json.loads(sg(*args, "--dry-run", "--json").stdout)
    assert dry["dry_run"] is True
    assert dry["keys"] == sorted(seeded.values())
    assert (
        len(json.loads(sg("sessions", "list", "--home", str(home), "--json").stdout)["sessions"])
        == 2
    )
    text = sg(*args, "--dry-run").stdout
    assert "would prune 2 entries older than 30 days" in text
    real = json.loads(sg(*args, "--json").stdout)
    assert (real["pruned"], real["keys"]) == (2, dry["keys"])


def _checks(result) -> dict[str, dict]:
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}


def test_doctor_says_up_to_date_or_how_much_waits_and_nothing_to_repair(sg, home, seeded):
    # The seeded messages were never searched: they wait for the next search to index them.
    checks = _checks(sg("doctor", "--home", str(home), "--json"))
    assert checks["search index"]["ok"] is True
    assert "current" not in checks["search index"]["detail"]
    assert "will be indexed by the next search" in checks["search index"]["detail"]
    sg("sessions", "search", "fox", "--home", str(home))
    assert _checks(sg("doctor", "--home", str(home), "--json"))["search index"]["detail"] == (
        "up to date"
    )
    repaired = sg("doctor", "--home", str(home), "--repair")
    assert repaired.returncode == 0
    assert "nothing to repair" in repaired.stdout


def test_doctor_repair_reports_a_mirror_it_could_not_rewrite(sg, home, seeded):
    mirror = home / "sessions" / "sessions.json"
    mirror.unlink()
    mirror.mkdir()
    result = sg("doctor", "--home", str(home), "--repair", "--json")
    assert result.returncode == 1
    check = _checks(result)["sessions.json"]
    assert check["ok"] is False
    assert check["repaired"] is False
    assert "could not be rewritten" in check["detail"]
    assert "is a directory" in check["detail"]
    text = sg("doctor", "--home", str(home), "--repair").stdout
    assert "repaired" not in text
    assert mirror.is_dir()  # nothing of the person's is deleted to make room


def test_a_failing_mirror_is_logged_once_then_retried_with_backoff(tmp_path, caplog):
    from sessiongate.store.mirror import MAX_RETRY_SECONDS

    directory = tmp_path / "sessions"
    store = SessionStore(directory, GatewayConfig())
    try:
        store.flush_mirror()
        (directory / "sessions.json").unlink()
        (directory / "sessions.json").mkdir()
        mirror = store._mirror
        assert mirror is not None
        with caplog.at_level("DEBUG", logger="sessiongate.store.mirror"):
            for n in range(12):
                store.get_or_create_session(
                    SessionSource(platform=Platform.API, chat_id=f"c{n}", user_id="u")
                )
                assert store.flush_mirror() is not None
        warnings = [r for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 1
        assert "is a directory" in warnings[0].error
        assert mirror.failures >= 12  # the thread may have tried too
        assert mirror.retry_in == MAX_RETRY_SECONDS
        (directory / "sessions.json").rmdir()
        caplog.clear()
        with caplog.at_level("INFO", logger="sessiongate.store.mirror"):
            store.get_or_create_session(
                SessionSource(platform=Platform.API, chat_id="after", user_id="u")
            )
            assert store.flush_mirror() is None
        assert [r.message for r in caplog.records] == ["sessions.json mirror written again"]
        assert mirror.failures == 0
    finally:
        store.close()
