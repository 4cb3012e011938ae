"""The `PlatformAdapter` protocol, defined by the gateway that drives adapters.

Adapters sit below the gateway in the layering (they import it, never the reverse), so the
seam lives in `sessiongate.gateway.adapter`; it is re-exported here for adapter authors.
"""

from __future__ import annotations

from sessiongate.gateway.adapter import PlatformAdapter

__all__ = ["PlatformAdapter"]
