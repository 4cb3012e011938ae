from __future__ import annotations

import json

import yaml


def test_config_prints_the_effective_yaml_with_secrets_masked(sg, env, home):
    result = sg(
        "config",
        "--home",
        str(home),
        env=env(SESSIONGATE_API__TOKEN="hunter2", SESSIONGATE_QUEUE_CAP="7"),
    )
    assert result.returncode == 0, result.stderr
    assert "hunter2" not in result.stdout
    data = yaml.safe_load(result.stdout)
    assert data["api"]["token"] == "***"
    assert data["queue_cap"] == 7
    assert f"# home: {home}" in result.stdout


def test_config_json_names_home_and_file(sg, home):
    home.mkdir()
    (home / "config.yaml").write_text("agent.echo.delay_seconds: 0.5\n", encoding="utf-8")
    result = sg("config", "--home", str(home), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["config_file"] == str(home / "config.yaml")
    assert data["config"]["agent"]["echo"]["delay_seconds"] == 0.5


def test_a_bad_config_file_exits_2_naming_the_key(sg, home, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("queue_cap: lots\nno_such_key: 1\n", encoding="utf-8")
    result = sg("config", "--home", str(home), "--config", str(bad))
    assert result.returncode == 2
    assert "queue_cap" in result.stderr
    assert "no_such_key" in result.stderr


def test_sessiongate_home_is_the_default_home(sg, env, tmp_path):
    result = sg("config", "--json", env=env(SESSIONGATE_HOME=str(tmp_path / "h")))
    assert json.loads(result.stdout)["home"] == str(tmp_path / "h")


def test_config_masks_a_database_password_in_store_url(sg, env, home):
    url = "postgresql://me:hunter22@db.example/x"
    result = sg("config", "--home", str(home), env=env(SESSIONGATE_STORE__URL=url))
    assert result.returncode == 0, result.stderr
    assert "hunter22" not in result.stdout
    assert "postgresql://me:***@db.example/x" in result.stdout


def test_config_masks_the_credentials_of_inbound_webhooks(sg, home):
    home.mkdir()
    routes = [
        {"name": "gh", "secret": "hmac-key-0123456789", "session_key": "x", "prompt": "p"},
        {"name": "ci", "bearer": "bearer-token-0123456789", "session_key": "x", "prompt": "p"},
    ]
    (home / "config.yaml").write_text(yaml.safe_dump({"hooks": {"routes": routes}}))
    result = sg("config", "--home", str(home))
    assert result.returncode == 0, result.stderr
    assert "hmac-key" not in result.stdout
    assert "bearer-token" not in result.stdout
    shown = yaml.safe_load(result.stdout)["hooks"]["routes"]
    assert (shown[0]["secret"], shown[1]["bearer"]) == ("***", "***")
