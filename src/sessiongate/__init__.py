"""sessiongate: session lifecycle engine and gateway for chat agents.

Layers (each imports only the ones above it):

    core/      pure domain: platforms, sources, entries, keys, identity, policies, context
    store/     persistence: SQLite (state.db), the sessions.json mirror, SessionStore
    gateway/   runtime: lanes, durable inbound queue, turn journal, recovery, commands
    agents/    the Agent protocol, the echo agent, an OpenAI-compatible agent
    adapters/  platform adapters: local terminal, HTTP API, loopback
    api/       the HTTP app
    cli.py     the `sessiongate` command; config.py loads GatewayConfig
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
