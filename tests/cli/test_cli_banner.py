"""What `sessiongate run` tells a new user once it listens, and when it cannot."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys

import httpx
import pytest

from sessiongate import GatewayConfig
from sessiongate.cli._common import Paths
from sessiongate.cli.run import usage_banner

SECRET = "banner-secret-4b1d7c9e"
LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


def _banner_of(home, env) -> tuple[str, str, str]:
    """Start `run`, read its banner, stop it; returns (banner, url, everything on stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiongate", "run", "--home", str(home), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    seen: list[str] = []
    url = ""
    try:
        for line in proc.stdout:
            seen.append(line)
            if match := LISTENING.search(line):
                url = match.group(1)
            if line.startswith("Stop:"):
                break
        assert url, "".join(seen)
        root = httpx.get(f"{url}/", follow_redirects=False)
        assert root.status_code in (302, 303, 307), root.text
        assert root.headers["location"] == "/ui/"
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return "".join(seen) + rest, url, err


def test_the_banner_names_the_dashboard_and_the_platforms_and_hides_a_file_token(env, home):
    home.mkdir()
    (home / "config.yaml").write_text(f"api:\n  token: {SECRET}\n")
    banner, url, err = _banner_of(home, env())
    assert f"Dashboard: {url}/ui/" in banner
    assert "Platforms: none" in banner
    # The token came from the file: no pointer at an environment variable nobody set.
    assert "$SESSIONGATE_API__TOKEN" not in banner
    assert f"api.token in {home / 'config.yaml'}" in banner
    assert f'sessiongate chat --url {url} --token "$TOKEN"' in banner
    assert SECRET not in banner + err


def test_the_banner_points_at_the_environment_token_when_it_came_from_there(tmp_path):
    config = GatewayConfig(api={"token": SECRET})
    paths = Paths(tmp_path, None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SESSIONGATE_API__TOKEN", SECRET)
        banner = usage_banner("127.0.0.1", 8787, config, paths, platforms=["telegram", "slack"])
    assert "Platforms: telegram, slack" in banner
    assert '-H "Authorization: Bearer $SESSIONGATE_API__TOKEN"' in banner
    assert 'chat --url http://127.0.0.1:8787 --token "$SESSIONGATE_API__TOKEN"' in banner
    assert SECRET not in banner


def test_the_banner_without_a_token_suggests_no_token(tmp_path):
    banner = usage_banner("::1", 8787, GatewayConfig(), Paths(tmp_path, None))
    assert "Dashboard: http://[::1]:8787/ui/" in banner
    assert "--token" not in banner
    assert "Authorization" not in banner


def test_a_port_in_use_says_which_and_how_to_choose_another(sg, home):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = sg("run", "--home", str(home), "--port", str(port))
    assert result.returncode == 1
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert (
        f"could not listen on http://127.0.0.1:{port}: 127.0.0.1:{port} is already in use" in line
    )
    assert "--port" in line
