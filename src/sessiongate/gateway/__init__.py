"""The gateway runtime: lanes, the durable inbound queue, the turn journal, recovery, commands.

Layers inside: `messages` (MessageEvent, Receipt, the `Inbox` adapters see) is the data at the
edge; `intake` takes a message to its lane (routing with `routing`, commands with `commands`);
`lanes` keeps one worker per session key and `worker` runs it (`turns` runs a claimed turn,
`compaction` summarises a session as a lane job); `operations` holds what an operator does to
a session (reset, compact, fork, switch); `recovery` the restart rules; `lane_leases` whose
lanes are whose (`SoloOwnership`, or `LeasedOwnership` on a shared database); `runner`
composes them, starts and stops them.
"""

from sessiongate.gateway.messages import MessageEvent, MessageType, Receipt, ReceiptStatus
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
