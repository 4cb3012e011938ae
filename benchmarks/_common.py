"""Helpers shared by the contender adapters (they run in the contenders' virtual environment)."""

from __future__ import annotations

import sqlite3
from importlib.metadata import version
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

_SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def durability(path: Path) -> dict[str, str]:
    """The journal mode stored in the file and the `synchronous` a connection gets by default.

    The contenders never set `synchronous`, so their connections run at SQLite's compiled-in
    default (FULL in the builds Python ships), which is what a fresh connection reports.
    """
    conn = sqlite3.connect(str(path))
    try:
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).upper()
        level = _SYNCHRONOUS.get(conn.execute("PRAGMA synchronous").fetchone()[0], "?")
    finally:
        conn.close()
    return {"journal_mode": mode, "synchronous": level}


def library(*names: str) -> str:
    return ", ".join(f"{name} {version(name)}" for name in names)
