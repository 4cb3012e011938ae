"""The plain `sqlite3` baseline: the physical limit a session store on SQLite can approach.

One `messages` table (session id, role, content, created_at) with an index on (session id, id),
WAL, one transaction per turn, the statements cached by the connection; a conversation's first
turn also writes its one `sessions` row, in the same transaction. No routing, no tree, no
idempotency: what is left is the cost of SQLite itself at the chosen durability.

Standard library only, and loaded by file path, so the baseline's process carries no import
that sessiongate's store needs (its peak RSS is the interpreter plus SQLite).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

__all__ = ["SqliteBaseline"]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS messages ("
    "id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, role TEXT NOT NULL, "
    "content TEXT NOT NULL, created_at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS messages_session ON messages(session_id, id)",
    # The least a store must write to know a conversation exists: one row by name.
    "CREATE TABLE IF NOT EXISTS sessions (name TEXT PRIMARY KEY, created_at REAL NOT NULL)",
)
_INSERT = "INSERT INTO messages (session_id, role, content, created_at) VALUES (?, ?, ?, ?)"
_CREATE = "INSERT INTO sessions (name, created_at) VALUES (?, ?)"
_TAIL = "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id DESC LIMIT ?"
_ALL = "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id"


class SqliteBaseline:
    """`options["synchronous"]` is NORMAL or FULL; sessions need no row of their own."""

    max_thread_messages = None

    def __init__(self, work_dir: Path, options: dict[str, Any]) -> None:
        self.path = Path(work_dir) / "baseline.db"
        self.synchronous = str(options.get("synchronous", "NORMAL")).upper()
        if self.synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be NORMAL or FULL, not {self.synchronous}")
        self.conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=30)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute(f"PRAGMA synchronous={self.synchronous}")
        for statement in _SCHEMA:
            self.conn.execute(statement)

    def create_session(self, name: str) -> str:
        return name

    def open_session(self, name: str) -> str:
        return name

    def append(self, handle: str, messages: list[dict[str, str]]) -> None:
        self._write(handle, messages, create=False)

    def append_new(self, name: str, messages: list[dict[str, str]]) -> str:
        """A conversation's first turn: its row and its messages in one transaction."""
        self._write(name, messages, create=True)
        return name

    def _write(self, handle: str, messages: list[dict[str, str]], *, create: bool) -> None:
        now = time.time()
        rows = [(handle, m["role"], m["content"], now) for m in messages]
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if create:
                conn.execute(_CREATE, (handle, now))
            conn.executemany(_INSERT, rows)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def tail(self, handle: str, n: int) -> list[tuple[str, str]]:
        rows = self.conn.execute(_TAIL, (handle, n)).fetchall()
        rows.reverse()
        return rows

    def load_all(self, handle: str) -> list[tuple[str, str]]:
        return self.conn.execute(_ALL, (handle,)).fetchall()

    def text(self, item: tuple[str, str]) -> str:
        return item[1]

    def files(self) -> list[Path]:
        return [self.path]

    def describe(self) -> dict[str, Any]:
        mode = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
        return {
            "library": f"sqlite3 (SQLite {sqlite3.sqlite_version})",
            "journal_mode": str(mode).upper(),
            "synchronous": self.synchronous,
        }

    def close(self) -> None:
        self.conn.close()
