"""Which agent answers, said where a person looks: the banner's agent line and `doctor`'s
check that an `OPENAI_API_KEY` in the environment is used by some agent.

The choice stays explicit (an `OPENAI_API_KEY` alone never switches the echo agent to a model:
it may belong to another program); these make the choice visible and say how to change it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.core.config import EntryAgentSpec, GatewayConfig, OpenAIAgentSpec

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sessiongate.core.config import EchoAgentSpec

__all__ = ["agents_line", "describe_agent", "openai_key_unused", "unused_key_hint"]

ENV_KEY = "OPENAI_API_KEY"
_DOCS = "docs/AGENTS.md"


def describe_agent(spec: EchoAgentSpec | OpenAIAgentSpec | EntryAgentSpec) -> str:
    """`echo (repeats each message)`, `openai-compatible, model M at URL` or
    `langgraph, from mypkg:graph`."""
    if isinstance(spec, EntryAgentSpec):
        return f"{spec.kind}, from {spec.entry}"
    if isinstance(spec, OpenAIAgentSpec):
        return f"openai-compatible, model {spec.model} at {spec.base_url or 'api.openai.com'}"
    delay = spec.delay_seconds
    return "echo (repeats each message" + (f" after {delay:g} s)" if delay else ")")


def openai_key_unused(config: GatewayConfig, environ: Mapping[str, str]) -> bool:
    """Whether `OPENAI_API_KEY` is set and no agent would send it: every agent is echo, or
    each OpenAI-compatible one has its own `api_key`."""
    if not environ.get(ENV_KEY):
        return False
    for agent_id in config.agent_ids():
        spec = config.agent_spec(agent_id)
        if isinstance(spec, OpenAIAgentSpec) and spec.api_key is None:
            return False
    return True


def unused_key_hint(config: GatewayConfig) -> str:
    """How to put an unused `OPENAI_API_KEY` to work."""
    if config.agents:
        return "set an agent's kind to openai under agents: in the config"
    return (
        "set agent.openai.base_url (e.g. SESSIONGATE_AGENT__OPENAI__BASE_URL="
        "https://api.openai.com/v1) to answer with a model"
    )


def agents_line(config: GatewayConfig, environ: Mapping[str, str]) -> str:
    """The banner's one line: which agent(s) answer and how to change that."""
    ids = config.agent_ids()
    specs = {agent_id: config.agent_spec(agent_id) for agent_id in ids}
    if len(ids) == 1:
        spec = specs[ids[0]]
        line = f"Agent: {describe_agent(spec)}."
    else:
        line = "Agents: " + "; ".join(f"{i} = {describe_agent(s)}" for i, s in specs.items()) + "."
    if openai_key_unused(config, environ):
        return f"{line} {ENV_KEY} is set but unused: {unused_key_hint(config)} ({_DOCS})."
    if len(ids) > 1 or config.agents:
        return f"{line} Change them under agents: in the config ({_DOCS})."
    if isinstance(specs[ids[0]], OpenAIAgentSpec):
        return f"{line} Change it under agent.openai in the config ({_DOCS})."
    return f"{line} To answer with a model, set agent.openai.base_url ({_DOCS})."
