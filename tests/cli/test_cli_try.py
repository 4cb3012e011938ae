"""`sessiongate try PLATFORM` as a real process: the gateway against each platform's stub."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sessiongate.testing.trial import load_try_target, try_platforms

SHIPPED = ["discord", "matrix", "signal", "slack", "telegram", "whatsapp"]


def test_every_shipped_adapter_can_be_tried():
    assert set(SHIPPED) <= set(try_platforms())
    for name in SHIPPED:
        assert load_try_target(name).platform == name


@pytest.mark.parametrize("platform", SHIPPED)
def test_try_pairs_a_simulated_user_and_gets_the_agents_replies(sg, platform):
    result = sg("try", platform, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert (report["sent"], report["answered"], report["paired"]) == (2, 2, True)
    lines = [(line["speaker"], line["text"]) for line in report["lines"]]
    speakers = [speaker for speaker, _ in lines]
    assert speakers == ["user", "bot", "operator", "user", "bot", "user", "bot"]
    # The stranger's first message is answered with the code the operator then approves.
    code = lines[2][1].removeprefix("sessiongate pairing approve ")
    assert code in lines[1][1]
    assert lines[3:5] == [("user", "hello"), ("bot", "echo: hello")]
    assert lines[6][1].startswith("Session: ")
    [session] = report["sessions"]
    assert session["session_key"].startswith(f"agent:main:{platform}:dm:")
    assert session["messages"] == 2
    assert report["stub_url"].startswith("http://127.0.0.1:")


def test_try_shows_the_conversation_and_a_summary_and_keeps_a_given_home(sg, home):
    result = sg("try", "telegram", "-m", "first words", "-m", "more", "--home", str(home))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Trying Telegram" in out
    assert "user> first words\nbot> echo: first words\n" in out
    assert "bot> echo: more" in out
    assert "operator$> sessiongate pairing approve " in out
    assert "Answered  2 of 2 messages" in out
    assert "ok: the adapter works" in out
    assert "Traceback" not in result.stderr
    # The state stays where it was asked to be: the sessions command reads it.
    listed = json.loads(sg("sessions", "list", "--home", str(home), "--json").stdout)
    assert [row["session_key"] for row in listed["sessions"]] == ["agent:main:telegram:dm:42"]


def test_try_an_unknown_platform_names_the_ones_there_are(sg):
    result = sg("try", "myspace")
    assert result.returncode == 2
    assert "no platform 'myspace' to try; choose one of: " in result.stderr
    assert "telegram" in result.stderr
    blank = sg("try", "telegram", "-m", "  ")
    assert blank.returncode == 2
    assert "--message needs some text" in blank.stderr
    as_json = sg("try", "myspace", "--json")
    assert json.loads(as_json.stderr)["error"]["code"] == "unknown_platform"


def test_try_without_the_sdk_names_the_extra(env):
    script = (
        "import sys; sys.modules['slack_sdk'] = None; "
        "from sessiongate.cli import main; sys.argv = ['sessiongate'] + sys.argv[1:]; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, "try", "slack"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    assert "pip install 'sessiongate[slack]'" in result.stderr
    assert "Traceback" not in result.stderr
