"""The PostgreSQL backend's connections, transactions and migrations.

The store's transactions run on a small pool of writer connections (`_Writer`), one bound to
a thread for the length of its outermost transaction or read: the store's methods nest
(`LaneStore.atomic()` wraps `SessionStore` calls as savepoints), and a nested call finds its
thread's writer. Calls on different threads take different writers, so the gateway's lanes,
whose store calls run on its store threads (`gateway/store_calls.py`), overlap their round
trips; one thread's calls are ordered as it makes them. Long reads (`snapshot()`) take a
connection of their own from a small pool, so a 10,000-entry model context never holds a
writer. Migrations run at open in one transaction under an advisory lock on the schema, so
several instances starting at once apply each migration exactly once.

Over the ~400-line budget: the writers' lifecycle (pipeline, savepoints, reconnects), the
pooled readers, copies and migrations share the connections, and their order of steps is the
contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg_pool import ConnectionPool

from sessiongate.errors import (
    SessiongateError,
    StaleWriteError,
    StoreCorruptError,
    StoreUnavailableError,
)
from sessiongate.store.changes import told
from sessiongate.store.postgres import copy
from sessiongate.store.postgres._errors import store_error, translate_errors
from sessiongate.store.postgres._link import with_link_checks
from sessiongate.store.postgres._pipeline import PipelineCursor, Wire
from sessiongate.store.postgres._schema import MIGRATIONS
from sessiongate.store.postgres.tx import PostgresTx

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from sessiongate.store.copy import TableSpec

__all__ = [
    "PostgresDatabase",
    "describe",
    "migration_status",
    "redact_url",
    "redacted_error",
    "upgrade",
]

log = logging.getLogger(__name__)

# Savepoints that succeeded are released only when more than this many are kept together.
KEPT_SAVEPOINTS = 8

# Connections for `snapshot()` reads beside the writers': a few model-context reads at once.
READER_POOL_SIZE = 4

# Writer connections at most: lanes whose store calls run at once overlap on this many.
WRITERS = 8

# One lock per schema: instances on one schema serialise their migrations, tests on their own
# schemas do not wait for each other.
_MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(hashtext('sessiongate:' || current_schema()))"
_VERSIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)"
)


# How long the writer waits for a row lock before the call fails (`StoreUnavailableError`, a
# 503 the client retries) when the URL sets no `lock_timeout` of its own. A peer cut off from
# the server mid-transaction (or paused) holds its locks until it is declared dead; waiting on
# one without a bound froze this instance's one writer, and with it its heartbeat and the very
# reaper that would end the peer's session. Set after the migrations, whose advisory lock may
# rightly be waited for longer.
WRITER_LOCK_TIMEOUT = "2s"

# psycopg's own default: a statement run this often on a connection becomes a prepared one.
PREPARE_THRESHOLD = 5


def _connect(
    url: str, prepare_threshold: int | None = PREPARE_THRESHOLD
) -> psycopg.Connection[Any]:
    try:
        # Autocommit: transactions are explicit (`BEGIN` … `COMMIT`), as on SQLite, so a
        # read never leaves a transaction open between calls (it would hold back vacuum).
        conn = psycopg.connect(
            with_link_checks(url),
            autocommit=True,
            connect_timeout=10,
            cursor_factory=PipelineCursor,
        )
    except psycopg.Error as exc:
        raise StoreUnavailableError(
            f"cannot connect to {redact_url(url)}: {redacted_error(exc, url)}"
        ) from exc
    conn.prepare_threshold = prepare_threshold
    return conn


# `user:password@` at the start of a URL's authority, for a URL too malformed to split.
_USERINFO_PASSWORD = re.compile(r"^([^:/?#]*://[^:/?#@]*:)[^/?#]*@")


def redact_url(url: str) -> str:
    """The URL without its password, for messages and logs; it never raises, since the URL
    it is asked for is often the one that could not be used (an unclosed `[` of an IPv6
    host)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return _USERINFO_PASSWORD.sub(r"\1***@", url)
    if password is None:
        return url
    netloc = parts.netloc.replace(f":{password}@", ":***@")
    return urlunsplit(parts._replace(netloc=netloc))


def redacted_error(exc: Exception, url: str) -> str:
    """`exc`'s message with `url` in it redacted: libpq quotes a URL it cannot parse whole."""
    return str(exc).strip().replace(url, redact_url(url))


