"""`sessiongate pairing` and `sessiongate run` with a platform, as real processes."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sessiongate import GatewayConfig, SessionStore
from sessiongate.store.platform_state import PlatformState
from sessiongate.testing.stubs.telegram import BotApiStub, serve_stub_in_thread

if TYPE_CHECKING:
    from pathlib import Path


def _request_code(home: Path) -> str:
    store = SessionStore(home / "sessions", GatewayConfig())
    try:
        result = PlatformState(store).request_pairing(
            "telegram",
            user_id="77",
            chat_id="77",
            user_name="ann",
            ttl_seconds=3600,
            max_pending=3,
        )
    finally:
        store.close()
    assert result.code is not None
    return result.code


def test_pairing_list_shows_a_pending_code_and_approve_admits_it(sg, home):
    code = _request_code(home)
    listed = sg("pairing", "list", "--home", str(home), "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["requests"]
    assert (row["code"], row["status"], row["user_id"]) == (code, "pending", "77")
    approved = sg("pairing", "approve", code.lower(), "--home", str(home))
    assert approved.returncode == 0, approved.stderr
    assert "approved ann" in approved.stdout
    again = json.loads(sg("pairing", "list", "--home", str(home), "--json").stdout)
    assert again["requests"][0]["status"] == "approved"


def test_approving_an_unknown_code_fails_with_one_line(sg, home):
    _request_code(home)
    result = sg("pairing", "approve", "NOPE1234", "--home", str(home))
    assert result.returncode == 1
    assert "no pending pairing request" in result.stderr
    assert "Traceback" not in result.stderr


def _config(tmp_path: Path, **telegram: str) -> Path:
    path = tmp_path / "config.yaml"
    lines = ["platforms:", "  telegram:"] + [f"    {k}: '{v}'" for k, v in telegram.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_run_with_a_refused_token_exits_at_once_with_a_clear_message(sg, home, tmp_path):
    stub = BotApiStub()
    with serve_stub_in_thread(stub) as url:
        config = _config(tmp_path, token="1000:WRONG", base_url=url)
        result = sg("run", "--home", str(home), "--port", "0", "--config", str(config))
    assert result.returncode == 1
    assert "Telegram refused the bot token" in result.stderr
    assert "Traceback" not in result.stderr
    assert stub.unauthorized == 1  # no retry loop


def test_run_with_an_enabled_platform_whose_sdk_is_missing_names_the_extra(env, home, tmp_path):
    import subprocess
    import sys

    config = _config(tmp_path, token="1000:X")
    # The SDK made unimportable for this process only, as if the extra were not installed.
    script = (
        "import sys; sys.modules['telegram'] = None; "
        "from sessiongate.cli import main; sys.argv = ['sessiongate'] + sys.argv[1:]; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, "run", "--home", str(home), "--config", str(config)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        "error: platforms.telegram is enabled but its SDK is not installed: "
        "pip install 'sessiongate[telegram]'"
    ]
    assert not (home / "sessions").exists()
