"""The PostgreSQL backend's connections, transactions and migrations.

Like the SQLite backend, the store's transactions share one connection behind one lock: the
store's methods nest (`LaneStore.atomic()` wraps `SessionStore` calls as savepoints) and are
thread-safe because a transaction is the unit of locking. Long reads (`snapshot()`) take a
connection of their own from a small pool, so a 10,000-entry model context never holds the
writer. Migrations run at open in one transaction under an advisory lock on the schema, so
several instances starting at once apply each migration exactly once.

Over the ~400-line budget: the writer connection's lifecycle (pipeline, savepoints,
reconnects), the pooled readers, copies and migrations all share the one connection and its
lock, and their order of steps is the contract.
"""

from __future__ import annotations

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

# Connections for `snapshot()` reads beside the writer's: a few model-context reads at once.
READER_POOL_SIZE = 4

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


class PostgresDatabase:
    """The store's PostgreSQL database at `url` (`postgresql://…`)."""

    def __init__(
        self,
        url: str,
        *,
        migrate: bool = True,
        prepare_threshold: int | None = PREPARE_THRESHOLD,
    ) -> None:
        self.url = redact_url(url)
        self._prepare_threshold = prepare_threshold
        self.shared = True
        self._dsn = url
        self.lock = threading.RLock()
        self._depth = 0
        # Nested calls of the open transaction make no savepoints (`transaction`), and one of
        # them failed.
        self._bare = False
        self._doomed = False
        # Savepoints made in the open transaction, and those not released yet, in order:
        # [name, still open] (`_savepoint`).
        self._savepoints = 0
        self._kept: list[list[Any]] = []
        self._closed = False
        self._reconnecting = False
        self.conn = _connect(url, prepare_threshold)
        self._wire = Wire(self.conn)
        self._tx = PostgresTx(self.conn, self._wire)
        # Told what each committed transaction `note`d (`store/changes.py`).
        self.on_commit: Callable[[list[object]], None] | None = None
        # As on SQLite: writes that commit with the changes a transaction noted.
        self.before_commit: Callable[[PostgresTx, list[object]], None] | None = None
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
        try:
            if migrate:
                upgrade(self.conn)
            else:
                _check_not_newer(self.conn)
            _bound_lock_waits(self.conn)
            self._readers.open(wait=False)
        except BaseException:
            self.conn.close()
            raise

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

        What the transaction `note`d reaches `on_commit` after the commit, outside the lock;
        a rollback (of the transaction or of a savepoint) takes its notes back with it.
        """
        notes: list[object] = []
        with self.lock:
            if self._closed:
                raise StoreUnavailableError("the store is closed")
            if self._depth:
                if self._bare:
                    with self._bare_call():
                        yield self._tx
                else:
                    with self._savepoint():
                        yield self._tx
                return
            self._live_connection()
            wire = self._wire
            self._tx.drop_reads_ahead()
            with translate_errors():
                wire.begin()
            self._depth = 1
            self._bare = not savepoints
            self._tx.in_transaction = True
            try:
                with translate_errors():
                    yield self._tx
                    self._tx.check_seen()
                if self._doomed:
                    raise StoreCorruptError(
                        "a store call failed inside a transaction that could not roll it back "
                        "alone, and the failure was passed over: nothing was committed"
                    )
            except BaseException:
                wire.rollback()
                self._tx.drop_reads_ahead()
                raise
            else:
                try:
                    with translate_errors():
                        if self.before_commit is not None and self._tx.notes:
                            self.before_commit(self._tx, self._tx.notes)
                        wire.commit()
                except BaseException:
                    wire.rollback()
                    raise
                notes = self._tx.notes
            finally:
                self._depth = 0
                self._bare = self._doomed = False
                self._savepoints = 0
                self._kept.clear()
                self._tx.in_transaction = False
                self._tx.forget_locks()
                self._tx.notes = []
        if notes and self.on_commit is not None:
            self.on_commit(told(notes))

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[PostgresTx]:
        """`transaction()`, with a savepoint when nested even in a transaction opened without
        them: for a call whose failure its caller handles and then goes on."""
        with self.lock:
            if not self._depth:
                with self.transaction() as tx:
                    yield tx
                return
            doomed = self._doomed
            try:
                with self._savepoint():
                    yield self._tx
            except BaseException:
                self._doomed = doomed  # rolled back: with it what failed inside it
                raise

    @contextlib.contextmanager
    def _bare_call(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        except BaseException:
            self._doomed = True
            raise
        finally:
            self._depth -= 1

    @contextlib.contextmanager
    def _savepoint(self) -> Iterator[None]:
        """A nested call: a savepoint, rolled back (and only it) if the call raises.

        A savepoint that succeeded is not released at once: `RELEASE` would be one statement
        more on every nested call, and the commit releases it anyway. Kept ones stay nested in
        the server's transaction; more than `KEPT_SAVEPOINTS` after the innermost open one are
        released in one `RELEASE` (it takes every savepoint made after the one it names), so a
        transaction of thousands of nested calls never nests thousands deep.
        """
        self._savepoints += 1
        name = f"sp{self._savepoints}"
        wire = self._wire
        kept = self._kept
        with translate_errors():
            wire.control(f"SAVEPOINT {name}")
        self._depth += 1
        kept.append([name, True])
        mark = len(self._tx.notes)
        try:
            with translate_errors():
                yield
                wire.settle()
        except BaseException as exc:
            del self._tx.notes[mark:]
            self._tx.forget_locks()
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
            self._depth -= 1

    def read(self) -> _Read:
        """Reads under the lock, each statement on its own snapshot (inside the caller's
        transaction when nested): the same promise as SQLite's `read()`, without the two
        round trips a transaction of its own would cost."""
        return _Read(self)

    def _live_connection(self) -> psycopg.Connection[Any]:
        """The writer's connection, opened again if the server dropped it (a restart, an
        operator's `pg_terminate_backend`): the store goes on once the database is back,
        and raises `StoreUnavailableError` until then. Called under the lock, between
        transactions only, so nothing in flight is replayed."""
        if not self.conn.broken and not self.conn.closed:
            return self.conn
        if not self._reconnecting:
            # Once per outage: every store call tries again until the server is back.
            log.warning("reconnecting to the database", extra={"url": self.url})
            self._reconnecting = True
        self.conn.close()
        self.conn = _connect(self._dsn, self._prepare_threshold)
        self._wire = Wire(self.conn)
        self._tx = PostgresTx(self.conn, self._wire)
        with translate_errors():
            _bound_lock_waits(self.conn)
        self._reconnecting = False
        log.info("reconnected to the database", extra={"url": self.url})
        return self.conn

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
        return tx is self._tx

    def close(self) -> None:
        with self.lock:
            if self._closed:
                return
            self._closed = True
            self._readers.close()
            self.conn.close()

    @property
    def closed(self) -> bool:
        return self._closed


class _Read:
    """`PostgresDatabase.read()`. A class, not a generator: a turn takes several."""

    __slots__ = ("_db",)

    def __init__(self, db: PostgresDatabase) -> None:
        self._db = db

    def __enter__(self) -> PostgresTx:
        db = self._db
        db.lock.acquire()
        try:
            if db._closed:
                raise StoreUnavailableError("the store is closed")
            if not db._depth:
                db._live_connection()
        except BaseException:
            db.lock.release()
            raise
        return db._tx

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        self._db.lock.release()
        if isinstance(exc, (psycopg.Error, UnicodeEncodeError)):
            raise store_error(exc) from exc


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
