"""`sessiongate import hermes|openclaw` as a user runs it: a plan, the import, a second run
that changes nothing, a refused source, and an import beside a store that stays open (as a
serving gateway's does)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.fixtures import make_openclaw_agent_db as oc_db

from sessiongate import GatewayConfig, SessionStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_import_hermes_plans_imports_and_then_has_nothing_left_to_do(sg, home):
    source = str(FIXTURES / "hermes" / "home")
    plan = sg("import", "hermes", source, "--home", str(home), "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert "would import 7 sessions" in plan.stdout

    done = sg("import", "hermes", source, "--home", str(home), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["sessions_imported"], summary["routes_imported"]) == (7, 6)

    again = json.loads(sg("import", "hermes", source, "--home", str(home), "--json").stdout)
    assert (again["sessions_imported"], again["routes_imported"]) == (0, 0)
    assert again["sessions_present"] == 7
    listed = json.loads(sg("sessions", "list", "--home", str(home), "--json").stdout)
    assert listed["total"] == 5  # the sixth lane is archived


def test_import_openclaw_reports_what_it_cannot_import_and_why(sg, home):
    source = str(FIXTURES / "openclaw" / "state")
    result = sg("import", "openclaw", source, "--home", str(home))
    assert result.returncode == 0, result.stderr
    assert "imported 3 sessions" in result.stdout
    assert "cannot import 1" in result.stdout
    assert "does not come before it" in result.stdout


def test_a_corrupt_source_is_refused_and_nothing_is_imported(sg, home, tmp_path):
    source = tmp_path / "hermes"
    shutil.copytree(FIXTURES / "hermes" / "home", source)
    (source / "state.db").write_bytes(b"garbage" * 1000)
    result = sg("import", "hermes", str(source), "--home", str(home))
    assert result.returncode == 1
    assert "refused" in result.stderr
    assert "state.db" in result.stderr
    listed = json.loads(sg("sessions", "list", "--home", str(home), "--json").stdout)
    assert listed["total"] == 0


def test_an_import_beside_an_open_store_goes_through_it(sg, home):
    with SessionStore(home / "sessions", GatewayConfig()) as serving:
        result = sg("import", "hermes", str(FIXTURES / "hermes" / "home"), "--home", str(home))
        assert result.returncode == 0, result.stderr
        # The open store reads the routes the import committed.
        assert len(serving.list_sessions()) == 6
        assert serving.search("Lyon")


def test_import_openclaw_reads_a_per_agent_database(sg, home, tmp_path):
    source = tmp_path / "openclaw"
    shutil.copytree(FIXTURES / "openclaw" / "state", source)
    oc_db.write_agent_db(source)
    plan = sg("import", "openclaw", str(source), "--home", str(home), "--dry-run")
    assert plan.returncode == 0, plan.stderr
    assert "would import 5 sessions" in plan.stdout
    assert "openclaw-agent.sqlite" in plan.stdout  # the unnamed transcript, listed

    done = json.loads(sg("import", "openclaw", str(source), "--home", str(home), "--json").stdout)
    assert (done["sessions_imported"], done["routes_imported"]) == (5, 5)
    again = json.loads(sg("import", "openclaw", str(source), "--home", str(home), "--json").stdout)
    assert (again["sessions_imported"], again["routes_imported"]) == (0, 0)
    shown = sg("sessions", "show", oc_db.MAIN_KEY, "--home", str(home), "--json")
    assert shown.returncode == 0, shown.stderr
    assert oc_db.MAIN_ID in shown.stdout


def test_a_foreign_agent_database_is_refused_naming_it(sg, home, tmp_path):
    source = tmp_path / "openclaw"
    shutil.copytree(FIXTURES / "openclaw" / "state", source)
    oc_db.write_agent_db(source).write_bytes(b"garbage" * 1000)
    result = sg("import", "openclaw", str(source), "--home", str(home))
    assert result.returncode == 1
    assert "refused" in result.stderr
    assert "agents/coder/agent/openclaw-agent.sqlite" in result.stderr
    listed = json.loads(sg("sessions", "list", "--home", str(home), "--json").stdout)
    assert listed["total"] == 0
