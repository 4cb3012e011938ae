"""`Tx`: the statements of one transaction, composed of the table families.

Each family is a protocol of its own module in this package; a backend implements them all
(each in a module of its own, named as the family's: `sqlite/<family>.py`,
`postgres/<family>.py`, mixed into its `SqliteTx` or `PostgresTx`). A new table's methods go
in a new family: a protocol here, added to `Tx`'s bases, and a mixin on each side.
"""

from __future__ import annotations

from typing import Protocol

from sessiongate.store.protocol.approvals import ApprovalTx
from sessiongate.store.protocol.deliveries import DeliveryTx, OutboxTx
from sessiongate.store.protocol.entries import EntriesTx
from sessiongate.store.protocol.erasure import ErasureTx
from sessiongate.store.protocol.hook_receipts import HookReceiptTx
from sessiongate.store.protocol.inbox import InboxTx
from sessiongate.store.protocol.jobs import JobsTx
from sessiongate.store.protocol.journal import JournalTx
from sessiongate.store.protocol.platform import PlatformStateTx
from sessiongate.store.protocol.round_trips import RoundTripsTx
from sessiongate.store.protocol.routes import KeysTx, RoutesTx
from sessiongate.store.protocol.search import SearchTx
from sessiongate.store.protocol.sessions import SessionsTx
from sessiongate.store.protocol.takeover import TakeoverTx

__all__ = ["Tx"]


class Tx(
    RoutesTx,
    KeysTx,
    SessionsTx,
    EntriesTx,
    SearchTx,
    InboxTx,
    JournalTx,
    PlatformStateTx,
    ErasureTx,
    JobsTx,
    ApprovalTx,
    DeliveryTx,
    OutboxTx,
    HookReceiptTx,
    TakeoverTx,
    RoundTripsTx,
    Protocol,
):
    """The statements of one transaction (or one consistent read). Every method runs in it
    and takes and returns plain values (`records.py`); a driver's error never leaves it
    (`Backend` names what arrives instead)."""

    def note(self, change: object) -> None:
        """Record what this transaction changed; the backend tells its `on_commit` once the
        outermost transaction commits, and a rolled-back savepoint takes its notes back.
        Only inside `transaction()`: a read has nothing to tell. A function is called after
        the commit, and what it returns is told (`changes.told`)."""
        ...
