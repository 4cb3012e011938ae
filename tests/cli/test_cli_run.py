"""`sessiongate run` and `sessiongate chat` as real processes."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import httpx
import pytest

LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


def _start(home, env) -> tuple[subprocess.Popen[str], str, str]:
    """Start `run` on a free port; returns the process, its URL and the banner it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiongate", "run", "--home", str(home), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    assert proc.stdout is not None
    seen = []
    url = None
    for line in proc.stdout:
        seen.append(line)
        match = LISTENING.search(line)
        if match:
            url = match.group(1)
        if url and line.startswith("Stop:"):  # the banner's last line
            return proc, url, "".join(seen)
    _, err = proc.communicate()
    raise AssertionError(f"run exited without listening: {''.join(seen)} {err}")


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_run_serves_a_message_and_exits_cleanly_on_a_signal(sg, env, home, stop_signal):
    proc, url, banner = _start(home, env)
    try:
        response = httpx.post(f"{url}/v1/messages", json={"chat_id": "cli", "text": "ping"})
        assert response.json()["reply"] == "echo: ping"
        proc.send_signal(stop_signal)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"curl -s {url}/v1/messages" in banner
    logs = [json.loads(line) for line in err.splitlines() if line.strip()]
    assert logs, "no log lines"
    assert all("event" in line and "level" in line for line in logs)
    listed = json.loads(sg("sessions", "list", "--home", str(home), "--json").stdout)
    assert [row["session_key"] for row in listed["sessions"]] == ["agent:main:api:dm:cli"]


def test_run_refuses_a_public_address_without_a_token(sg, home):
    result = sg("run", "--home", str(home), "--host", "0.0.0.0", "--port", "0")
    assert result.returncode == 2
    assert "refusing to listen" in result.stderr
    assert not (home / "sessions").exists()


def test_run_refuses_a_public_address_with_an_empty_token(sg, env, home):
    result = sg(
        "run",
        "--home",
        str(home),
        "--host",
        "0.0.0.0",
        "--port",
        "0",
        env=env(SESSIONGATE_API__TOKEN=""),
    )
    assert result.returncode == 2, result.stderr
    assert "refusing to listen" in result.stderr
    assert not (home / "sessions").exists()


def test_run_refuses_a_public_address_with_a_short_token(sg, env, home):
    token = "Short-Secret-15"
    result = sg(
        "run",
        "--home",
        str(home),
        "--host",
        "0.0.0.0",
        "--port",
        "0",
        env=env(SESSIONGATE_API__TOKEN=token),
    )
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "refusing to listen" in line
    assert "15 characters" in line
    assert "at least 16" in line
    assert token not in result.stderr + result.stdout
    assert not (home / "sessions").exists()


def test_run_with_a_bad_log_level_is_a_usage_error(sg, home):
    result = sg("run", "--home", str(home), "--log-level", "loud")
    assert result.returncode == 2


def test_chat_converses_on_the_local_platform(sg, home):
    result = sg("chat", "--home", str(home), "--chat-id", "me", input="hello\n\n/quit\nnot sent\n")
    assert result.returncode == 0, result.stderr
    assert "agent> echo: hello" in result.stdout
    assert "not sent" not in result.stdout
    again = sg("chat", "--home", str(home), "--chat-id", "me", input="again\n")
    assert "agent> echo: again" in again.stdout
    listed = json.loads(sg("sessions", "list", "--home", str(home), "--json").stdout)
    [row] = listed["sessions"]
    assert row["platform"] == "local"
    shown = sg("sessions", "show", row["session_key"], "--home", str(home), "-t", "--json")
    contents = [e["content"] for e in json.loads(shown.stdout)["events"]]
    assert contents == ["hello", "echo: hello", "again", "echo: again"]


def test_an_incognito_chat_writes_nothing_of_itself_to_disk(sg, home):
    result = sg(
        "chat", "--home", str(home), "--incognito", input="walrus-7342\n/status\nmore walrus\n"
    )
    assert result.returncode == 0, result.stderr
    assert "agent> echo: walrus-7342" in result.stdout
    assert "agent> echo: more walrus" in result.stdout
    assert "incognito" in result.stdout + result.stderr
    for path in (home / "sessions").rglob("*"):
        if path.is_file():
            assert b"walrus" not in path.read_bytes(), path
    listed = json.loads(sg("sessions", "list", "--home", str(home), "--json").stdout)
    assert listed["sessions"] == []


def test_chat_ends_at_end_of_input(sg, home):
    result = sg("chat", "--home", str(home), input="only line\n")
    assert result.returncode == 0, result.stderr
    assert "echo: only line" in result.stdout


def test_python_dash_m_sessiongate_prints_the_version(sg):
    result = sg("--version")
    assert result.returncode == 0
    assert result.stdout.startswith("sessiongate ")


def test_run_on_a_port_in_use_exits_1(sg, home):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = sg("run", "--home", str(home), "--port", str(port))
    assert result.returncode == 1
    assert "could not listen" in result.stderr


def _turn_states(home) -> list[tuple[str, int]]:
    import sqlite3

    conn = sqlite3.connect(home / "sessions" / "state.db", timeout=30)
    try:
        return [(str(s), int(a)) for s, a in conn.execute("SELECT state, attempt FROM turns")]
    finally:
        conn.close()


def test_chat_and_a_second_run_refuse_the_home_of_a_live_gateway(sg, env, home):
    # A turn that outlives the test's checks, cut off by a short drain at the end.
    slow = env(
        SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="60",
        SESSIONGATE_AGENT__RESTART_DRAIN_TIMEOUT="0.1",
    )
    proc, url, _ = _start(home, lambda: slow)
    try:
        sent = httpx.post(f"{url}/v1/messages", json={"chat_id": "g", "text": "x", "wait": False})
        assert sent.status_code == 202, sent.text
        for refused in (
            sg("chat", "--home", str(home), input="hello\n", env=slow),
            sg("run", "--home", str(home), "--port", "0", env=slow),
        ):
            assert refused.returncode == 1
            assert "Traceback" not in refused.stderr
            [line] = refused.stderr.strip().splitlines()
            assert "in use" in line, line
            assert "echo: hello" not in refused.stdout
        # The live gateway's turn was neither requeued nor run again, and no stop was recorded.
        assert _turn_states(home) == [("running", 1)]
        assert not (home / ".clean_shutdown").exists()
        # Commands that start no runner still work beside the gateway.
        listed = sg("sessions", "list", "--home", str(home), "--json")
        assert listed.returncode == 0, listed.stderr
        assert sg("doctor", "--home", str(home)).returncode == 0
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    after = sg("chat", "--home", str(home), input="hello\n")
    assert after.returncode == 0, after.stderr
    assert "agent> echo: hello" in after.stdout


def test_chat_stops_gracefully_on_sigterm(env, home):
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiongate", "chat", "--home", str(home), "--chat-id", "me"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    try:
        assert proc.stdin is not None
        assert proc.stdout is not None
        proc.stdin.write("hello\n")
        proc.stdin.flush()
        for line in proc.stdout:
            if "agent> echo: hello" in line:
                break
        proc.send_signal(signal.SIGTERM)
        # stdin stays open, as in a terminal: the signal alone ends the chat.
        proc.wait(timeout=60)
        assert proc.stderr is not None
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    # runner.stop() ran: the clean-shutdown marker is there for the next start.
    assert (home / ".clean_shutdown").exists()
