"""Signal through a signal-cli daemon in HTTP mode (`pip install 'sessiongate[signal]'`).

`payloads.py` maps signal-cli receive events to the kit's events (pure), `styles.py` turns
Markdown into Signal's text styles, `client.py` speaks JSON-RPC and reads the SSE stream over
httpx, `adapter.py` joins them on the kit; the test kit's `sessiongate.testing.stubs.signal`
is a loopback daemon for tests (docs/ADAPTERS.md).
"""

from __future__ import annotations

from sessiongate.adapters.signal.adapter import SignalAdapter

__all__ = ["SignalAdapter"]
