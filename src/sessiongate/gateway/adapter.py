"""The `PlatformAdapter` protocol: how the runner talks to a messaging platform."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sessiongate.core.platform import Platform
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.runner import GatewayRunner

__all__ = ["PlatformAdapter"]


@runtime_checkable
class PlatformAdapter(Protocol):
    """One platform connection.

    Inbound: the adapter builds a `MessageEvent` per platform message and awaits
    `runner.handle_message(event)`. Outbound: the runner calls `send` for every reply, error
    notice and command answer on the adapter's platform. A reply may be sent again after a crash
    between sending and journalling it (at-least-once); `turn_id` lets a platform drop the
    repeat.
    """

    platform: Platform
    # True when hashing this platform's ids in the model prompt is safe (spec §9): plugin
    # platforms that need raw ids (mentions) set False.
    pii_safe: bool

    async def start(self, runner: GatewayRunner) -> None:
        """Connect and begin handing inbound messages to `runner`; return once connected."""
        ...

    async def stop(self) -> None:
        """Disconnect; idempotent."""
        ...

    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> None:
        """Deliver `text` to the chat (and thread) of `source`; raise if it could not be sent."""
        ...

    def chat_id_key(self, chat_id: str) -> str:
        """The form of a chat id used in session keys (e.g. case-folded where the platform
        treats ids case-insensitively); identity for most platforms."""
        ...
