"""Agents from your own code: `agents.<id>: {kind: python, entry: "mypkg.bot:make_agent"}`.

`entry` names an object, or a function returning one (called once per session, with no
arguments or with the session key). The object is recognised by its type:

| object                                   | served as                                  |
|------------------------------------------|--------------------------------------------|
| a sessiongate `Agent` (`run_turn`, or `stream_turn`) | itself                          |
| an OpenAI Agents SDK `agents.Agent`      | `agents/openai_agents.py` (`[openai-agents]`) |
| a pydantic-ai `pydantic_ai.Agent`        | `agents/pydantic_ai.py` (`[pydantic-ai]`)  |
| a compiled LangGraph graph               | `agents/langgraph.py` (`[langgraph]`)      |

`kind: openai-agents | pydantic-ai | langgraph` is the same with the kind checked. Everything
that can fail (the import, the attribute, a factory that raises, an object of no known type,
a framework that is not installed) fails when the gateway starts, naming the setting.
"""

from __future__ import annotations

import importlib
import inspect
from typing import TYPE_CHECKING

from sessiongate.errors import SessiongateError

if TYPE_CHECKING:
    from collections.abc import Callable

    from sessiongate.agents.tools import Toolset
    from sessiongate.core.config import EntryAgentSpec
    from sessiongate.gateway.agent import Agent

__all__ = ["AgentLoadError", "entry_agent_maker", "load_entry", "wrap_agent"]

# The top-level package each framework's objects come from, with its extra.
_FRAMEWORKS = {
    "openai-agents": ("agents", "openai-agents"),
    "pydantic-ai": ("pydantic_ai", "pydantic-ai"),
    "langgraph": ("langgraph", "langgraph"),
}


class AgentLoadError(SessiongateError, ImportError):
    """An `entry` that names no usable agent (an ImportError: reported at start-up)."""

    code = "invalid_agent"


def load_entry(entry: str, *, where: str) -> object:
    """The object `module:attribute` names (the attribute may be dotted)."""
    module_name, _, attribute = entry.partition(":")
    try:
        target: object = importlib.import_module(module_name)
    except Exception as exc:
        raise AgentLoadError(
            f"{where} ({entry!r}): cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from exc
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise AgentLoadError(f"{where} ({entry!r}): {module_name!r} has no {attribute!r}")
        target = getattr(target, part)
    return target


def framework_of(target: object) -> str | None:
    """The framework kind of `target`'s type (`openai-agents`, ...), by the package that
    defines it or one of its bases; None for anything else."""
    for cls in type(target).__mro__:
        top = cls.__module__.split(".", 1)[0]
        for kind, (package, _) in _FRAMEWORKS.items():
            if top == package:
                return kind
    return None


def wrap_agent(
    target: object,
    *,
    kind: str,
    where: str,
    session_key: str | None,
    toolset: Toolset | None = None,
) -> Agent:
    """`target` served as a sessiongate `Agent`, per its type (and `kind`, when not python);
    `toolset` holds the MCP tools the configuration gives it (`agents.<id>.tools`)."""
    framework = framework_of(target)
    if framework is None and _is_agent(target) and kind == "python":
        if toolset is not None:
            raise AgentLoadError(
                f"{where}.tools: MCP tools go to a framework's agent; your own Agent calls "
                "its tools itself"
            )
        return target  # type: ignore[return-value]
    if framework is None:
        raise AgentLoadError(
            f"{where}: {type(target).__name__} is not an agent: give a sessiongate Agent, an "
            "OpenAI Agents SDK Agent, a pydantic-ai Agent or a compiled LangGraph graph"
        )
    if kind not in ("python", framework):
        raise AgentLoadError(f"{where}: kind {kind!r}, but the entry is a {framework} object")
    if toolset is not None and framework not in ("openai-agents", "pydantic-ai"):
        raise AgentLoadError(
            f"{where}.tools: a {framework} agent takes no MCP tools from the configuration "
            "(a graph's tools are compiled in)"
        )
    if framework == "openai-agents":
        from sessiongate.agents.openai_agents import OpenAIAgentsAgent

        return OpenAIAgentsAgent(target, toolset=toolset)
    if framework == "pydantic-ai":
        from sessiongate.agents.pydantic_ai import PydanticAIAgent

        return PydanticAIAgent(target, toolset=toolset)
    from sessiongate.agents.langgraph import LangGraphAgent

    return LangGraphAgent(target, session_key=session_key)


def entry_agent_maker(
    spec: EntryAgentSpec, *, where: str, toolset: Toolset | None = None
) -> Callable[[str], Agent]:
    """A function making the agent of one session from `spec`; checks everything it can now
    (so a wrong entry stops the start, not a turn)."""
    if spec.kind in _FRAMEWORKS:
        package, extra = _FRAMEWORKS[spec.kind]
        try:
            importlib.import_module(package)
        except ImportError as exc:
            raise AgentLoadError(
                f"{where}: kind {spec.kind!r} needs its framework: "
                f"pip install 'sessiongate[{extra}]'"
            ) from exc
    target = load_entry(spec.entry, where=f"{where}.entry")
    factory = _factory(target)
    if factory is None:
        agent = wrap_agent(target, kind=spec.kind, where=where, session_key=None, toolset=toolset)
        stateless = framework_of(target) is not None
        # A framework object is shared by every session (its state is the transcript); an
        # Agent instance of your own is too, as you made it.
        return lambda key: (
            wrap_agent(target, kind=spec.kind, where=where, session_key=key, toolset=toolset)
            if stateless
            else agent
        )

    def make(session_key: str) -> Agent:
        try:
            made = factory(session_key)
        except Exception as exc:
            raise AgentLoadError(
                f"{where}.entry ({spec.entry!r}) raised {type(exc).__name__}: {exc}"
            ) from exc
        return wrap_agent(
            made, kind=spec.kind, where=where, session_key=session_key, toolset=toolset
        )

    make("agent:check:local:dm:startup")  # a factory that cannot make an agent fails now
    return make


def _factory(target: object) -> Callable[[str], object] | None:
    """`target` as a factory taking the session key, when it is a plain function (a class or
    an agent object is not one)."""
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        return None
    parameters = [
        p
        for p in inspect.signature(target).parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
    ]
    function: Callable[..., object] = target
    if parameters:
        return lambda key: function(key)
    return lambda key: function()


def _is_agent(target: object) -> bool:
    return callable(getattr(target, "run_turn", None)) or callable(
        getattr(target, "stream_turn", None)
    )
