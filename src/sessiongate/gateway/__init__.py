"""The gateway runtime: lanes, the durable inbound queue, the turn journal, recovery, commands.

Layers inside: `messages` (MessageEvent, Receipt, the `Inbox` adapters see) is the data at the
edge; `intake` takes a message to its lane (routing with `routing`, commands with `commands`);
`lanes` keeps one worker per session key and `worker` runs it (`turns` runs a claimed turn,
`compaction` summarises a session as a lane job); `operations` holds what an operator does to
a session (reset, compact, fork, switch); `recovery` the restart rules; `lane_leases` whose
lanes are whose (`SoloOwnership`, or `LeasedOwnership` on a shared database); `runner`
composes them, starts and stops them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessiongate.gateway.messages import (
        Inbox,
        MessageEvent,
        MessageType,
        Receipt,
        ReceiptStatus,
    )
    from sessiongate.gateway.runner import GatewayRunner, RunnerStatistics

__all__ = [
    "GatewayRunner",
    "Inbox",
    "MessageEvent",
    "MessageType",
    "Receipt",
    "ReceiptStatus",
    "RunnerStatistics",
]

# Each name's module, imported on first use: importing one submodule (`gateway.prompts`, say)
# does not load the runner and everything it composes.
_LAZY = {
    "GatewayRunner": "sessiongate.gateway.runner",
    "Inbox": "sessiongate.gateway.messages",
    "MessageEvent": "sessiongate.gateway.messages",
    "MessageType": "sessiongate.gateway.messages",
    "Receipt": "sessiongate.gateway.messages",
    "ReceiptStatus": "sessiongate.gateway.messages",
    "RunnerStatistics": "sessiongate.gateway.runner",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
