"""Telegram on python-telegram-bot (`pip install 'sessiongate[telegram]'`).

`payloads.py` maps Bot API updates to the kit's events (pure), `client.py` calls the Bot API
through the SDK, `adapter.py` joins them on the kit (docs/ADAPTERS.md).
"""

from __future__ import annotations

from sessiongate.adapters.telegram.adapter import TelegramAdapter

__all__ = ["TelegramAdapter"]
