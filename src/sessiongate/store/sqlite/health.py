"""Checks of a `state.db` file made without opening a store, so a store that refuses to open
can still be examined (`sessiongate doctor`)."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["check_database_file"]


def check_database_file(path: Path, *, full: bool = False) -> tuple[bool, str]:
    """SQLite's own check of the file, read-only: `quick_check`, or `integrity_check` when
    `full`. Returns (healthy, what it found)."""
    name = "integrity_check" if full else "quick_check"
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        return False, f"cannot open {path}: {exc}"
    try:
        rows = conn.execute(f"PRAGMA {name}").fetchall()
    except sqlite3.DatabaseError as exc:
        return False, f"{name} failed: {exc}"
    finally:
        conn.close()
    messages = [str(r[0]) for r in rows]
    if messages == ["ok"]:
        return True, f"{name}: ok"
    return False, f"{name}: " + "; ".join(messages[:5])
