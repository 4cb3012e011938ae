"""Matrix on mautrix (`pip install 'sessiongate[matrix]'`).

`payloads.py` maps `/sync` events to the kit's events (pure), `client.py` calls the
client-server API through the SDK, `adapter.py` joins them on the kit; the test kit's
`sessiongate.testing.stubs.matrix` is a small homeserver for offline use (docs/ADAPTERS.md).
"""

from __future__ import annotations

from sessiongate.adapters.matrix.adapter import MatrixAdapter

__all__ = ["MatrixAdapter"]
