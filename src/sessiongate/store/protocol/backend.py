"""`Backend`: one database, its connections, transactions and lifetime; `EphemeralBackend`:
one held only in memory; `LaneBackend`: what both offer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Callable, Iterable, Sequence

    from sessiongate.store.copy import TableSpec
    from sessiongate.store.protocol.tx import Tx

__all__ = ["Backend", "EphemeralBackend", "LaneBackend"]


class LaneBackend(Protocol):
    """What a lane's rows ask of a database: transactions, reads and a lifetime. The durable
    `Backend` and the memory-only `EphemeralBackend` both offer it (`store/placement.py`
    chooses between them)."""

    def transaction(self, *, savepoints: bool = True) -> contextlib.AbstractContextManager[Tx]:
        """With `savepoints=False` nested calls make none (except `savepoint()`), and one
        that fails having written dooms the transaction (its commit refuses): for groups
        whose callers never go on after a failed call inside them."""
        ...

    def savepoint(self) -> contextlib.AbstractContextManager[Tx]:
        """`transaction()`, rolled back alone when nested, also in a transaction whose nested
        calls make no savepoints: for a call whose caller handles its failure and goes on."""
        ...

    def read(self) -> contextlib.AbstractContextManager[Tx]:
        """A consistent read outside any write (on the writer's connection where the backend
        has one connection); what it writes is not promised to commit."""
        ...

    def snapshot(self) -> contextlib.AbstractContextManager[Tx]:
        """A read on a connection of its own where the backend can (a long read, such as a
        big model context, then does not hold the writer back)."""
        ...

    def holds(self, tx: Tx) -> bool:
        """Whether `tx` is a transaction of this backend."""
        ...

    def close(self) -> None:
        """Close every connection; later calls do nothing."""
        ...

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        ...


class EphemeralBackend(LaneBackend, Protocol):
    """A database held only in this process's memory: incognito lanes, gone after a restart.

    It offers what a lane's rows need and nothing a durable path does (no commit hooks for
    the change feed or the webhook outbox, no route stream for the `sessions.json` mirror, no
    copying, scrubbing or sizing), so the mirror, archive, delivery and outbox paths, which
    take a `Backend`, cannot be given one.
    """


class Backend(LaneBackend, Protocol):
    """One database: its connections, transactions and lifetime.

    `transaction()` commits whole or rolls back and re-raises; a nested call is a savepoint.
    The driver's errors never leave the backend: they arrive as `StoreUnavailableError`,
    `StoreCorruptError`, `ConflictError` or `InvalidEntryError`.
    """

    # Where it lives, for messages and `sessiongate db status` (never holds a password).
    url: str
    # Whether several instances can share it (and so `Ownership` applies): PostgreSQL.
    shared: bool
    # Whether a call waits on the network (PostgreSQL): the gateway makes its calls off the
    # event loop (`gateway/store_calls.py`).
    remote: bool
    # Told the notes of each committed transaction (`Tx.note`), after the commit and outside
    # the backend's lock; None tells no one.
    on_commit: Callable[[list[object]], None] | None
    # Called inside the transaction, with its notes, just before a commit that noted changes:
    # what it writes commits with them (or nothing does). Any `Tx`-typed callable fits.
    before_commit: Any

    def stream_routes(self, consume: Callable[[Iterable[tuple[str, str]]], None]) -> None:
        """Feed (session_key, entry JSON) pairs to `consume` from one consistent read, without
        holding them all in memory (the `sessions.json` mirror)."""
        ...

    def count_rows(self, table: TableSpec) -> int:
        """How many rows the table holds (`db copy`)."""
        ...

    def read_rows(
        self, table: TableSpec, after: Sequence[Any] | None, limit: int
    ) -> list[tuple[Any, ...]]:
        """A table's rows in key order after `after`, in seam values (`db copy`)."""
        ...

    def scrub(self) -> None:
        """After an erasure committed: leave none of the deleted or overwritten text in the
        files (SQLite: VACUUM, then a TRUNCATE checkpoint of the log). Outside a
        transaction; may take long on a big database."""
        ...

    def give_back_space(self) -> None:
        """After deletions committed: return free pages to the file system where the
        backend can (SQLite's incremental vacuum); outside a transaction."""
        ...

    def disk_bytes(self) -> int:
        """What the database occupies (file and log, or the tables' total relation size)."""
        ...
