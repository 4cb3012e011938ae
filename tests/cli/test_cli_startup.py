"""The everyday commands start without loading the HTTP API, the gateway's runner or the agents.

The root loads a command's module only when that command is resolved; what the module itself
imports at the top is what every run of the command pays for. Structure, not timing: each
check runs in a fresh interpreter and looks at `sys.modules`.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("fastapi", "sessiongate.gateway.runner", "sessiongate.agents")

_PROBE = """
import json, sys
import typer
from sessiongate.cli import app

root = typer.main.get_command(app)
context = typer.Context(root)
names = root.list_commands(context)
listed = sorted(m for m in sys.modules if m.startswith("sessiongate.cli."))
command = root.get_command(context, sys.argv[1])
assert command is not None
print(json.dumps({
    "names": names,
    "listed": listed,
    "loaded": sorted(m for m in sys.modules if m.startswith(tuple(sys.argv[2:]))),
}))
"""


def _probe(command: str, env: dict[str, str]) -> dict[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, command, *HEAVY],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    result: dict[str, list[str]] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("command", ["sessions", "jobs", "db", "doctor"])
def test_an_everyday_command_loads_neither_the_api_nor_the_runner_nor_the_agents(command, env):
    assert _probe(command, env())["loaded"] == []


def test_the_root_lists_every_command_without_loading_one(env):
    probe = _probe("run", env())
    assert probe["names"][:2] == ["run", "chat"]
    assert {"sessions", "jobs", "db", "doctor", "import", "restore"} <= set(probe["names"])
    assert probe["listed"] == []
    # `run` is the gateway: resolving it is what loads the heavy parts.
    assert "sessiongate.gateway.runner" in probe["loaded"]
