"""The `Agent` protocol and its turn types, defined by the gateway that calls agents.

Agents sit below the gateway in the layering (they import it, never the reverse), so the seam
lives in `sessiongate.gateway.agent`; it is re-exported here, where agent authors look for it.
"""

from __future__ import annotations

from sessiongate.gateway.agent import (
    Agent,
    AgentFactory,
    AgentHost,
    StreamingAgent,
    TurnRequest,
    TurnResult,
    Usage,
)

__all__ = [
    "Agent",
    "AgentFactory",
    "AgentHost",
    "StreamingAgent",
    "TurnRequest",
    "TurnResult",
    "Usage",
]
