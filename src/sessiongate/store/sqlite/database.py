"""One SQLite connection, its pragmas, its transactions and its migrations.

Every write goes through `Database.transaction()` (`BEGIN IMMEDIATE`, commit, or roll back and
re-raise); nesting becomes a savepoint. The connection is shared by threads behind one lock, so
a transaction is also the unit of thread safety.

Over the ~400-line budget: the connection's lifecycle (pragmas, savepoints, checkpoints,
recovery of a damaged file), copies and migrations share the one connection and its lock, and
their order of steps is the contract.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from sessiongate.errors import (
    StoreCorruptError,
    StoreUnavailableError,
)
from sessiongate.store.changes import told
from sessiongate.store.sqlite import copy
from sessiongate.store.sqlite._errors import SQLITE_ERRORS, translate_errors, translated
from sessiongate.store.sqlite._schema import MIGRATIONS
from sessiongate.store.sqlite.tx import SqliteTx

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from sessiongate.store.copy import TableSpec

__all__ = ["Database", "migration_status", "translate_errors"]

log = logging.getLogger(__name__)

# RETURNING (3.35) and UPSERT (3.24) are used by the store.
MIN_SQLITE = (3, 35, 0)
# SQLite's own auto-checkpoint runs inside a commit, on the writer (the event loop): a few ms
# every ~1,000 WAL pages, which was most of the gateway's p99. At synchronous=NORMAL we turn it
# off and run a PASSIVE checkpoint (it never blocks the writer) on a thread with its own
# connection instead. At FULL the concurrent checkpoint's fsyncs cost a third of the append
# rate (measured), so FULL keeps SQLite's own: whoever asks for FULL trades latency for safety.
CHECKPOINT_EVERY_COMMITS = 200
# A log this long (frames of one page, ~16 MB) is finished under the writer's lock (see
# `Database._checkpoint_round`).
WAL_RESTART_FRAMES = 4096


class Database:
    """Owns the connection to `state.db` (or an in-memory database for incognito sessions)."""

    def __init__(
        self,
        path: Path | None,
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout_ms: int = 10_000,
    ) -> None:
        if sqlite3.sqlite_version_info < MIN_SQLITE:
            raise StoreUnavailableError(
                f"SQLite {sqlite3.sqlite_version} is too old; sessiongate needs 3.35 or newer"
            )
        self.path = path
        self.url = "sqlite://" if path is None else f"sqlite://{path}"
        self.shared = False  # one process's own (the home lock keeps it so)
        self.remote = False
        self.lock = threading.RLock()
        self._depth = 0
        # `conn.total_changes` when the open transaction began: whether it has written yet.
        self._changes_at_begin = 0
        # A transaction opened with `savepoints=False`, and whether a call failed in it
        # having written (see `transaction`).
        self._bare = False
        self._doomed = False
        self._closed = False
        self._readers = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._commits = 0
        # Told what each committed transaction `note`d (`store/changes.py`).
        self.on_commit: Callable[[list[object]], None] | None = None
        # Called with the transaction and its notes just before a commit that noted changes:
        # its writes commit with them (the outbox of outbound webhooks, `store/outbox.py`).
        self.before_commit: Callable[[SqliteTx, list[object]], None] | None = None
        self.checkpoints = 0
        self._checkpointed = threading.Condition()
        self._checkpoint_due = threading.Event()
        self._checkpointer: threading.Thread | None = None
        target = ":memory:" if path is None else str(path)
        if path is not None:
            _create_private_file(path)
        try:
            # `timeout` installs the busy handler before the first statement: another process
            # may be creating or migrating the same file right now.
            self.conn = sqlite3.connect(
                target,
                isolation_level=None,
                check_same_thread=False,
                cached_statements=512,
                timeout=busy_timeout_ms / 1000,
            )
            self._tx = SqliteTx(self.conn, keeps_rows=True)
            self._configure(synchronous, busy_timeout_ms)
            self._migrate()
            if path is not None:
                self._incremental_auto_vacuum()
            if path is not None:
                _create_private_file(path)  # the -wal and -shm files exist now
            if path is not None and synchronous == "NORMAL":
                self.conn.execute("PRAGMA wal_autocheckpoint=0")
                self._checkpointer = threading.Thread(
                    target=self._checkpoint_loop, name="sessiongate-checkpoint", daemon=True
                )
                self._checkpointer.start()
        except sqlite3.OperationalError as exc:
            # Permissions, a read-only file or folder, a full disk: the data is not damaged.
            raise StoreUnavailableError(
                f"cannot open {target}: {exc} (check that the file and its folder are "
                "writable by this user and the disk has room)",
                path=str(path),
            ) from exc
        except sqlite3.DatabaseError as exc:
            raise StoreCorruptError(
                f"cannot open {target}: {exc}; run `sessiongate doctor` to inspect it",
                path=str(path),
            ) from exc

    def _configure(self, synchronous: str, busy_timeout_ms: int) -> None:
        conn = self.conn
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        # Freed pages can be given back (`give_back_space`); on a new file this takes effect
        # with the first table, an older one is converted once after its migrations.
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        # Write-ahead log: readers never block the writer and a crash never tears a commit.
        _enable_wal(conn, busy_timeout_ms)
        # NORMAL in WAL loses at most the last commits on power loss, never on a process crash;
        # FULL also survives power loss at the cost of an fsync per commit.
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("PRAGMA foreign_keys=ON")
        # Temporary b-trees (sorts) stay in memory; the page cache is 16 MiB.
        conn.execute("PRAGMA temp_store=MEMORY")
        conn.execute("PRAGMA cache_size=-16000")

    def _migrate(self) -> None:
        with self.lock:
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            done = {r[0] for r in self.conn.execute("SELECT version FROM schema_migrations")}
            for version, name, statements in MIGRATIONS:
                if version in done:
                    continue
                with self.transaction():
                    # Checked inside the write lock: two processes opening a new file at once
                    # must not both apply a migration.
                    applied = self.conn.execute(
                        "SELECT 1 FROM schema_migrations WHERE version = ?", (version,)
                    ).fetchone()
                    if applied is not None:
                        continue
                    for statement in statements:
                        self.conn.execute(statement)
                    self.conn.execute(
                        "INSERT INTO schema_migrations (version, name, applied_at) "
                        "VALUES (?, ?, datetime('now'))",
                        (version, name),
                    )
            known = max(v for v, _, _ in MIGRATIONS)
            newest = self.conn.execute("SELECT max(version) FROM schema_migrations").fetchone()[0]
            if newest > known:
                raise StoreUnavailableError(
                    f"state.db has schema version {newest}, newer than this sessiongate ({known})"
                )

    def _incremental_auto_vacuum(self) -> None:
        """A file made before `auto_vacuum=INCREMENTAL` was set at creation keeps mode NONE
        until a VACUUM rewrites it: done once here, at the first open by this version (it
        takes as long as copying the file; later opens find the mode set)."""
        with self.lock:
            if int(self.conn.execute("PRAGMA auto_vacuum").fetchone()[0]) == 2:
                return
            log.warning("converting %s to incremental auto-vacuum (one time)", self.path)
            self.conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
            try:
                self.conn.execute("VACUUM")
            except sqlite3.OperationalError as exc:
                # Another connection is busy with the file: the next open tries again, and
                # until then freed pages are reused in place instead of given back.
                log.warning(
                    "could not convert %s now (%s); will retry at next open", self.path, exc
                )

    def number_rows_from(self, base: int) -> None:
        """Number new inbox rows and turns from `base` (a new, empty database)."""
        with self.transaction() as tx:
            tx.conn.executemany(
                "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)",
                [("inbox", base - 1), ("turns", base - 1)],
            )

    @contextlib.contextmanager
    def savepoint(self) -> Iterator[SqliteTx]:
        """`transaction()`, with a savepoint when nested even in a transaction opened without
        them: for a call whose failure its caller handles and then goes on."""
        with self.lock:
            if not self._depth:
                with self.transaction() as tx:
                    yield tx
                return
            bare, doomed = self._bare, self._doomed
            self._bare = False  # this call is a savepoint; the calls inside keep the mode
            try:
                with self.transaction() as tx:
                    self._bare = bare
                    yield tx
            except BaseException:
                self._doomed = doomed  # rolled back: with it what failed inside it
                raise
            finally:
                self._bare = bare

    def transaction(self, *, savepoints: bool = True) -> _Transaction:
        """`BEGIN IMMEDIATE` … commit, or roll back and re-raise; nested calls are savepoints.

        With `savepoints=False` (groups whose callers never go on after a failed call inside
        them, as the gateway's) nested calls make none, except `savepoint()`. One that fails
        having written dooms the transaction: should its error be caught and the group carried
        on to the commit, the commit refuses (`StoreCorruptError`) and rolls back, so what the
        failed call wrote can never commit.

        What the transaction `note`d reaches `on_commit` after the commit, outside the lock;
        a rollback (of the transaction or of a savepoint) takes its notes back with it.
        """
        return _Transaction(self, savepoints)

    def read(self) -> _Read:
        """A consistent read: inside a transaction when several statements must agree."""
        return _Read(self)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[SqliteTx]:
        """A read transaction on this thread's own read-only connection.

        WAL lets it read while the writer writes, so a long read (a 10,000-entry model
        context) can run on a worker thread without holding the store's lock. An in-memory
        database has no second connection; there the shared one is used under the lock.
        """
        if self.path is None:
            with self.read() as shared:
                yield shared
            return
        if self._closed:
            raise StoreUnavailableError("the store is closed")
        reader: sqlite3.Connection | None = getattr(self._readers, "conn", None)
        if reader is None:
            reader = sqlite3.connect(
                f"file:{self.path}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=10,
            )
            self._readers.conn = reader
            with self.lock:
                self._reader_conns.append(reader)
        with translate_errors():
            reader.execute("BEGIN")
            try:
                yield SqliteTx(reader)
            finally:
                reader.execute("COMMIT")

    def stream_routes(self, consume: Callable[[Iterable[tuple[str, str]]], None]) -> None:
        """(session_key, entry JSON) pairs from one read transaction on a connection of its
        own, streamed row by row: 100,000 lanes never sit in memory at once."""
        if self.path is None:
            with self.read() as shared:
                consume(shared.conn.execute("SELECT session_key, data FROM routes"))
            return
        with translate_errors():
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                conn.execute("PRAGMA busy_timeout=5000")
                conn.execute("BEGIN")
                consume(conn.execute("SELECT session_key, data FROM routes"))
                conn.execute("COMMIT")
            finally:
                conn.close()

    def count_rows(self, table: TableSpec) -> int:
        with self.read() as tx:
            return copy.count_rows(tx.conn, table)

    def read_rows(
        self, table: TableSpec, after: Sequence[Any] | None, limit: int
    ) -> list[tuple[Any, ...]]:
        with self.read() as tx:
            return copy.read_rows(tx.conn, table, after, limit)

    def holds(self, tx: object) -> bool:
        return tx is self._tx

    def _checkpoint_loop(self) -> None:
        assert self.path is not None
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout=1000")
            while True:
                self._checkpoint_due.wait()
                self._checkpoint_due.clear()
                if self._closed:
                    return
                try:
                    if not self._checkpoint_round(conn):
                        return
                    with self._checkpointed:
                        self.checkpoints += 1
                        self._checkpointed.notify_all()
                except sqlite3.Error:
                    # Only the WAL's size is at stake; the next round tries again.
                    log.warning("background checkpoint failed", exc_info=True)
        finally:
            conn.close()

    def _checkpoint_round(self, conn: sqlite3.Connection) -> bool:
        """One round of the checkpointer; False when the store closed meanwhile.

        A PASSIVE pass copies the log as it was when the pass began, and a writer that never
        pauses commits more while it copies, so the log is never wholly in the database when
        the next transaction begins: SQLite never starts it over and it grows without end
        (247 MB after 27,000 messages in 4,000 conversations), each commit extending the file
        instead of rewriting pages the OS already holds. Past `WAL_RESTART_FRAMES` the frames
        committed during the passes are copied with the writer held off (a few pages, once
        per ~16 MB of log), so the next transaction starts the log over.
        """
        frames = _passive_checkpoint(conn)
        if frames < WAL_RESTART_FRAMES:
            return True
        _passive_checkpoint(conn)  # what was committed during the first pass: far less
        while not self.lock.acquire(timeout=0.05):
            if self._closed:  # `close` holds the lock while it waits for this thread
                return False
        try:
            if self._closed:
                return False
            _passive_checkpoint(conn)
        finally:
            self.lock.release()
        return True

    def scrub(self) -> None:
        """Rewrite the file from what it holds now (VACUUM) and empty the log (a TRUNCATE
        checkpoint): no page, free or live, of the file or its log keeps deleted or
        overwritten text. Takes the writer lock for as long as the rewrite lasts."""
        if self.path is None:
            return
        with self.lock:
            try:
                self.conn.execute("PRAGMA secure_delete=ON")
                self.conn.execute("VACUUM")
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise StoreUnavailableError(f"could not scrub {self.path}: {exc}") from exc
            finally:
                self.conn.execute("PRAGMA secure_delete=OFF")

    def give_back_space(self) -> None:
        """Return free pages to the file system (`auto_vacuum=INCREMENTAL`): they move to the
        end of the file, which the next checkpoint truncates."""
        if self.path is None:
            return
        with self.lock:
            # It frees one page per step, and `execute` steps a statement without result
            # columns once: `executescript` steps it to its end (no transaction is open here).
            try:
                self.conn.executescript("PRAGMA incremental_vacuum;")
            except sqlite3.OperationalError as exc:
                log.warning("incremental vacuum skipped (%s); the pages stay free for reuse", exc)
                return
        self.checkpoint_now()

    def disk_bytes(self) -> int:
        """The bytes of live pages (the file less its free pages): what the data takes, not
        the log's momentary length, so a budget compares the same thing every time."""
        with self.lock:
            pages = int(self.conn.execute("PRAGMA page_count").fetchone()[0])
            free = int(self.conn.execute("PRAGMA freelist_count").fetchone()[0])
            size = int(self.conn.execute("PRAGMA page_size").fetchone()[0])
        return (pages - free) * size

    def checkpoint_now(self) -> None:
        """Ask the checkpointer to run now (tests, and after a bulk import)."""
        self._checkpoint_due.set()

    def wait_checkpoints(self, count: int, timeout: float) -> bool:
        """Wait until `count` background checkpoints have run (tests, diagnostics)."""
        with self._checkpointed:
            return self._checkpointed.wait_for(lambda: self.checkpoints >= count, timeout)

    def close(self) -> None:
        with self.lock:
            if self._closed:
                return
            self._closed = True
            self._checkpoint_due.set()
            if self._checkpointer is not None:
                self._checkpointer.join(timeout=10)
            try:
                # Leave a short WAL behind; the last connection to close removes it anyway.
                self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error:
                log.debug("checkpoint at close failed", exc_info=True)
            for reader in self._reader_conns:
                reader.close()
            try:
                self.conn.execute("PRAGMA optimize")
            except sqlite3.Error:
                log.debug("optimize failed at close", exc_info=True)
            self.conn.close()

    @property
    def closed(self) -> bool:
        return self._closed


def _passive_checkpoint(conn: sqlite3.Connection) -> int:
    """A PASSIVE checkpoint; the frames the log held when it began."""
    row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(row[1]) if row is not None else 0


class _Read:
    """`Database.read()`: the store's lock, and the disk's refusals as store errors. A class,
    not a generator: a turn takes about ten of these."""

    __slots__ = ("_db",)

    def __init__(self, db: Database) -> None:
        self._db = db

    def __enter__(self) -> SqliteTx:
        db = self._db
        db.lock.acquire()
        if db._closed:
            db.lock.release()
            raise StoreUnavailableError("the store is closed")
        return db._tx

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        self._db.lock.release()
        if isinstance(exc, SQLITE_ERRORS):
            raise translated(exc) from exc


class _Transaction:
    """One `Database.transaction()`: a class, not a generator, because every store call
    enters one (a new conversation's first turn enters three) and a generator's context
    manager costs several microseconds more each time.

    What a nested call does is chosen as it enters:
    - the first call of a group that writes takes no savepoint (it would mark the
      transaction's empty start): if it fails having written, the transaction is rolled back
      and begun again, which undoes exactly its writes;
    - in a group opened with `savepoints=False` the others take none either, and one that
      fails having written dooms the group;
    - every other nested call is a savepoint.
    """

    __slots__ = ("_changes", "_db", "_depth", "_mark", "_mode", "_savepoints")

    def __init__(self, db: Database, savepoints: bool) -> None:
        self._db = db
        self._savepoints = savepoints

    def __enter__(self) -> SqliteTx:
        db = self._db
        db.lock.acquire()
        try:
            if db._closed:
                raise StoreUnavailableError("the store is closed")
            conn = db.conn
            tx = db._tx
            depth = self._depth = db._depth
            if depth:
                self._mark = len(tx.notes)
                self._changes = conn.total_changes
                if depth == 1 and self._changes == db._changes_at_begin:
                    self._mode = "first"
                elif db._bare:
                    self._mode = "bare"
                else:
                    self._mode = "savepoint"
                    conn.execute(_savepoint_statements(depth)[0])
                db._depth = depth + 1
                return tx
            self._mode = "outer"
            try:
                conn.execute("BEGIN IMMEDIATE")
            except SQLITE_ERRORS as exc:
                raise translated(exc) from exc
            db._changes_at_begin = conn.total_changes
            db._depth = 1
            db._bare = not self._savepoints
            return tx
        except BaseException:
            db.lock.release()
            raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        db = self._db
        if self._mode != "outer":
            try:
                self._end_nested(exc)
            finally:
                db.lock.release()
            return
        try:
            notes = self._end(exc)
        finally:
            db.lock.release()
        if notes and db.on_commit is not None:
            db.on_commit(told(notes))

    def _end_nested(self, exc: BaseException | None) -> None:
        db = self._db
        conn, tx, mode = db.conn, db._tx, self._mode
        db._depth = self._depth
        if exc is None:
            if mode == "savepoint":
                conn.execute(_savepoint_statements(self._depth)[2])
            return
        wrote = conn.total_changes != self._changes
        if mode == "savepoint":
            _, undo, release = _savepoint_statements(self._depth)
            conn.execute(undo)
            conn.execute(release)
        elif mode == "first":
            if wrote:
                conn.execute("ROLLBACK")
                conn.execute("BEGIN IMMEDIATE")
                db._changes_at_begin = conn.total_changes
        elif wrote:
            db._doomed = True
        del tx.notes[self._mark :]
        tx.end_transaction(committed=False)
        if isinstance(exc, SQLITE_ERRORS):
            raise translated(exc) from exc

    def _end(self, exc: BaseException | None) -> list[object]:
        """Commit, or roll back and raise; what the transaction noted, once committed."""
        db = self._db
        conn, tx = db.conn, db._tx
        committed = False
        try:
            if exc is not None or db._doomed:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if exc is None:
                    raise StoreCorruptError(
                        "a store call failed inside a transaction that could not roll it "
                        "back alone, and the failure was passed over: nothing was committed"
                    )
                if isinstance(exc, SQLITE_ERRORS):
                    raise translated(exc) from exc
                return []
            try:
                if db.before_commit is not None and tx.notes:
                    db.before_commit(tx, tx.notes)
                conn.execute("COMMIT")
            except BaseException as failure:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(failure, SQLITE_ERRORS):
                    raise translated(failure) from failure
                raise
            committed = True
            db._commits += 1
            if db._commits % CHECKPOINT_EVERY_COMMITS == 0:
                db._checkpoint_due.set()
            return tx.notes
        finally:
            db._depth = 0
            db._bare = db._doomed = False
            tx.notes = []
            tx.end_transaction(committed=committed)


@functools.cache
def _savepoint_statements(depth: int) -> tuple[str, str, str]:
    name = f"sp{depth}"
    return f"SAVEPOINT {name}", f"ROLLBACK TO {name}", f"RELEASE {name}"


def migration_status(path: Path) -> list[dict[str, object]]:
    """Every known migration with whether (and when) `path` has it; read-only."""
    applied: dict[int, str] = {}
    if path.exists():
        with (
            translate_errors(),
            contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn,
        ):
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'schema_migrations'"
            ).fetchone()
            if found:
                applied = dict(conn.execute("SELECT version, applied_at FROM schema_migrations"))
    return [{"version": v, "name": name, "applied_at": applied.get(v)} for v, name, _ in MIGRATIONS]


def _enable_wal(conn: sqlite3.Connection, busy_timeout_ms: int) -> None:
    """Switch to WAL (persistent in the file), waiting out another process that is creating
    the same new file: SQLite answers that race with SQLITE_BUSY at once, without calling the
    busy handler, so the wait is ours."""
    if conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
        return
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.005
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def _create_private_file(path: Path) -> None:
    """State files are created 0600 and their folder 0700: transcripts are private.

    An existing file only loses its group and other bits: its owner's bits are left as they
    are, so a store an operator made read-only (0400) is never made writable by opening it.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            os.fchmod(fd, 0o600)  # exactly, whatever the umask took away
        finally:
            os.close(fd)
    for suffix in ("", "-wal", "-shm"):
        extra = Path(str(path) + suffix)
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to change
            mode = extra.stat().st_mode
            if mode & 0o077:
                os.chmod(extra, mode & 0o7777 & ~0o077)
