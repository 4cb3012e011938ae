"""Agents: the `Agent` protocol, the echo agent (default) and the OpenAI-compatible agent.

`build_agent_factory(config)` picks one from the configuration: the OpenAI-compatible agent when
`agent.openai.base_url` or `agent.openai.api_key` is set, else the echo agent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.agents.base import Agent, AgentFactory, TurnRequest, TurnResult, Usage
from sessiongate.agents.echo import EchoAgent
from sessiongate.agents.openai_agent import OpenAIAgent, import_openai
from sessiongate.agents.tools import load_tools

if TYPE_CHECKING:
    from sessiongate.core.config import GatewayConfig

__all__ = [
    "Agent",
    "AgentFactory",
    "EchoAgent",
    "OpenAIAgent",
    "TurnRequest",
    "TurnResult",
    "Usage",
    "build_agent_factory",
]


def build_agent_factory(config: GatewayConfig) -> AgentFactory:
    """A factory making one agent per session key, chosen by `config.agent`.

    The OpenAI agent's optional dependency and its tools are imported here, so a gateway
    configured for it without `sessiongate[openai]` installed, or with a name in
    `agent.openai.tools` that is no tool (`ToolLoadError`, an ImportError), fails at startup,
    not at its first turn.
    """
    openai_config = config.agent.openai
    if openai_config.base_url or openai_config.api_key is not None:
        import_openai()
        tools = load_tools(openai_config.tools)

        def make_openai_agent(session_key: str) -> Agent:
            return OpenAIAgent(openai_config, tools=tools)

        return make_openai_agent

    delay = config.agent.echo.delay_seconds

    def make_echo_agent(session_key: str) -> Agent:
        return EchoAgent(delay_seconds=delay)

    return make_echo_agent
