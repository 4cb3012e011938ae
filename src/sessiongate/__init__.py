"""sessiongate: session lifecycle engine and gateway for chat agents.

Layers (each imports only the ones above it; no two modules import each other):

    core/      pure domain: platforms, sources, entries, keys, identity, policies, context
    store/     persistence: SessionStore over SQLite or PostgreSQL, lanes, the journal
    gateway/   runtime: intake, lanes and their worker, turns, delivery, recovery, commands
    agents/    the Agent protocol, the echo agent, an OpenAI-compatible agent
    adapters/  platform adapters (on adapters/kit), the local terminal, loopback
    ui/        the operator dashboard
    api/       the HTTP app
    cli/       the `sessiongate` command; config.py loads GatewayConfig

One message's path:

    adapter ──MessageEvent──▶ Inbox.handle_message (GatewayRunner)
                                  │
      gateway/intake.py           ▼  authorise, command?, route, accept + claim
      gateway/lanes.py            ▼  one worker per session key
      gateway/worker.py           ▼  lease, resumes, jobs, one turn at a time
      gateway/turns.py            ▼  context → agent → outcome, one commit
      gateway/delivery.py         ▼  reply
    adapter.send ◀────────────────┘
"""

from sessiongate.core.config import GatewayConfig
from sessiongate.core.context import (
    SessionContext,
    build_session_context,
    build_session_context_prompt,
)
from sessiongate.core.entry import SessionEntry
from sessiongate.core.keys import build_session_key, is_shared_multi_user_session, parse_session_key
from sessiongate.core.platform import Platform
from sessiongate.core.source import SessionSource
from sessiongate.store.session_store import SessionStore

__all__ = [
    "GatewayConfig",
    "Platform",
    "SessionContext",
    "SessionEntry",
    "SessionSource",
    "SessionStore",
    "build_session_context",
    "build_session_context_prompt",
    "build_session_key",
    "is_shared_multi_user_session",
    "parse_session_key",
]

__version__ = "0.3.0.dev0"
