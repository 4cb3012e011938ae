"""`sessiongate db status|upgrade` on both backends, through the real command."""

from __future__ import annotations

import json

import pytest

from conftest import cli_env, run_cli
from sessiongate import GatewayConfig, SessionSource, SessionStore


def test_sqlite_status_shows_pending_then_upgrade_applies_them(tmp_path):
    home = tmp_path / "home"
    before = run_cli("db", "status", "--home", str(home), "--json")
    assert before.returncode == 0, before.stderr
    info = json.loads(before.stdout)
    assert info["backend"] == "sqlite"
    assert all(m["applied_at"] is None for m in info["migrations"])
    upgraded = run_cli("db", "upgrade", "--home", str(home), "--json")
    assert json.loads(upgraded.stdout) == {"applied": [m["version"] for m in info["migrations"]]}
    again = run_cli("db", "upgrade", "--home", str(home))
    assert again.stdout.strip() == "up to date"
    after = json.loads(run_cli("db", "status", "--home", str(home), "--json").stdout)
    assert all(m["applied_at"] for m in after["migrations"])


def test_postgres_upgrade_then_a_store_opens_on_the_same_schema(tmp_path, pg_schema):
    env = cli_env(SESSIONGATE_STORE__URL=pg_schema.url)
    home = str(tmp_path / "home")
    status = json.loads(run_cli("db", "status", "--home", home, "--json", env=env).stdout)
    assert status["backend"] == "postgresql"
    assert [m["applied_at"] for m in status["migrations"]] == [None] * len(status["migrations"])
    upgraded = run_cli("db", "upgrade", "--home", home, "--json", env=env)
    assert upgraded.returncode == 0, upgraded.stderr
    assert json.loads(upgraded.stdout)["applied"] == [m["version"] for m in status["migrations"]]
    config = GatewayConfig(store={"url": pg_schema.url})  # type: ignore[arg-type]
    with SessionStore(tmp_path / "sessions", config) as store:
        store.get_or_create_session(SessionSource(platform="api", chat_id="1"))
        assert store.has_any_sessions()
    # Nothing was written to an embedded database meanwhile.
    assert not (tmp_path / "sessions" / "state.db").exists()


def test_an_unreachable_server_is_one_line_and_exit_1(tmp_path):
    env = cli_env(SESSIONGATE_STORE__URL="postgresql://nobody@127.0.0.1:1/none")
    result = run_cli("db", "status", "--home", str(tmp_path), env=env)
    assert result.returncode == 1
    assert "cannot connect" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("url", ["mysql://x", "sqlite:///", "sqlite://relative"])
def test_a_store_url_of_no_known_kind_is_a_config_error(tmp_path, url):
    result = run_cli(
        "db", "status", "--home", str(tmp_path), env=cli_env(SESSIONGATE_STORE__URL=url)
    )
    assert result.returncode == 2
    assert "store.url" in result.stderr
