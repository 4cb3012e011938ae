"""The `PlatformAdapter` protocol: how the gateway talks to a messaging platform."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sessiongate.core.platform import Platform
    from sessiongate.core.source import SessionSource
    from sessiongate.gateway.messages import Inbox

__all__ = ["PlatformAdapter", "SendRefusedError", "StreamingAdapter"]


class SendRefusedError(Exception):
    """Raised by `send` when trying again cannot help: the platform refused the chat for
    good, or the message may have arrived and must not be posted twice (unconfirmed). Its
    delivery is `dead` at once with this message as the reason; any other exception is a
    failed try that is retried."""


@runtime_checkable
class PlatformAdapter(Protocol):
    """One platform connection.

    Inbound: the adapter builds a `MessageEvent` per platform message and awaits
    `inbox.handle_message(event)` (`messages.Inbox`: all of the gateway an adapter sees).
    Outbound: the gateway calls `send` for every reply, error notice and command answer on the
    adapter's platform. A reply may be sent again after a crash between sending and
    journalling it (at-least-once); `turn_id` lets a platform drop the repeat.
    """

    platform: Platform
    # True when hashing this platform's ids in the model prompt is safe (spec §9): plugin
    # platforms that need raw ids (mentions) set False.
    pii_safe: bool

    async def start(self, inbox: Inbox) -> None:
        """Connect and begin handing inbound messages to `inbox`; return once connected."""
        ...

    async def stop(self) -> None:
        """Disconnect; idempotent."""
        ...

    async def send(self, source: SessionSource, text: str, *, turn_id: int | None) -> str | None:
        """Deliver `text` to the chat (and thread) of `source`; raise if it could not be sent
        (the error's message is kept as the delivery's reason; `SendRefusedError` when a retry
        cannot help). May return the platform's id
        of the message sent, kept on its delivery row; None when the platform gives none."""
        ...

    def chat_id_key(self, chat_id: str) -> str:
        """The form of a chat id used in session keys (e.g. case-folded where the platform
        treats ids case-insensitively); identity for most platforms."""
        ...


@runtime_checkable
class StreamingAdapter(PlatformAdapter, Protocol):
    """An adapter that can show a reply growing in place: start a message, edit it, finish it.

    Optional: the runner streams a reply only to an adapter with all three methods; others get
    the final text through `send`. The runner calls `start_stream` with the first text, then
    `edit_stream` with the whole text so far at most once per `min_edit_interval` seconds (on
    the runner's clock), then `finish_stream` with the final text. If `finish_stream` raises,
    the reply is sent whole with `send` (the reply is never lost to a failed edit).

    When the agent's model call is retried mid-reply, the text shown so far is void: the next
    `edit_stream` carries the new attempt's text, which replaces it (never append it). An
    adapter may also define `restart_stream(source, handle, *, attempt) -> None`, called at
    once when that happens (optional, outside this protocol: a terminal that can only append
    marks the abandoned text with it).
    """

    # The shortest time between two edits of one message, in seconds (a platform's edit rate
    # limit: about 1 s for Telegram, more in busy Slack channels).
    min_edit_interval: float

    async def start_stream(self, source: SessionSource, text: str, *, turn_id: int) -> str:
        """Post the first text of the reply; returns the handle (the platform message id)."""
        ...

    async def edit_stream(self, source: SessionSource, handle: str, text: str) -> None:
        """Replace the message's text with `text` (the reply so far)."""
        ...

    async def finish_stream(
        self, source: SessionSource, handle: str, text: str, *, turn_id: int
    ) -> None:
        """Show the final `text` (it may differ from the last edit; split it if it no longer
        fits one message)."""
        ...
