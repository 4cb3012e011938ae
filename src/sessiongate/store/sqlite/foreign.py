"""Reading another system's SQLite file for an import (`store/foreign/`), read-only.

The file is opened with `mode=ro` (the other system may still be running on it: its WAL
commits are seen, nothing is written), its schema is checked against what the importer
needs, and the wanted tables come back as plain rows. A file that is not SQLite, is damaged,
or lacks a needed table or column raises `ForeignStoreError` naming the file and the problem.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from sessiongate.errors import ForeignStoreError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = ["read_foreign_tables"]


def read_foreign_tables(
    path: Path,
    required: Mapping[str, set[str]],
    optional: Mapping[str, set[str]] | None = None,
    *,
    what: str,
) -> dict[str, list[dict[str, Any]]]:
    """Every row of the `required` tables (each must have at least its listed columns) and of
    the `optional` ones that exist, as dicts; `what` names the expected kind of file in
    messages ("a Hermes state database")."""
    optional = optional or {}
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    except sqlite3.Error as exc:
        raise ForeignStoreError(f"{path}: cannot open it as {what}: {exc}") from exc
    try:
        conn.row_factory = sqlite3.Row
        try:
            names = {
                str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            problem = conn.execute("PRAGMA quick_check").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise ForeignStoreError(f"{path}: not {what} ({exc})") from exc
        if problem != "ok":
            raise ForeignStoreError(f"{path}: the file is damaged ({problem})")
        out: dict[str, list[dict[str, Any]]] = {}
        for table, columns in {**optional, **required}.items():
            if table not in names:
                if table in required:
                    raise ForeignStoreError(f"{path}: not {what} (it has no {table} table)")
                continue
            have = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({_quoted(table)})")}
            missing = columns - have
            if missing:
                raise ForeignStoreError(
                    f"{path}: not {what} (table {table} lacks {', '.join(sorted(missing))})"
                )
            rows = conn.execute(f"SELECT * FROM {_quoted(table)}")  # noqa: S608
            out[table] = [dict(row) for row in rows]
        return out
    except sqlite3.DatabaseError as exc:
        raise ForeignStoreError(f"{path}: unreadable ({exc})") from exc
    finally:
        conn.close()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
