"""The optional part of `Tx`: hints and deferred answers for a backend whose every
statement is a network round trip (PostgreSQL through its pipeline).

A backend without round trips implements each trivially, and that is always correct:
`sends_ahead` is False, `append_entries_ahead` returns None, the `prefetch_*` and
`expect_route` hints do nothing, and each `*_later` answers at once and returns a function
that tells that answer (SQLite: `sqlite/tx.py`). PostgreSQL: `postgres/routes.py`
(`prefetch_route`, `expect_route`), `postgres/entries.py`, `postgres/inbox.py` and
`postgres/journal.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from sessiongate.core.entry import SessionEntry
    from sessiongate.store.records import EntryRecord, SessionRow

__all__ = ["RoundTripsTx"]


class RoundTripsTx(Protocol):
    """Hints that save round trips; none changes what a transaction does or commits."""

    def prefetch_route(self, session_key: str) -> None:
        """A hint that the transaction will read this route: a backend whose every read is a
        round trip sends it now, to be answered with the next statement that is read."""
        ...

    def prefetch_lane_creation(
        self,
        session_key: str,
        make_id: Callable[[], str],
        *,
        started_at: int,
        header: Callable[[str], dict[str, Any]],
    ) -> None:
        """A hint that the transaction reads this route next, and, if there is none, creates
        the lane's first session (`create_fresh_session_row` with these arguments and no
        parent): a backend whose every statement is a round trip sends the route's read and
        that insert now, the insert made only where the route is missing, so both are
        answered together."""
        ...

    def expect_route(self, entry: SessionEntry) -> None:
        """A hint that the route is `entry`, as the caller last saw it written: a backend whose
        every read is a round trip answers the transaction's reads of it with `entry`, and
        checks it at the server instead, with the write or before the commit. If the route is
        no longer `entry`, the commit raises `RouteChangedError` and nothing of the
        transaction is committed; the caller then runs it again without the hint."""
        ...

    def sends_ahead(self) -> bool:
        """Whether a write sent ahead (`append_entries_ahead`) saves a round trip here: in a
        transaction on a backend whose statements are round trips."""
        ...

    def sends_with_commit(self) -> bool:
        """`sends_ahead`, in the outermost transaction: a write sent ahead now goes with the
        commit, and its answer can be read after it."""
        ...

    def append_entries_ahead(
        self, session_id: str, records: Sequence[EntryRecord]
    ) -> Callable[[], tuple[SessionRow, list[int | None]] | None] | None:
        """`append_entries`, sent without waiting for its answer (where `sends_ahead`): the
        returned function tells the result once the transaction committed (and waits for it
        before). None, with nothing sent, when the statement could fail on a record's text
        (its error would come with a later statement, where nothing can catch it alone): the
        caller appends them the usual way."""
        ...

    def prefetch_context(
        self, session_id: str, max_depth: int | None, after: tuple[int, int] | None
    ) -> None:
        """A hint: `session_context_events` of the session (`session_context_tail` from
        `after`, an entry id and its depth, when given) is read right after this transaction
        commits. A backend whose reads are round trips sends it now, answered with the
        commit; the next transaction on the connection drops it unread."""
        ...

    def pending_later(self, session_key: str) -> Callable[[], bool]:
        """`has_pending` of the lane as the transaction ends, told by the returned function
        once it committed (on a backend whose reads are round trips, it comes with the
        commit's answer)."""
        ...

    def count_pending_later(self, session_key: str) -> Callable[[], int]:
        """`count_pending` here, told by the returned function once the transaction committed
        (on a backend whose reads are round trips, it comes with the commit's answer)."""
        ...

    def turn_id_taken(self, turn_id: int) -> Callable[[], bool]:
        """Whether the journal holds a turn `turn_id`, told by the returned function once the
        transaction committed (on a backend whose reads are round trips, it comes with the
        commit's answer)."""
        ...

    def reset_restart_count_later(self, session_key: str) -> Callable[[], bool]:
        """`reset_restart_count`, whose answer (whether there was one) may be known only
        after the commit: call the result then."""
        ...
