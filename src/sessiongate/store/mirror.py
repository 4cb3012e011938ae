"""`sessions.json`: a read-only mirror of the routing entries, for people and old tools.

The database is the source of truth. The mirror is written off the hot path by one thread,
coalesced (many changes, one write), atomically (temp file, fsync, rename, mode 0600), from its
own read connection so it never holds the writer's lock.

A write that fails (a full disk, `sessions.json` replaced by a directory) is logged once, as a
warning with its reason, and retried with a doubling wait up to `MAX_RETRY_SECONDS`; further
failures of the same kind go to the debug level, and the first write that works again is
logged. `last_error` holds the reason meanwhile (`sessiongate doctor` reports it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import tempfile
import threading
import time
from typing import TYPE_CHECKING, TextIO

from sessiongate.errors import SessiongateError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from pathlib import Path

__all__ = ["MAX_RETRY_SECONDS", "MIRROR_README", "SessionsMirror"]

log = logging.getLogger(__name__)

# A broken mirror is retried at most every five minutes: often enough that fixing the cause
# shows within minutes, rare enough that the log and the disk are not busy with it.
MAX_RETRY_SECONDS = 300.0

MIRROR_README = (
    "Mirror of sessiongate's routing entries, written from state.db. Edits here are ignored "
    "for keys the database has; use `sessiongate sessions import` to bring entries in."
)


class SessionsMirror:
    """Coalescing writer of `sessions.json`; `mark_dirty()` is cheap and never blocks."""

    def __init__(
        self,
        db_path: Path,
        json_path: Path,
        *,
        interval: float = 1.0,
        on_written: Callable[[os.stat_result], None] | None = None,
    ) -> None:
        self._db_path = db_path
        self._json_path = json_path
        self._base_interval = interval
        self._interval = interval
        self._on_written = on_written
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._write_lock = threading.Lock()
        self.writes = 0
        self.last_error: str | None = None
        # Failed writes in a row; the retry wait doubles with each.
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name="sessions-mirror", daemon=True)
        self._thread.start()

    def mark_dirty(self) -> None:
        self._dirty.set()

    @property
    def retry_in(self) -> float:
        """The wait before the next write: the coalescing interval, doubled per failure."""
        if not self.failures:
            return self._interval
        return min(MAX_RETRY_SECONDS, self._base_interval * (1 << min(self.failures, 16)))

    def flush(self) -> str | None:
        """Write now if anything changed (tests, doctor and shutdown); the reason the mirror
        could not be written, or None."""
        if self._dirty.is_set():
            self._dirty.clear()
            self._write()
        else:
            with self._write_lock:
                pass  # a write of the thread in progress ends first
        return self.last_error

    def close(self) -> None:
        self._stop.set()
        self._dirty.set()
        self._thread.join(timeout=10)
        self.flush()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._dirty.wait()
            if self._stop.is_set():
                return
            # Coalesce a burst of changes into one write (or wait out a failure's backoff).
            self._stop.wait(self.retry_in)
            self._dirty.clear()
            started = time.monotonic()
            if not self._write():
                self._dirty.set()  # still stale: try again after the backoff
                continue
            # A big mirror (100,000 lanes) takes a while to write: spend at most ~5% of a core
            # on it by waiting twenty times as long as the last write took.
            self._interval = max(self._base_interval, (time.monotonic() - started) * 20)

    def _write(self) -> bool:
        with self._write_lock:
            try:
                conn = sqlite3.connect(f"file:{self._db_path}?mode=ro", uri=True)
                try:
                    conn.execute("PRAGMA busy_timeout=5000")
                    # One read transaction, streamed row by row: the stored JSON is written as
                    # it is, so 100,000 lanes never sit in memory at once.
                    conn.execute("BEGIN")
                    rows = conn.execute("SELECT session_key, data FROM routes")
                    _write_atomic(self._json_path, lambda out: _stream_mirror(out, rows))
                    conn.execute("COMMIT")
                finally:
                    conn.close()
                self.writes += 1
                if self.failures:
                    log.info("sessions.json mirror written again", extra={"after": self.failures})
                self.last_error = None
                self.failures = 0
                if self._on_written is not None:
                    self._on_written(self._json_path.stat())
            except (OSError, sqlite3.Error, SessiongateError) as exc:
                # The mirror is derived: a failed write is reported, never fatal.
                reason = _reason(exc, self._json_path)
                again = reason == self.last_error
                self.last_error = reason
                self.failures += 1
                log.log(
                    logging.DEBUG if again else logging.WARNING,
                    "sessions.json mirror write failed; retrying with backoff",
                    extra={"error": reason, "retry_in_seconds": self.retry_in},
                )
                return False
            return True


def _reason(exc: BaseException, path: Path) -> str:
    """Why the mirror cannot be written, in words a person can act on."""
    if isinstance(exc, IsADirectoryError) or path.is_dir():
        return f"{path} is a directory, not a file: move it away so the mirror can be written"
    return str(exc)


def _stream_mirror(out: TextIO, rows: Iterable[tuple[str, str]]) -> None:
    out.write('{\n "_README": ' + json.dumps(MIRROR_README, ensure_ascii=False))
    for key, data in rows:
        out.write(",\n " + json.dumps(key, ensure_ascii=False) + ": " + data)
    out.write("\n}\n")


def _write_atomic(path: Path, fill: Callable[[TextIO], None]) -> None:
    """Temp file in the same folder, fsync, rename, 0600: readers see old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