class _Writer:
    """One writer connection and the transaction open on it (`PostgresDatabase`)."""

    __slots__ = ("bare", "conn", "doomed", "kept", "savepoints", "tx", "wire")

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.use(conn)

    def use(self, conn: psycopg.Connection[Any]) -> None:
        """Start afresh on `conn` (a new connection, or one opened again after a drop)."""
        self.conn = conn
        self.wire = Wire(conn)
        self.tx = PostgresTx(conn, self.wire)
        # Nested calls of the open transaction make no savepoints (`transaction`), and one of
        # them failed.
        self.bare = False
        self.doomed = False
        # Savepoints made in the open transaction, and those not released yet, in order:
        # [name, still open] (`_savepoint`).
        self.savepoints = 0
        self.kept: list[list[Any]] = []

    def reset(self) -> None:
        """The transaction ended: nothing of it is left on the writer."""
        self.tx.depth = 0
        self.bare = self.doomed = False
        self.savepoints = 0
        self.kept.clear()
        self.tx.forget_locks()
        self.tx.notes = []


class PostgresDatabase:
    """The store's PostgreSQL database at `url` (`postgresql://…`)."""

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = True,
        prepare_threshold: int | None = PREPARE_THRESHOLD,
        writers: int = WRITERS,
    ) -> None:
        self.url = redact_url(url)
        self._prepare_threshold = prepare_threshold
        self.shared = True
        self.remote = True
        self._dsn = url
        self._closed = False
        self._reconnecting = False
        # Writers open on first need, up to `writers`; a thread takes the last one given back
        # (so calls from one thread at a time keep to one connection and its prepared
        # statements), and waits when all are taken.
        self._max_writers = max(1, writers)
        self._writers: list[_Writer] = []
        self._free: list[_Writer] = []
        self._opening = 0
        self._pool = threading.Condition(threading.Lock())
        self._local = threading.local()
        # Told what each committed transaction `note`d (`store/changes.py`), on the thread
        # that committed it.
        self.on_commit: Callable[[list[object]], None] | None = None
        # As on SQLite: writes that commit with the changes a transaction noted.
        self.before_commit: Callable[[PostgresTx, list[object]], None] | None = None
        # Outermost transactions and reads begun on a thread that runs an event loop: each
        # one made the loop wait for the server (`gateway/store_calls.py` keeps it at zero on
        # a turn's path; tests and the bench read it).
        self.loop_waits = 0
        # Long reads on worker threads; connections open on first use and stay few.
        self._readers: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            with_link_checks(url),
            min_size=0,
            max_size=READER_POOL_SIZE,
            kwargs={
                "autocommit": True,
                "connect_timeout": 10,
                "prepare_threshold": prepare_threshold,
            },
            open=False,
            name="sessiongate-readers",
        )
        conn = _connect(url, prepare_threshold)
        try:
            if migrate:
                upgrade(conn)
            else:
                _check_not_newer(conn)
            _bound_lock_waits(conn)
            self._readers.open(wait=False)
        except BaseException:
            conn.close()
            raise
        first = _Writer(conn)
        self._writers.append(first)
        self._free.append(first)

    @property
    def conn(self) -> psycopg.Connection[Any]:
        """The first writer's connection: the one every call uses while no two threads call
        at once (tests and tools look at it)."""
        return self._writers[0].conn

    @property
    def writers(self) -> int:
        """How many writer connections are open."""
        return len(self._writers)

    def writer_connections(self) -> list[psycopg.Connection[Any]]:
        """The writers' connections as they are now (the bench traces them)."""
        with self._pool:
            return [writer.conn for writer in self._writers]

    @contextlib.contextmanager
    def transaction(self, *, savepoints: bool = True) -> Iterator[PostgresTx]:
        """`BEGIN` … `COMMIT`, or roll back and re-raise; nested calls are savepoints.

        With `savepoints=False` (the fence's transactions, whose callers never go on after a
        failed nested call) nested calls make none, except `savepoint()`: a savepoint is a
        statement of its own, and it was a quarter of a turn's. A nested call that raises
        without one dooms the transaction: should its error be caught and the transaction
        carried on to the commit, the commit refuses (`StoreCorruptError`) and rolls back,
        so what the failed call wrote can never commit.

        The transaction runs in pipeline mode (`_pipeline.py`): a statement waits for the
        server only when its result is read, and carries everything queued before it, so
        `BEGIN`, savepoints and writes nobody reads the result of cost no round trip of their
        own. A savepoint that queued such writes syncs them before it is released, so an error
        of theirs is raised inside the nested call, as on SQLite.

        What the transaction `note`d reaches `on_commit` after the commit, once its writer
        is given back.
        """
        writer = self._bound()
        if writer is not None:
            if writer.bare:
                with self._bare_call(writer):
                    yield writer.tx
            else:
                with self._savepoint(writer):
                    yield writer.tx
            return
        notes: list[object] = []
        with self._taken() as writer:
            wire, tx = writer.wire, writer.tx
            tx.drop_reads_ahead()
            with translate_errors():
                wire.begin()
            tx.depth = 1
            writer.bare = not savepoints
            try:
                with translate_errors():
                    yield tx
                    tx.check_seen()
                if writer.doomed:
                    raise StoreCorruptError(
                        "a store call failed inside a transaction that could not roll it back "
                        "alone, and the failure was passed over: nothing was committed"
                    )
            except BaseException:
                wire.rollback()
                tx.drop_reads_ahead()
                raise
            else:
                try:
                    with translate_errors():
                        if self.before_commit is not None and tx.notes:
                            self.before_commit(tx, tx.notes)
                        wire.commit()
                except BaseException:
                    wire.rollback()
                    raise
                notes = tx.notes
            finally:
                writer.reset()
        if notes and self.on_commit is not None:
            self.on_commit(told(notes))

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[PostgresTx]:
        """`transaction()`, with a savepoint when nested even in a transaction opened without
        them: for a call whose failure its caller handles and then goes on."""
        writer = self._bound()
        if writer is None:
            with self.transaction() as tx:
                yield tx
            return
        doomed = writer.doomed
        try:
            with self._savepoint(writer):
                yield writer.tx
        except BaseException:
            writer.doomed = doomed  # rolled back: with it what failed inside it
            raise

    def _bound(self) -> _Writer | None:
        """The writer of this thread's open transaction or read, if it has one."""
        writer: _Writer | None = getattr(self._local, "writer", None)
        return writer

    @contextlib.contextmanager
    def _taken(self) -> Iterator[_Writer]:
        """A writer bound to this thread until the block ends, its connection live."""
        writer = self._take()
        try:
            yield writer
        finally:
            self._give_back(writer)

    def _take(self) -> _Writer:
        if _on_event_loop():
            self.loop_waits += 1
        writer: _Writer | None
        with self._pool:
            while True:
                if self._closed:
                    raise StoreUnavailableError("the store is closed")
                if self._free:
                    writer = self._free.pop()
                    break
                if len(self._writers) + self._opening < self._max_writers:
                    writer = None
                    self._opening += 1  # its place is kept while it connects
                    break
                self._pool.wait()
        try:
            if writer is None:
                writer = self._open_writer()
            else:
                self._live(writer)
        except BaseException:
            with self._pool:
                if writer is None:
                    self._opening -= 1
                else:
                    self._free.append(writer)
                self._pool.notify()
            raise
        self._local.writer = writer
        return writer

    def _give_back(self, writer: _Writer) -> None:
        self._local.writer = None
        with self._pool:
            if self._closed:
                writer.conn.close()
            else:
                self._free.append(writer)
            self._pool.notify()

    def _writer_connection(self) -> psycopg.Connection[Any]:
        """A new writer connection, its lock waits bounded."""
        conn = _connect(self._dsn, self._prepare_threshold)
        try:
            with translate_errors():
                _bound_lock_waits(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_writer(self) -> _Writer:
        writer = _Writer(self._writer_connection())
        with self._pool:
            self._opening -= 1
            self._writers.append(writer)
        return writer

    def _live(self, writer: _Writer) -> None:
        """The writer's connection, opened again if the server dropped it (a restart, an
        operator's `pg_terminate_backend`): the store goes on once the database is back,
        and raises `StoreUnavailableError` until then. Called between the writer's
        transactions only, so nothing in flight is replayed."""
        if not writer.conn.broken and not writer.conn.closed:
            return
        if not self._reconnecting:
            # Once per outage: every store call tries again until the server is back.
            log.warning("reconnecting to the database", extra={"url": self.url})
            self._reconnecting = True
        writer.conn.close()
        writer.use(self._writer_connection())
        self._reconnecting = False
        log.info("reconnected to the database", extra={"url": self.url})

    @contextlib.contextmanager
    def _bare_call(self, writer: _Writer) -> Iterator[None]:
        writer.tx.depth += 1
        try:
            yield
        except BaseException:
            writer.doomed = True
            raise
        finally:
            writer.tx.depth -= 1

    @contextlib.contextmanager
    def _savepoint(self, writer: _Writer) -> Iterator[None]:
        """A nested call: a savepoint, rolled back (and only it) if the call raises.

        A savepoint that succeeded is not released at once: `RELEASE` would be one statement
        more on every nested call, and the commit releases it anyway. Kept ones stay nested in
        the server's transaction; more than `KEPT_SAVEPOINTS` after the innermost open one are
        released in one `RELEASE` (it takes every savepoint made after the one it names), so a
        transaction of thousands of nested calls never nests thousands deep.
        """
        writer.savepoints += 1
        name = f"sp{writer.savepoints}"
        wire, kept, tx = writer.wire, writer.kept, writer.tx
        with translate_errors():
            wire.control(f"SAVEPOINT {name}")
        writer.tx.depth += 1
        kept.append([name, True])
        mark = len(tx.notes)
        try:
            with translate_errors():
                yield
                wire.settle()
        except BaseException as exc:
            del tx.notes[mark:]
            tx.forget_locks()
            # Rolled back and released: with it go the ones made inside it.
            del kept[_index_of(kept, name) :]
            try:
                with translate_errors():
                    wire.undo_savepoint(name)
            except SessiongateError:
                if not isinstance(exc, StaleWriteError):
                    raise
                # A refusal that fails the transaction (a lost lease, a turn not running)
                # may come with a statement of this savepoint, made after the refused one:
                # the server never made the savepoint, and an outer one or the transaction
                # rolls back instead. The refusal is the error to tell.
            raise
        else:
            kept[_index_of(kept, name)][1] = False
            closed = _closed_tail(kept)
            if closed > KEPT_SAVEPOINTS:
                first = len(kept) - closed
                with translate_errors():
                    wire.control(f"RELEASE SAVEPOINT {kept[first][0]}")
                del kept[first:]
        finally:
            writer.tx.depth -= 1

    def read(self) -> _Read:
        """Reads on this thread's writer, each statement on its own snapshot (inside the
        caller's transaction when nested): the same promise as SQLite's `read()`, without the
        two round trips a transaction of its own would cost."""
        return _Read(self)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[PostgresTx]:
        """A read-only snapshot on a pooled connection of its own: it never holds the writer."""
        if self._closed:
            raise StoreUnavailableError("the store is closed")
        with translate_errors(), self._reader() as reader:
            try:
                yield PostgresTx(reader)
            finally:
                _rollback(reader)

    @contextlib.contextmanager
    def _reader(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection with its snapshot begun. A pooled connection the server dropped
        meanwhile (a restart ends every session) fails its `BEGIN`; the pool drops it when it
        comes back broken, and the next one is tried, so no read after a restart fails for a
        connection that was already dead. Costs nothing while the connections are good."""
        for attempt in range(READER_POOL_SIZE + 1):
            conn = self._readers.getconn()
            try:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            except psycopg.OperationalError:
                self._readers.putconn(conn)
                if attempt == READER_POOL_SIZE or not conn.broken:
                    raise
                continue
            try:
                yield conn
            finally:
                self._readers.putconn(conn)
            return

    def stream_routes(self, consume: Callable[[Iterable[tuple[str, str]]], None]) -> None:
        """(session_key, entry JSON) pairs from one snapshot, fetched in batches."""
        with self.snapshot() as tx, tx.conn.cursor(name="sg_mirror") as cursor:
            cursor.itersize = 1000
            cursor.execute("SELECT session_key, data::text FROM routes")
            consume(cursor)

    # -- `db copy` (store/copy.py): this database as a copy's source or target

    def count_rows(self, table: TableSpec) -> int:
        with self.read() as tx:
            return copy.count_rows(tx.conn, table)

    def read_rows(
        self, table: TableSpec, after: Sequence[Any] | None, limit: int
    ) -> list[tuple[Any, ...]]:
        with self.read() as tx:
            return copy.read_rows(tx.conn, table, after, limit)

    def copy_position(self, table: TableSpec) -> list[Any] | None:
        with self.read() as tx:
            return copy.copy_position(tx.conn, table)

    def write_rows(
        self, table: TableSpec, rows: Sequence[tuple[Any, ...]], position: Sequence[Any]
    ) -> int:
        with self.transaction() as tx:
            return copy.write_rows(tx.conn, table, rows, position)

    def finish_copy(self, table: TableSpec) -> None:
        with self.transaction() as tx:
            copy.finish_copy(tx.conn, table)

    def scrub(self) -> None:
        """Nothing to do in a transaction: deleted and overwritten rows are dead tuples that
        no query returns, and (auto)vacuum reclaims their space (docs/PRIVACY.md)."""
        return None

    def give_back_space(self) -> None:
        """Autovacuum's job on PostgreSQL."""
        return None

    def disk_bytes(self) -> int:
        with self.read() as tx:
            row = tx.conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c "
                "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
                "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            ).fetchone()
        return int(row[0]) if row else 0

    def begin_copy(self, origin: str) -> None:
        with self.transaction() as tx:
            copy.begin_copy(tx.conn, origin)

    def end_copy(self) -> None:
        with self.transaction() as tx:
            copy.end_copy(tx.conn)

    def holds(self, tx: object) -> bool:
        writer = self._bound()
        return writer is not None and tx is writer.tx

    def close(self) -> None:
        """Close every connection; a writer still in a call is closed when given back."""
        with self._pool:
            if self._closed:
                return
            self._closed = True
            idle = list(self._free)
            self._free.clear()
            self._pool.notify_all()
        self._readers.close()
        for writer in idle:
            writer.conn.close()

    @property
    def closed(self) -> bool:
        return self._closed


class _Read:
    """`PostgresDatabase.read()`. A class, not a generator: a turn takes several."""

    __slots__ = ("_db", "_writer")

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db
        self._writer: _Writer | None = None

    def __enter__(self) -> PostgresTx:
        db = self._db
        writer = db._bound()
        if writer is None:
            writer = self._writer = db._take()
        return writer.tx

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            self._db._give_back(writer)
        if isinstance(exc, (psycopg.Error, UnicodeEncodeError)):
            raise store_error(exc) from exc


def _on_event_loop() -> bool:
    """Whether this thread runs an event loop (a store call here makes it wait)."""
    return asyncio._get_running_loop() is not None


def _bound_lock_waits(conn: psycopg.Connection[Any]) -> None:
    """`WRITER_LOCK_TIMEOUT` on the writer's session, unless the URL set one."""
    conn.execute(
        "SELECT set_config('lock_timeout', %s, false) WHERE current_setting('lock_timeout') = '0'",
        (WRITER_LOCK_TIMEOUT,),
    )


def _index_of(kept: list[list[Any]], name: str) -> int:
    return next(i for i in range(len(kept) - 1, -1, -1) if kept[i][0] == name)


def _closed_tail(kept: list[list[Any]]) -> int:
    """How many savepoints at the end of `kept` are closed (none of them may be released
    while one made before them is still open, as releasing one releases all after it)."""
    count = 0
    for _, is_open in reversed(kept):
        if is_open:
            break
        count += 1
    return count


def _rollback(conn: psycopg.Connection[Any]) -> None:
    try:
        conn.execute("ROLLBACK")
    except psycopg.Error:
        # The connection is gone; the server rolled the transaction back with it.
        log.debug("rollback failed", exc_info=True)


def upgrade(conn: psycopg.Connection[Any]) -> list[int]:
    """Apply the migrations this database lacks, under the schema's advisory lock; returns the
    versions applied (none if another instance got there first)."""
    applied: list[int] = []
    with translate_errors(), conn.transaction():
        conn.execute(_MIGRATION_LOCK)
        conn.execute(_VERSIONS_TABLE)
        done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
        for version, name, statements in MIGRATIONS:
            if version in done:
                continue
            for statement in statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, now())",
                (version, name),
                prepare=False,  # once per migration, at start: not worth a prepared statement
            )
            applied.append(version)
        _refuse_newer(done)
    if applied:
        log.info("database migrated", extra={"versions": applied})
    return applied


def migration_status(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
    """Every known migration with whether (and when) it was applied."""
    with translate_errors():
        exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
        rows: dict[int, Any] = {}
        if exists and exists[0]:
            rows = {
                r[0]: r[1]
                for r in conn.execute("SELECT version, applied_at FROM schema_migrations")
            }
    return [
        {
            "version": version,
            "name": name,
            "applied_at": rows[version].isoformat() if version in rows else None,
        }
        for version, name, _ in MIGRATIONS
    ]


def describe(url: str) -> dict[str, Any]:
    """The database at `url` and its migrations, read without changing anything."""
    with contextlib.closing(_connect(url)) as conn:
        return {
            "backend": "postgresql",
            "url": redact_url(url),
            "migrations": migration_status(conn),
        }


def _check_not_newer(conn: psycopg.Connection[Any]) -> None:
    status = migration_status(conn)
    if any(s["applied_at"] is None for s in status):
        raise StoreUnavailableError("the database needs migrations: run `sessiongate db upgrade`")


def _refuse_newer(done: set[int]) -> None:
    known = max(v for v, _, _ in MIGRATIONS)
    if done and max(done) > known:
        raise StoreUnavailableError(
            f"the database has schema version {max(done)}, newer than this sessiongate ({known})"
        )
