"""The `Agent` protocol: what the gateway needs from whatever produces replies."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from sessiongate.gateway.messages import Inbox

if TYPE_CHECKING:
    from sessiongate.core.turn_events import TurnEvent
    from sessiongate.gateway.approvals import TurnApprovals

__all__ = [
    "Agent",
    "AgentFactory",
    "AgentHost",
    "AgentResources",
    "StreamingAgent",
    "TurnRequest",
    "TurnResult",
    "Usage",
]


class AgentHost(Inbox, Protocol):
    """What an agent's tools may use of the gateway running the turn (`GatewayRunner` is one):
    the store, to read sessions, and `handle_message`, to start turns in other sessions. It
    is the `Inbox` adapters are given, by the name tools know it by."""


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """One turn: the model context built by the gateway, the new user message last."""

    session_key: str
    session_id: str
    system_prompt: str
    messages: list[dict[str, Any]]
    model: str | None = None
    provider: str | None = None
    thinking_level: str | None = None
    # Set when the turn resumes one interrupted by a restart; tells the agent not to redo
    # actions that may already have happened.
    resume_note: str | None = None
    turn_id: int | None = None
    # The gateway running the turn, for tools that work with sessions (None outside one).
    host: AgentHost | None = None
    # What the agent asks before running a call that needs a person's approval
    # (`gateway/approvals.py`); None when no tool of this agent needs one.
    approvals: TurnApprovals | None = None
    # Set when a resumed turn stopped while its last assistant message's calls waited for
    # approval (none of them started): that message, whose calls the agent runs first.
    awaiting: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TurnResult:
    text: str
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    # Messages the agent produced before its final reply (tool calls and results), stored in
    # the transcript ahead of the assistant text.
    messages: list[dict[str, Any]] = field(default_factory=list)


class Agent(Protocol):
    """An agent serving one session key; the gateway caches one per key (spec §11)."""

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        """Produce the reply. Cancellation (interrupt, timeout, shutdown) may arrive at any
        await; the gateway journals the outcome."""
        ...

    async def summarize(self, messages: list[dict[str, Any]]) -> str:
        """A summary of `messages` for compaction."""
        ...

    async def aclose(self) -> None:
        """Release clients and resources; the transcript is already durable."""
        ...


@runtime_checkable
class StreamingAgent(Agent, Protocol):
    """An agent whose turn is a stream of events (DESIGN decision 11).

    The gateway prefers `stream_turn` when an agent has it; `run_turn` stays for agents written
    before streaming and is wrapped into a one-message stream.
    """

    def stream_turn(self, request: TurnRequest) -> AsyncIterator[TurnEvent]:
        """Yield the turn's events, ending with exactly one `TurnEnd`."""
        ...


AgentFactory = Callable[[str], Agent]


@runtime_checkable
class AgentResources(Protocol):
    """What an agent factory may hold for all its agents (the MCP servers of
    `build_agent_factory`): the gateway starts it before the first turn and closes it after
    the last."""

    async def start(self) -> None:
        """Start; must return in bounded time (a slow resource keeps starting behind)."""
        ...

    async def aclose(self) -> None:
        """Stop; idempotent."""
        ...
