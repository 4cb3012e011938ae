"""Discord on discord.py (`pip install 'sessiongate[discord]'`): REST plus the gateway socket.

`payloads.py` maps gateway dispatches to the kit's events (pure), `client.py` drives REST and
the gateway through the SDK, `adapter.py` joins them on the kit (docs/ADAPTERS.md).
"""

from __future__ import annotations

from sessiongate.adapters.discord.adapter import DiscordAdapter

__all__ = ["DiscordAdapter"]
