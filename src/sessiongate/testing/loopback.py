"""The in-memory platform for tests, where the test kit's users look for it; it lives at
`sessiongate.adapters.loopback`, which keeps working."""

from __future__ import annotations

from sessiongate.adapters.loopback import LoopbackAdapter, SentMessage

__all__ = ["LoopbackAdapter", "SentMessage"]
