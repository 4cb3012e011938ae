"""Where the server may listen: loopback, or beyond it only with a long enough API token.

Apart from api/auth.py (which re-exports it) so that checking a configuration (`run`'s and
`doctor`'s preflight) does not load FastAPI.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from sessiongate.errors import SessiongateError

if TYPE_CHECKING:
    from sessiongate.core.config import GatewayConfig

__all__ = ["MIN_TOKEN_CHARS", "UnsafeBindError", "check_bind_address", "is_loopback_host"]

# Shortest token accepted beyond loopback: with failures limited per address
# (api/auth_limits.py), 16 random characters are beyond guessing.
MIN_TOKEN_CHARS = 16


class UnsafeBindError(SessiongateError, ValueError):
    """An address other than loopback was asked for while no API token is configured."""

    code = "unsafe_bind"


def is_loopback_host(host: str) -> bool:
    """True for `localhost` and loopback IP literals (127.0.0.0/8, ::1)."""
    text = host.strip().strip("[]").lower()
    if text == "localhost":
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        # Any other name may resolve to a public interface; assume it does.
        return False


def check_bind_address(host: str, config: GatewayConfig) -> None:
    """Raise `UnsafeBindError` when `host` is not loopback and no API token is set, or the
    token is shorter than `MIN_TOKEN_CHARS`."""
    if is_loopback_host(host):
        return
    token = config.api.token
    if token is None:
        raise UnsafeBindError(
            f"refusing to listen on {host!r} without an API token: anyone who can reach it "
            "could read every conversation. Set api.token (SESSIONGATE_API__TOKEN) or listen "
            "on 127.0.0.1.",
            host=host,
        )
    length = len(token.get_secret_value())
    if length < MIN_TOKEN_CHARS:
        # The length is said, never the token.
        raise UnsafeBindError(
            f"refusing to listen on {host!r} with an api.token of {length} characters: "
            f"beyond loopback a short token can be guessed; use at least {MIN_TOKEN_CHARS} "
            "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(24))').",
            host=host,
        )
