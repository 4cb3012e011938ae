"""Opening the backend a store is configured for; the one place that names them both.

`store.url` chooses: `sqlite:///path` (or nothing: `state.db` in the sessions folder) is the
embedded default. Drivers are imported here, lazily, so a store that never opens PostgreSQL
never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from sessiongate.core.config import GatewayConfig
    from sessiongate.store.protocol import Backend

__all__ = ["open_backend", "open_memory_backend"]


def open_backend(config: GatewayConfig, default_path: Path) -> Backend:
    """The durable backend of a store whose embedded database would be `default_path`."""
    from sessiongate.store.sqlite.database import Database

    return Database(default_path, synchronous=config.synchronous)


def open_memory_backend() -> Backend:
    """A backend that lives only in this process's memory (incognito lanes)."""
    from sessiongate.store.sqlite.database import Database

    return Database(None)
