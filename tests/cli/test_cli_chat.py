"""`sessiongate chat` in a real terminal (a pty) and as a client of a running gateway."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time

import pytest

from sessiongate.cli.chat import CHAT_HELP, HISTORY_FILE

LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")
# A hang guard for the child, never a timing assertion.
GUARD_SECONDS = 60.0


def _take_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Pty:
    """`sessiongate chat` on a pseudo-terminal: what a person at a terminal sees."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.fd, child_end = pty.openpty()
        # Its own session, so the terminal is its controlling terminal, as in a shell.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sessiongate", *args],
            stdin=child_end,
            stdout=child_end,
            stderr=child_end,
            env=env,
            start_new_session=True,
            # The terminal as its controlling terminal, as a shell gives it: Ctrl+C typed
            # there is a SIGINT to the chat.
            preexec_fn=_take_terminal,
        )
        os.close(child_end)
        self.raw = ""

    def read_until(self, marker: str, *, count: int = 1) -> None:
        deadline = time.monotonic() + GUARD_SECONDS
        while self.raw.count(marker) < count:
            assert time.monotonic() < deadline, f"never saw {marker!r} in {self.raw!r}"
            ready, _, _ = select.select([self.fd], [], [], 1.0)
            if ready:
                try:
                    self.raw += os.read(self.fd, 4096).decode("utf-8", "replace")
                except OSError:  # the child has gone
                    break

    def type(self, line: str) -> None:
        os.write(self.fd, line.encode() + b"\r")

    def press(self, key: str) -> None:
        """A key alone, no Enter after it: Ctrl+C then Enter would also send an empty line."""
        os.write(self.fd, key.encode())

    def screen(self) -> str:
        """The text as it stands on screen: a cleared line (`\\r ESC[K`) is gone."""
        text = self.raw.replace("\r\n", "\n")
        return re.sub(r"[^\n]*\r\x1b\[K", "", text)

    def wait(self) -> int:
        """Read to the end of the child's output, then its exit code."""
        deadline = time.monotonic() + GUARD_SECONDS
        while True:
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError(f"chat did not leave: {self.raw!r}")
            ready, _, _ = select.select([self.fd], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            if not chunk:
                break
            self.raw += chunk.decode("utf-8", "replace")
        os.close(self.fd)
        return self.proc.wait(timeout=GUARD_SECONDS)


def test_chat_in_a_terminal_welcomes_prompts_after_each_reply_and_keeps_history(env, home):
    term = Pty("chat", "--home", str(home), "--chat-id", "me", env=env())
    term.read_until("you> ")
    term.type("hello")
    term.read_until("agent> echo: hello")
    term.read_until("agent> echo: hello\r\nyou> ")
    term.type("/help")
    term.read_until("/compress")
    term.type("/quit")
    assert term.wait() == 0
    screen = term.screen()
    welcome = screen.splitlines()[0]
    assert f"home {home}" in welcome
    assert "agent: echo" in welcome
    assert "conversation: me" in welcome
    # The prompt comes back after the reply, never before it on the reply's line.
    assert "you> hello\nagent> echo: hello\nyou> /help\n" in screen
    assert "you> agent>" not in screen
    assert CHAT_HELP in screen
    assert "/quit" in CHAT_HELP
    history = home / HISTORY_FILE
    assert history.stat().st_mode & 0o777 == 0o600
    assert "hello" in history.read_text()


def _start_gateway(home, env) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sessiongate", "run", "--home", str(home), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    url = None
    for line in proc.stdout:
        match = LISTENING.search(line)
        url = match.group(1) if match else url
        if url and line.startswith("Stop:"):
            return proc, url
    proc.wait()
    raise AssertionError("the gateway exited before listening")


@pytest.fixture
def gateway(env, home):
    """A real gateway with a token; yields its URL."""
    proc, url = _start_gateway(home, env(SESSIONGATE_API__TOKEN="s3cret"))
    try:
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=GUARD_SECONDS)


def test_chat_with_url_talks_to_the_running_gateway(sg, env, home, tmp_path, gateway):
    elsewhere = str(tmp_path / "client-home")
    result = sg(
        "chat",
        "--home",
        elsewhere,
        "--url",
        gateway,
        "--token",
        "s3cret",
        "--chat-id",
        "remote",
        input="hello over http\n/status\n/quit\nnot sent\n",
    )
    assert result.returncode == 0, result.stderr
    assert "agent> echo: hello over http" in result.stdout
    assert "agent> Session: " in result.stdout  # a command's answer is a reply too
    assert "not sent" not in result.stdout
    # The client opened no store of its own; the gateway's home holds the conversation.
    assert not (tmp_path / "client-home" / "sessions").exists()
    listed = sg("sessions", "list", "--home", str(home), "--json").stdout
    assert "agent:main:api:dm:remote" in listed


def test_chat_with_url_and_a_wrong_token_says_so(sg, tmp_path, gateway):
    result = sg("chat", "--home", str(tmp_path / "c"), "--url", gateway, input="hello\n")
    assert result.returncode == 1
    assert "refused the token" in result.stderr
    assert "Traceback" not in result.stderr


def test_chat_beside_a_live_gateway_names_the_client_mode(sg, home, gateway):
    refused = sg("chat", "--home", str(home), input="hello\n")
    assert refused.returncode == 1
    [line] = refused.stderr.strip().splitlines()
    assert "in use" in line
    assert "--url" in line


def _status_until_replying(term: Pty) -> None:
    """Ask `/status` until it says a turn is being answered (a condition, not a wait)."""
    while True:
        asked = term.raw.count(" waiting")
        term.type("/status")
        term.read_until(" waiting", count=asked + 1)
        if term.raw.rpartition("State: ")[2].startswith("replying"):
            return


def test_ctrl_c_stops_the_turn_and_says_so_a_second_leaves_and_a_cut_off_turn_is_told(env, home):
    slow = env(SESSIONGATE_AGENT__ECHO__DELAY_SECONDS="600")
    term = Pty("chat", "--home", str(home), "--chat-id", "me", env=slow)
    term.read_until("you> ")
    term.type("hello")
    _status_until_replying(term)
    # A newer message cuts the running turn off (busy_input_mode: interrupt): it is told.
    term.type("newer")
    term.read_until('(the reply to "hello" was cut off by "newer")')
    _status_until_replying(term)
    term.press("\x03")  # Ctrl+C, as the terminal sends it
    term.read_until("Stopped the current reply.")
    term.press("\x03")
    assert term.wait() == 0
    screen = term.screen()
    assert "^C stopping the reply, as /stop does (Ctrl+C again leaves)" in screen
    assert "^C leaving" in screen
    assert "you> agent>" not in screen
    assert "you> (the reply" not in screen
    assert not screen.rstrip().endswith("you>"), repr(term.raw)
