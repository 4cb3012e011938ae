"""System prompts: an agent's instructions (text or file) and a binding's override reach the
model before the session context block, through a real gateway and the fake model server;
a prompt given twice, or a file that is missing, is a clear configuration error."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from sessiongate import GatewayConfig, SessionStore
from sessiongate.agents import build_agent_factory
from sessiongate.api.rows import context_view
from sessiongate.config import ConfigError, load_config
from sessiongate.core.source import SessionSource
from sessiongate.gateway import GatewayRunner, MessageEvent
from sessiongate.gateway.prompts import SystemPromptError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    from fake_openai import FakeOpenAI

SUPPORT = "You are Acme's support bot. Answer only questions about orders."
PERSONAL = "You are Ada's personal assistant."


@pytest.fixture
async def run_gateway(tmp_path, clock, server: FakeOpenAI) -> AsyncIterator[Any]:
    made: list[tuple[GatewayRunner, SessionStore]] = []

    async def make(config: GatewayConfig) -> GatewayRunner:
        store = SessionStore(tmp_path / "home" / "sessions", config, clock=clock)
        runner = GatewayRunner(
            store,
            config,
            home=tmp_path / "home",
            agent_factory=build_agent_factory(config),
            clock=clock,
        )
        await runner.start()
        made.append((runner, store))
        return runner

    yield make
    for runner, store in made:
        await runner.stop()
        store.close()


def openai(server: FakeOpenAI, **extra: Any) -> dict[str, Any]:
    return {"kind": "openai", "base_url": server.base_url, "max_retries": 0, **extra}


def system_of(server: FakeOpenAI, index: int) -> str:
    first = server.requests[index]["body"]["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


async def say(runner: GatewayRunner, chat_id: str, text: str = "hi") -> None:
    source = SessionSource(platform="api", chat_id=chat_id, user_id=chat_id)
    receipt = await runner.handle_message(MessageEvent(source=source, text=text))
    assert receipt.status == "replied"


async def test_an_agents_prompt_comes_first_and_a_binding_overrides_it(run_gateway, server):
    config = GatewayConfig(
        agents={"main": openai(server, system_prompt=PERSONAL)},
        bindings=[{"platform": "api", "chat_id": "vip", "agent": "main", "system_prompt": SUPPORT}],
    )
    runner = await run_gateway(config)
    await say(runner, "ada")
    await say(runner, "vip")
    personal, support = system_of(server, 0), system_of(server, 1)
    assert personal.startswith(PERSONAL + "\n\n")
    assert support.startswith(SUPPORT + "\n\n")
    assert PERSONAL not in support
    # The session context block follows the instructions, as it did alone before.
    assert "api" in personal[len(PERSONAL) :].lower()
    # What operators see as the next turn's context says the same.
    entry = runner.store.get_session("agent:main:api:dm:vip")
    view = context_view(
        entry,
        runner.store.model_context(entry.session_id),
        runner.store,
        prompts=runner.system_prompts,
    )
    assert view.system_prompt is not None
    assert view.system_prompt.startswith(SUPPORT + "\n\n")


async def test_one_gateway_runs_two_agents_each_with_its_own_prompt(run_gateway, server):
    config = GatewayConfig(
        agents={
            "main": openai(server, system_prompt=PERSONAL),
            "support": openai(server, system_prompt=SUPPORT),
        },
        bindings=[{"platform": "api", "chat_id": "shop", "agent": "support"}],
    )
    runner = await run_gateway(config)
    await say(runner, "shop")
    await say(runner, "ada")
    assert system_of(server, 0).startswith(SUPPORT)
    assert system_of(server, 1).startswith(PERSONAL)


async def test_the_legacy_agent_section_takes_a_prompt_file(run_gateway, server, tmp_path):
    prompt = tmp_path / "persona.md"
    prompt.write_text(PERSONAL + "\n", encoding="utf-8")
    config = GatewayConfig(
        agent={
            "system_prompt_file": str(prompt),
            "openai": {"base_url": server.base_url, "max_retries": 0},
        }
    )
    runner = await run_gateway(config)
    await say(runner, "ada")
    assert system_of(server, 0).startswith(PERSONAL + "\n\n")


def test_a_prompt_given_as_text_and_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "agents:\n  support:\n    kind: echo\n    system_prompt: hi\n"
        "    system_prompt_file: persona.md\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert "agents.support" in caught.value.message
    assert "system_prompt and system_prompt_file are both set" in caught.value.message


def test_a_missing_prompt_file_is_refused_naming_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "agents:\n  support:\n    kind: echo\n    system_prompt_file: persona.md\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path, environ={})
    assert "agents.support.system_prompt_file: no such file" in caught.value.message
    assert str(tmp_path / "persona.md") in caught.value.message


def test_a_relative_prompt_file_is_read_from_the_config_files_folder(tmp_path: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "support.md").write_text(SUPPORT, encoding="utf-8")
    path = tmp_path / "config.yaml"
    path.write_text(
        "agents:\n  support:\n    kind: echo\n"
        "bindings:\n  - platform: telegram\n    agent: support\n"
        "    system_prompt_file: prompts/support.md\n",
        encoding="utf-8",
    )
    config = load_config(path, environ={})
    assert config.bindings[0].system_prompt_file == str(tmp_path / "prompts" / "support.md")


async def test_a_runner_refuses_to_start_on_an_unreadable_prompt_file(tmp_path, clock) -> None:
    config = GatewayConfig(agent={"system_prompt_file": str(tmp_path / "gone.md")})
    store = SessionStore(tmp_path / "sessions", config, clock=clock)
    try:
        with pytest.raises(SystemPromptError, match=r"agent\.system_prompt_file: no such file"):
            GatewayRunner(store, config, home=tmp_path, agent_factory=build_agent_factory(config))
    finally:
        store.close()
