"""What `sessiongate try <platform>` needs of a platform: a `TryTarget` per adapter package.

A target starts the platform's loopback API stub in the running event loop and yields a
`TrySession`: the `platforms.<name>` section that points the real adapter (and its real SDK)
at the stub, a way for a simulated user to write in a direct chat, and the bot's messages in
that chat as the stub recorded them (edits applied). Nothing here needs a token or a network.

A platform plugs in by shipping `testing/trials/<name>.py` with a module-level
`TARGET = TryTarget(...)`: `try_platforms()` finds it by its file (so listing the platforms
imports no SDK), `load_try_target(name)` imports it (a missing SDK extra is a
`MissingExtraError` naming the extra).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol

from sessiongate.adapters.registry import ADAPTER_EXTRAS, MissingExtraError
from sessiongate.errors import SessiongateError

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

__all__ = [
    "TrySession",
    "TryTarget",
    "UnknownTryPlatformError",
    "load_try_target",
    "try_platforms",
]


class TrySession(Protocol):
    """A running stub with one simulated user in a direct chat with the bot."""

    @property
    def url(self) -> str:
        """The stub's base URL on loopback."""
        ...

    @property
    def platform_config(self) -> dict[str, Any]:
        """The `platforms.<name>` section (credentials the stub accepts, its URL)."""
        ...

    @property
    def user_name(self) -> str:
        """The simulated user's name, as the platform shows it."""
        ...

    async def wait_ready(self) -> None:
        """Until the adapter's connection can carry the user's messages (the gateway has
        started; a platform that pushes events waits for the bot's session here)."""
        ...

    def send(self, text: str) -> None:
        """The simulated user writes `text` to the bot in their direct chat."""
        ...

    def bot_messages(self) -> list[str]:
        """Every message the bot posted in that chat so far, oldest first, edits applied."""
        ...

    # Optional, for a platform that posts its events to the gateway (webhooks): the session
    # may have `attach(adapters)`, called with the gateway's adapters before it starts, to
    # hand the simulated user's events to its adapter.


@dataclass(frozen=True, slots=True)
class TryTarget:
    """One platform `sessiongate try` can run against its local stub."""

    platform: str  # the platforms.<name> key
    title: str  # as people write it: "Telegram"
    stub: str  # what stands in for the platform: "a Telegram Bot API stub"
    sdk: str  # the SDK the adapter drives, unchanged: "python-telegram-bot"
    # Starts the stub in the running event loop; stops it on exit.
    open: Callable[[], AbstractAsyncContextManager[TrySession]]


class UnknownTryPlatformError(SessiongateError):
    code = "unknown_platform"


def try_platforms() -> list[str]:
    """The platforms with a module in `testing/trials/`, sorted (no SDK is imported)."""
    root = resources.files("sessiongate.testing.trials")
    return sorted(
        entry.name.removesuffix(".py")
        for entry in root.iterdir()
        if entry.is_file() and entry.name.endswith(".py") and not entry.name.startswith("_")
    )


def load_try_target(platform: str) -> TryTarget:
    """The `TARGET` of `testing/trials/<platform>.py`; `UnknownTryPlatformError` listing the
    platforms there are, `MissingExtraError` when the platform's SDK is not installed."""
    known = try_platforms()
    if platform not in known:
        raise UnknownTryPlatformError(
            f"no platform {platform!r} to try; choose one of: {', '.join(known)}",
            platform=platform,
        )
    sdk_module, extra = ADAPTER_EXTRAS.get(platform, (platform, platform))
    try:
        importlib.import_module(sdk_module)
        module = importlib.import_module(f"sessiongate.testing.trials.{platform}")
    except ImportError:
        raise MissingExtraError(
            f"trying {platform} needs its SDK: pip install 'sessiongate[{extra}]'",
            platform=platform,
        ) from None
    target = module.TARGET
    assert isinstance(target, TryTarget)
    return target
