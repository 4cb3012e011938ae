"""The platform adapters `sessiongate run` starts: one per enabled `platforms.<name>` section
that has an adapter, each imported only when enabled (its SDK is an optional extra).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from sessiongate.errors import SessiongateError

if TYPE_CHECKING:
    from sessiongate.core.config import GatewayConfig
    from sessiongate.gateway.adapter import PlatformAdapter

__all__ = ["ADAPTER_EXTRAS", "MissingExtraError", "build_adapters"]

# platform -> (the module its SDK provides, the extra that installs it)
ADAPTER_EXTRAS: dict[str, tuple[str, str]] = {
    "telegram": ("telegram", "telegram"),
    "slack": ("slack_sdk", "slack"),
    "discord": ("discord", "discord"),
    "matrix": ("mautrix", "matrix"),
    "whatsapp": ("pywa_async", "whatsapp"),
    # No SDK: httpx (a core dependency) against a signal-cli daemon.
    "signal": ("httpx", "signal"),
}


class MissingExtraError(SessiongateError):
    code = "missing_extra"


def build_adapters(config: GatewayConfig) -> list[PlatformAdapter]:
    """The adapters of every enabled platform that has one; `MissingExtraError` (one line
    naming the extra) when a platform's SDK is not installed."""
    adapters: list[PlatformAdapter] = []
    for name, section in sorted(config.platforms.items()):
        if not section.enabled or name not in ADAPTER_EXTRAS:
            continue
        module, extra = ADAPTER_EXTRAS[name]
        try:
            importlib.import_module(module)
        except ImportError:
            raise MissingExtraError(
                f"platforms.{name} is enabled but its SDK is not installed: "
                f"pip install 'sessiongate[{extra}]'",
                platform=name,
            ) from None
        if name == "telegram":
            from sessiongate.adapters.telegram import TelegramAdapter
            from sessiongate.core.config import TelegramConfig

            assert isinstance(section, TelegramConfig)
            adapters.append(TelegramAdapter(section))
        elif name == "slack":
            from sessiongate.adapters.slack import SlackAdapter
            from sessiongate.core.config import SlackConfig

            assert isinstance(section, SlackConfig)
            adapters.append(SlackAdapter(section))
        elif name == "discord":
            from sessiongate.adapters.discord import DiscordAdapter
            from sessiongate.core.config import DiscordConfig

            assert isinstance(section, DiscordConfig)
            adapters.append(DiscordAdapter(section))
        elif name == "matrix":
            from sessiongate.adapters.matrix import MatrixAdapter
            from sessiongate.core.config import MatrixConfig

            assert isinstance(section, MatrixConfig)
            adapters.append(MatrixAdapter(section))
        elif name == "whatsapp":
            from sessiongate.adapters.whatsapp import WhatsAppAdapter
            from sessiongate.core.config import WhatsAppConfig

            assert isinstance(section, WhatsAppConfig)
            adapters.append(WhatsAppAdapter(section))
        elif name == "signal":
            from sessiongate.adapters.signal import SignalAdapter
            from sessiongate.core.config import SignalConfig

            assert isinstance(section, SignalConfig)
            adapters.append(SignalAdapter(section))
    return adapters
