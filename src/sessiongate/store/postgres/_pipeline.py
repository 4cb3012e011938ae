"""The writer's transactions in psycopg's pipeline mode: fewer round trips, the same results.

Outside pipeline mode every statement is a round trip: send, wait, read. Inside it, a
statement is queued in the client's buffer (`PipelineCursor`), and the client sends and waits
only when it reads a result (`fetchone`, `rowcount`), collecting the answers of everything
queued before it in the same wait. So `BEGIN`, `SAVEPOINT`, `RELEASE` and writes whose
result nobody reads ride along with the next statement that is read, and `COMMIT` with the
final sync.

What must not change is where an error appears. A queued write's error arrives with the next
wait, possibly in a later statement; the nested store calls catch some errors (an entry the
transcript refuses), so an error must be raised inside the savepoint that caused it. `settle()`
therefore syncs before a savepoint is released whenever a statement of it is still unanswered
(one round trip, only then), and every rollback first drains the pipeline. The exception are
writes sent on `Wire.sure`: ones whose every input was checked, on a row this transaction holds
locked, so only the connection itself can fail them (and that ends the transaction anyway).

`PipelineCursor.rowcount` waits for its statement's answer, so code that checks how many rows
an UPDATE touched reads the same number in and out of pipeline mode.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any, Self

import psycopg

if TYPE_CHECKING:
    from collections.abc import Generator

__all__ = ["PipelineCursor", "Wire"]

log = logging.getLogger(__name__)


class PipelineCursor(psycopg.Cursor[Any]):
    """A cursor whose `rowcount` is its statement's even before the pipeline was read, and
    whose statements in pipeline mode wait in the client's buffer until one is read.

    psycopg sends each statement of a pipeline as it is queued, with two `poll`s and a
    `send` of its own, and the server wakes for each. Here a statement only goes into
    libpq's output buffer, and the next read (`fetchone`, `rowcount`) or sync sends them all
    in one write: the same statements in the same order, so the same answers.
    """

    def execute(
        self,
        query: Any,
        params: Any = None,
        *,
        prepare: bool | None = None,
        binary: bool | None = None,
    ) -> Self:
        pipeline = self._conn._pipeline
        if pipeline is None:
            return super().execute(query, params, prepare=prepare, binary=binary)
        with self._conn.lock:
            self._conn.wait(self._queue_gen(pipeline, query, params, prepare, binary))
        return self

    def _queue_gen(
        self,
        pipeline: psycopg.Pipeline,
        query: Any,
        params: Any,
        prepare: bool | None,
        binary: bool | None,
    ) -> Generator[Any, Any, None]:
        """psycopg's `_execute_gen` in pipeline mode, with the queued commands (the
        statement, and any `Close` of a statement psycopg evicts) written to libpq's buffer
        instead of sent one by one: the read or sync after them sends them, and psycopg's
        own queue is left empty, as its reads expect."""
        yield from self._start_query(query)
        pgq = self._convert_query(query, params)
        yield from self._maybe_prepare_gen(pgq, prepare=prepare, binary=binary)
        self._last_query = query
        yield from self._conn._prepared.maintain_gen(self._conn)
        commands = pipeline.command_queue
        while commands:
            commands.popleft()()

    @property
    def rowcount(self) -> int:
        if self._conn._pipeline is not None and self.pgresult is None:
            self._fetch_pipeline()
        return self._rowcount


class Wire:
    """The writer connection's transaction control in pipeline mode (the caller holds the
    database's lock)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self._control = conn.cursor()
        # For writes the store's input cannot make fail (`PostgresTx._send_sure`): like the
        # control statements, they need no sync before a savepoint is released.
        self.sure = conn.cursor()
        # Cursors of the open transaction whose answers are read after the commit (`later`).
        self._later: list[psycopg.Cursor[Any]] = []
        self._pipeline: contextlib.ExitStack | None = None

    def begin(self) -> None:
        stack = contextlib.ExitStack()
        stack.enter_context(self.conn.pipeline())
        self._pipeline = stack
        self.control("BEGIN")

    def later(self) -> psycopg.Cursor[Any]:
        """A cursor for a statement read after the commit, or read by the store only when it
        needs it (a route fetched ahead): like the sure writes, nothing syncs for it before a
        savepoint is released."""
        cursor = self.conn.cursor()
        self._later.append(cursor)
        return cursor

    def control(self, sql: str) -> None:
        """`BEGIN`, `SAVEPOINT`, `RELEASE`, `COMMIT`: queued, answered with the next wait."""
        self._control.execute(sql)

    def settle(self) -> None:
        """Wait for every statement still unanswered, unless only control statements are (a
        savepoint's writes must fail inside it)."""
        pipeline = self.conn._pipeline
        if pipeline is None:
            return
        quiet = (self._control, self.sure, *self._later)
        if any(item is not None and item[0] not in quiet for item in pipeline.result_queue):
            pipeline.sync()

    def commit(self) -> None:
        self.control("COMMIT")
        stack, self._pipeline = self._pipeline, None
        self._later = []
        if stack is not None:
            stack.close()  # the sync: raises the error of any statement still unanswered

    def undo_savepoint(self, name: str) -> None:
        """Roll back to `name` and release it, after draining what an error left behind."""
        self._drain()
        _forget_prepared(self.conn)
        self.control(f"ROLLBACK TO SAVEPOINT {name}")
        self.control(f"RELEASE SAVEPOINT {name}")
        pipeline = self.conn._pipeline
        if pipeline is not None:
            pipeline.sync()

    def rollback(self) -> None:
        """Leave pipeline mode and roll back; a connection already gone has rolled back."""
        stack, self._pipeline = self._pipeline, None
        self._later = []
        try:
            if stack is not None:
                stack.close()
        except psycopg.Error:
            log.debug("pipeline ended with an error before the rollback", exc_info=True)
        _forget_prepared(self.conn)
        try:
            self.conn.execute("ROLLBACK")
        except psycopg.Error:
            log.debug("rollback failed", exc_info=True)

    def _drain(self) -> None:
        pipeline = self.conn._pipeline
        if pipeline is None:
            return
        try:
            pipeline.sync()
        except psycopg.Error:
            # Already raised (or about to be) as the reason for this rollback.
            log.debug("pipeline drained with an error", exc_info=True)


def _forget_prepared(conn: psycopg.Connection[Any]) -> None:
    """Forget the connection's prepared statements (the server's go with the next statement,
    as `DEALLOCATE ALL`) after a pipeline ended in an error.

    psycopg records a statement as prepared when it sends its `Parse`, but an error earlier
    in the same pipeline makes the server skip that `Parse`, and nothing tells psycopg: each
    later use of the statement failed with "prepared statement does not exist", on that
    connection for good. Statements are prepared again after the usual number of runs.
    """
    conn._prepared.clear()
