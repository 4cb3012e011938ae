"""Bindings: which agent an inbound message goes to (a pure rule, no I/O).

A binding names a platform and optionally a chat id, a guild id and a chat type; every field it
gives must equal the source's, the first binding that matches wins, and a message that none
matches goes to agent `main`. An agent's sessions carry its id as their key's namespace
(`agent:<id>:...`), so `main`'s keys are exactly the single-agent gateway's.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterable

    from sessiongate.core.source import SessionSource

__all__ = [
    "AGENT_ID",
    "DEFAULT_AGENT",
    "Binding",
    "agent_for",
    "agent_of_key",
    "binding_for",
    "key_prefix_of",
    "namespace_of",
]

DEFAULT_AGENT = "main"
# Lower-case so one agent has one spelling, and never a `:` or `%`, so a key's namespace can
# be read back without escaping.
AGENT_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}")


class Binding(Protocol):
    """What the rule reads of a binding (`core.config.BindingConfig` is one)."""

    @property
    def platform(self) -> str: ...
    @property
    def chat_id(self) -> str | None: ...
    @property
    def guild_id(self) -> str | None: ...
    @property
    def chat_type(self) -> str | None: ...
    @property
    def agent(self) -> str: ...


B = TypeVar("B", bound=Binding)


def agent_for(source: SessionSource, bindings: Iterable[Binding]) -> str:
    """The id of the agent that serves `source`: the first binding that matches, else `main`."""
    found = binding_for(source, bindings)
    return DEFAULT_AGENT if found is None else found[1].agent


def binding_for(source: SessionSource, bindings: Iterable[B]) -> tuple[int, B] | None:
    """The first binding that matches `source`, with its index, or None."""
    platform = str(source.platform)
    chat_type = str(source.chat_type)
    for index, binding in enumerate(bindings):
        if (
            binding.platform == platform
            and (binding.chat_id is None or binding.chat_id == source.chat_id)
            and (binding.guild_id is None or binding.guild_id == source.guild_id)
            and (binding.chat_type is None or binding.chat_type == chat_type)
        ):
            return index, binding
    return None


def namespace_of(agent_id: str) -> str:
    """The key namespace of an agent's sessions: `agent:<id>`."""
    if not AGENT_ID.fullmatch(agent_id):
        raise ValueError(f"invalid agent id: {agent_id!r}")
    return f"agent:{agent_id}"


def key_prefix_of(agent_id: str) -> str:
    """What every session key of agent `agent_id` starts with (`agent:<id>:`)."""
    return namespace_of(agent_id) + ":"


def agent_of_key(session_key: str) -> str | None:
    """The agent id in a key's namespace (`agent:<id>:...`), or None for a key without one
    (imported from a legacy store)."""
    head, _, rest = session_key.partition(":")
    agent_id, sep, _ = rest.partition(":")
    if head != "agent" or not sep or not AGENT_ID.fullmatch(agent_id):
        return None
    return agent_id
