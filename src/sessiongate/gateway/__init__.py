"""The gateway runtime: lanes, the durable inbound queue, the turn journal, recovery, commands.

Layers inside: `events` (MessageEvent) and `receipts` (Receipt) are the data at the edge;
`routing` picks a message's session (rollovers, archived sessions); `lanes` keeps one turn per
session key; `turns` runs a claimed turn; `compaction` summarises a session on its lane;
`commands` holds the slash commands and their busy table; `recovery` the restart rules;
`runner` ties them together.
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
