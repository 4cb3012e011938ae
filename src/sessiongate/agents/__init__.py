"""Agents: the `Agent` protocol, the echo agent (default) and the OpenAI-compatible agent.

`build_agent_factory(config)` picks one per session from the configuration: each agent of
`agents` (and `main`: the OpenAI-compatible agent when `agent.openai.base_url` or
`agent.openai.api_key` is set, else the echo agent) serves the sessions of its namespace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.agents.base import Agent, AgentFactory, TurnRequest, TurnResult, Usage
from sessiongate.agents.echo import EchoAgent
from sessiongate.agents.entry import entry_agent_maker
from sessiongate.agents.openai_agent import OpenAIAgent, import_openai
from sessiongate.agents.tools import load_tools
from sessiongate.core.bindings import DEFAULT_AGENT, agent_of_key
from sessiongate.core.config import EntryAgentSpec, OpenAIAgentSpec
from sessiongate.core.mcp import is_mcp_tool_spec, parse_mcp_tool_spec

if TYPE_CHECKING:
    from collections.abc import Callable

    from sessiongate.agents.mcp import McpServers
    from sessiongate.core.config import EchoAgentSpec, GatewayConfig

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
    """A factory making one agent per session key, of the agent its key's namespace names
    (`agent:<id>:...`; a key without one is `main`'s), from `config.agent_spec(id)`.

    An OpenAI-compatible agent's optional dependency and its tools are imported here, so a
    gateway configured for one without `sessiongate[openai]` installed, or with a name in its
    `tools` that is no tool (`ToolLoadError`, an ImportError), fails at startup, not at its
    first turn. A key of an agent that is no longer configured fails its turn with a clear
    error.

    With `mcp_servers` configured (and named in some agent's `tools`), the factory also holds
    those servers (`sessiongate.agents.mcp.McpServers`): a gateway running it starts them at
    its start and stops them at its stop (`AgentResources`).
    """
    servers = _mcp_servers(config)
    makers: dict[str, Callable[[str], Agent]] = {}
    for agent_id in config.agent_ids():
        spec = config.agent_spec(agent_id)
        makers[agent_id] = _maker(spec, servers, where=f"agents.{agent_id}")
    return _AgentMaker(makers, servers)


class _AgentMaker:
    def __init__(
        self, makers: dict[str, Callable[[str], Agent]], servers: McpServers | None
    ) -> None:
        self._makers = makers
        self.mcp_servers = servers

    def __call__(self, session_key: str) -> Agent:
        agent_id = agent_of_key(session_key) or DEFAULT_AGENT
        maker = self._makers.get(agent_id)
        if maker is None:
            raise LookupError(
                f"no agent {agent_id!r} is configured for session {session_key!r} "
                f"(agents: {', '.join(self._makers)})"
            )
        return maker(session_key)

    async def start(self) -> None:
        if self.mcp_servers is not None:
            await self.mcp_servers.start()

    async def aclose(self) -> None:
        if self.mcp_servers is not None:
            await self.mcp_servers.aclose()


def _mcp_servers(config: GatewayConfig) -> McpServers | None:
    """The configured MCP servers some agent uses (an unused one is not started)."""
    used: set[str] = set()
    for agent_id in config.agent_ids():
        spec = config.agent_spec(agent_id)
        if isinstance(spec, (OpenAIAgentSpec, EntryAgentSpec)):
            used.update(
                parse_mcp_tool_spec(name).server for name in spec.tools if is_mcp_tool_spec(name)
            )
    if not used:
        return None
    from sessiongate.agents.mcp import McpServers

    return McpServers({name: config.mcp_servers[name] for name in sorted(used)})


def _maker(
    spec: EchoAgentSpec | OpenAIAgentSpec | EntryAgentSpec,
    servers: McpServers | None,
    *,
    where: str,
) -> Callable[[str], Agent]:
    if isinstance(spec, EntryAgentSpec):
        toolset = servers.toolset(spec.tools) if servers is not None else None
        return entry_agent_maker(spec, where=where, toolset=toolset)
    if isinstance(spec, OpenAIAgentSpec):
        import_openai()
        tools = load_tools(spec.tools)
        toolset = servers.toolset(spec.tools) if servers is not None else None
        toolsets = [toolset] if toolset is not None else []
        return lambda key: OpenAIAgent(spec, tools=tools, toolsets=toolsets)
    delay = spec.delay_seconds
    return lambda key: EchoAgent(delay_seconds=delay)
