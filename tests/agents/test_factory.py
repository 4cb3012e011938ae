"""`build_agent_factory`: one agent per session, of the agent its key's namespace names."""

from __future__ import annotations

import pytest

from fake_openai import FakeOpenAI
from sessiongate import GatewayConfig
from sessiongate.agents import EchoAgent, OpenAIAgent, build_agent_factory


async def test_each_namespace_gets_its_own_kind_of_agent():
    with FakeOpenAI() as fake:
        config = GatewayConfig(
            agents={"support": {"kind": "openai", "base_url": fake.base_url, "model": "m"}}
        )
        factory = build_agent_factory(config)
        support = factory("agent:support:api:dm:a")
        try:
            assert isinstance(support, OpenAIAgent)
            assert support.config.model == "m"
        finally:
            await support.aclose()
        assert isinstance(factory("agent:main:api:dm:a"), EchoAgent)
        assert isinstance(factory("a-legacy-key"), EchoAgent)  # no namespace: main


def test_a_key_of_an_agent_no_longer_configured_is_a_clear_error():
    factory = build_agent_factory(GatewayConfig(agents={"support": {"kind": "echo"}}))
    with pytest.raises(LookupError, match=r"no agent 'gone' is configured .*main, support"):
        factory("agent:gone:api:dm:a")
