"""What `run` checks of a configuration before it opens anything, shared with `doctor`.

One function, so that `doctor` says "config: ok" exactly when `run` would start on it: the
listen address is safe for the token (or lack of one), every enabled platform's SDK loads and
its adapter builds, and every agent builds (its optional extra, each name in its `tools`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sessiongate.cli._common import EXIT_FAILURE, EXIT_USAGE
from sessiongate.errors import SessiongateError

if TYPE_CHECKING:
    from sessiongate.agents.base import AgentFactory
    from sessiongate.core.config import GatewayConfig
    from sessiongate.gateway.adapter import PlatformAdapter

__all__ = ["PreflightError", "Prepared", "preflight"]


class PreflightError(Exception):
    """Why `run` would not start on this configuration; `exit_code` is the one it exits with."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass(frozen=True, slots=True)
class Prepared:
    adapters: list[PlatformAdapter]
    agent_factory: AgentFactory


def preflight(config: GatewayConfig, *, host: str) -> Prepared:
    """Check `config` as `run` does before it opens the store, listening on `host`; raise
    `PreflightError` with the message `run` prints. Nothing is opened or connected."""
    # Here, not at the top: the API (FastAPI), the adapters and the agents load only when a
    # configuration is checked, not when `doctor` or `run` is merely looked up.
    from sessiongate.adapters.registry import build_adapters
    from sessiongate.agents import build_agent_factory
    from sessiongate.api.bind import UnsafeBindError, check_bind_address

    try:
        check_bind_address(host, config)
    except UnsafeBindError as exc:
        raise PreflightError(exc.message, EXIT_USAGE) from exc
    try:
        # Platform SDKs load here: a missing extra stops the start before anything is opened.
        adapters = build_adapters(config)
    except SessiongateError as exc:
        raise PreflightError(exc.message, EXIT_FAILURE) from exc
    try:
        # An agent's extra and its tools load here: a tool that is no tool stops the start.
        factory = build_agent_factory(config)
    except ImportError as exc:
        raise PreflightError(str(exc), EXIT_FAILURE) from exc
    return Prepared(adapters, factory)
