"""The storage seam: what `SessionStore` and `LaneStore` ask of a database, and nothing more.

A `Backend` owns the connections and hands out transactions; inside one, a `Tx` offers every
statement the store runs, as a method that takes and returns plain values (`records.py`).
`sqlite/` and `postgres/` implement it and are the only places with SQL or a driver, so the
lifecycle rules above this line are written once and checked against both by one test suite
(`tests/store/`).

`Tx` is composed of one protocol per table family, each in a module of this package, and
every method's docstring is its contract: what it does, what it returns, and when it fails.
A backend may differ only in how, never in what. The families, and where each backend
implements them:

    family          protocol/        sqlite/                      postgres/
    RoutesTx        routes.py        routes.py                    routes.py
    KeysTx          routes.py        routes.py                    routes.py
    SessionsTx      sessions.py      sessions.py                  sessions.py
    EntriesTx       entries.py       entries.py                   entries.py
    SearchTx        search.py        search.py                    search.py
    InboxTx         inbox.py         inbox.py                     inbox.py
    JournalTx       journal.py       journal.py                   journal.py
    PlatformStateTx platform.py      platform_state.py            platform_state.py
    ErasureTx       erasure.py       erasure.py                   erasure.py
    JobsTx          jobs.py          jobs.py                      jobs.py
    ApprovalTx      approvals.py     approvals.py                 approvals.py
    DeliveryTx      deliveries.py    deliveries.py                deliveries.py
    OutboxTx        deliveries.py    outbox.py                    outbox.py
    HookReceiptTx   hook_receipts.py hook_receipts.py             hook_receipts.py
    TakeoverTx      takeover.py      takeover.py                  takeover.py
    RoundTripsTx    round_trips.py   tx.py (trivially)            the families' modules
    LeaseTx         leases.py        (none)                       leases.py

`RoundTripsTx` is the optional part: hints for a backend whose statements are round trips,
which any other backend answers trivially.
"""

from __future__ import annotations

from sessiongate.store.protocol.approvals import ApprovalTx
from sessiongate.store.protocol.backend import Backend, EphemeralBackend, LaneBackend
from sessiongate.store.protocol.deliveries import DeliveryTx, OutboxTx
from sessiongate.store.protocol.entries import EntriesTx
from sessiongate.store.protocol.erasure import ErasureTx
from sessiongate.store.protocol.hook_receipts import HookReceiptTx
from sessiongate.store.protocol.inbox import InboxTx
from sessiongate.store.protocol.jobs import JobsTx
from sessiongate.store.protocol.journal import JournalTx
from sessiongate.store.protocol.leases import LeaseBackend, LeaseTx
from sessiongate.store.protocol.platform import PlatformStateTx
from sessiongate.store.protocol.round_trips import RoundTripsTx
from sessiongate.store.protocol.routes import KeysTx, RoutesTx
from sessiongate.store.protocol.search import SearchTx
from sessiongate.store.protocol.sessions import SessionsTx
from sessiongate.store.protocol.takeover import TakeoverTx
from sessiongate.store.protocol.tx import Tx

__all__ = [
    "ApprovalTx",
    "Backend",
    "DeliveryTx",
    "EntriesTx",
    "EphemeralBackend",
    "ErasureTx",
    "HookReceiptTx",
    "InboxTx",
    "JobsTx",
    "JournalTx",
    "KeysTx",
    "LaneBackend",
    "LeaseBackend",
    "LeaseTx",
    "OutboxTx",
    "PlatformStateTx",
    "RoundTripsTx",
    "RoutesTx",
    "SearchTx",
    "SessionsTx",
    "TakeoverTx",
    "Tx",
]
