"""Which agent answers is said where a person looks: the banner's one agent line (with how to
change it), and `doctor`'s warning when OPENAI_API_KEY is set and no agent uses it. The key
alone never switches the echo agent to a model."""

from __future__ import annotations

import json

from sessiongate import GatewayConfig
from sessiongate.agents import build_agent_factory
from sessiongate.agents.echo import EchoAgent
from sessiongate.cli._agent_choice import agents_line, openai_key_unused

KEY = {"OPENAI_API_KEY": "sk-test-NOT-PRINTED"}


def test_an_openai_key_alone_keeps_the_echo_agent_and_the_banner_says_so():
    config = GatewayConfig()
    assert isinstance(build_agent_factory(config)("agent:main:api:dm:a"), EchoAgent)
    line = agents_line(config, KEY)
    assert line.startswith("Agent: echo (repeats each message).")
    assert "OPENAI_API_KEY is set but unused" in line
    assert "agent.openai.base_url" in line
    assert "sk-test" not in line
    assert "\n" not in line


def test_the_banner_line_names_each_agent_and_how_to_change_it():
    assert agents_line(GatewayConfig(), {}) == (
        "Agent: echo (repeats each message). To answer with a model, set "
        "agent.openai.base_url (docs/AGENTS.md)."
    )
    openai = GatewayConfig(agent={"openai": {"base_url": "http://127.0.0.1:8080/v1"}})
    assert agents_line(openai, KEY) == (
        "Agent: openai-compatible, model gpt-4o-mini at http://127.0.0.1:8080/v1. "
        "Change it under agent.openai in the config (docs/AGENTS.md)."
    )
    two = GatewayConfig(agents={"support": {"kind": "openai", "model": "m"}})
    line = agents_line(two, {})
    assert line.startswith("Agents: main = echo (repeats each message); support = ")
    assert line.endswith("Change them under agents: in the config (docs/AGENTS.md).")


def test_a_key_is_used_by_an_openai_agent_without_its_own_key():
    assert not openai_key_unused(GatewayConfig(), {})
    assert openai_key_unused(GatewayConfig(), KEY)
    own = GatewayConfig(agents={"s": {"kind": "openai", "api_key": "sk-own"}})
    assert openai_key_unused(own, KEY)
    uses = GatewayConfig(agents={"s": {"kind": "openai", "base_url": "http://x/v1"}})
    assert not openai_key_unused(uses, KEY)


def _agents_check(result):
    return next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "agents")


def test_doctor_warns_when_the_key_is_set_and_no_agent_uses_it(sg, env, home):
    result = sg("doctor", "--home", str(home), "--json", env=env(**KEY))
    assert result.returncode == 0, result.stdout  # a warning, not a problem
    check = _agents_check(result)
    assert check["warning"] is True
    assert "OPENAI_API_KEY is set, but no agent uses it" in check["detail"]
    assert "main = echo" in check["detail"]
    assert "sk-test" not in result.stdout + result.stderr
    shown = sg("doctor", "--home", str(home), env=env(**KEY))
    assert "warning" in shown.stdout
    used = sg(
        "doctor",
        "--home",
        str(home),
        "--json",
        env=env(**KEY, SESSIONGATE_AGENT__OPENAI__BASE_URL="http://127.0.0.1:9/v1"),
    )
    assert _agents_check(used)["warning"] is False
    without = env()
    without.pop("OPENAI_API_KEY", None)
    quiet = sg("doctor", "--home", str(home), "--json", env=without)
    assert _agents_check(quiet)["warning"] is False
