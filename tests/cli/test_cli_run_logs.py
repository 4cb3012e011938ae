"""What `sessiongate run` writes at start and during real turns: the banner, the log format,
first-start logging, and redaction of ids with `redact_pii`."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from urllib.parse import quote

import httpx

from sessiongate.core.redaction import redact_session_key

LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")
GUARD_SECONDS = 60


def _run_until_stopped(home, env, during=None) -> tuple[str, str]:
    """Start `run`, call `during(url)`, stop it with SIGTERM; returns (banner, stderr)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiongate", "run", "--home", str(home), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    banner, url = [], None
    try:
        for line in proc.stdout:
            banner.append(line)
            match = LISTENING.search(line)
            url = match.group(1) if match else url
            if url and line.startswith("Stop:"):
                break
        assert url is not None, "".join(banner)
        if during is not None:
            during(url)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=GUARD_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    return "".join(banner), err


def _json_lines(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


def test_a_first_start_is_not_a_recovery_and_a_restart_is_a_clean_one(env, home):
    _, first = _run_until_stopped(home, env())
    events = [line["event"] for line in _json_lines(first)]
    assert "first start of this home: nothing to recover" in events
    assert "recovery planned" not in events
    _, second = _run_until_stopped(home, env())
    [planned] = [line for line in _json_lines(second) if line["event"] == "recovery planned"]
    assert planned["clean"] is True


def test_the_banner_names_the_agent_and_a_chat_command_that_works(env, home):
    banner, _ = _run_until_stopped(home, env())
    url = LISTENING.search(banner).group(1)
    assert "Agent: echo" in banner
    assert f"sessiongate chat --url {url}" in banner
    assert f"make chat ARGS='--url {url}'" in banner


def test_log_format_console_writes_lines_for_a_person(env, home):
    _, err = _run_until_stopped(home, env(SESSIONGATE_LOG__FORMAT="console"))
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines
    assert not any(line.lstrip().startswith("{") for line in lines)
    assert any("first start of this home" in line for line in lines)


def test_with_redact_pii_no_log_line_of_a_real_turn_carries_a_raw_id(env, home):
    phone = "+15551234567"
    key = f"agent:main:api:dm:{phone}"

    def traffic(url: str) -> None:
        sent = httpx.post(
            f"{url}/v1/messages", json={"chat_id": phone, "user_id": phone, "text": "hi"}
        )
        assert sent.json()["session_key"] == key
        # An archived lane is refused with a log line naming the lane.
        path = f"{url}/v1/sessions/{quote(key, safe='')}"
        session_id = sent.json()["session_id"]
        patched = httpx.patch(path, json={"archived": True, "expected_session_id": session_id})
        assert patched.status_code == 200, patched.text
        refused = httpx.post(
            f"{url}/v1/messages", json={"chat_id": phone, "user_id": phone, "text": "again"}
        )
        assert refused.status_code == 409

    _, err = _run_until_stopped(home, env(SESSIONGATE_REDACT_PII="true"), during=traffic)
    assert "15551234567" not in err
    lines = _json_lines(err)
    by_event = {line["event"]: line for line in lines}
    hashed = redact_session_key(key)
    for event in ("turn started", "turn replied", "message to an archived session refused"):
        assert by_event[event]["session_key"] == hashed, event
