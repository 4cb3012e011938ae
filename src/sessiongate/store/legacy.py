"""Reading `sessions.json` (ours, or a legacy gateway's) without trusting it.

A malformed or hostile file is backed up beside itself and reported; it never crashes the store
and never overwrites what the database already holds.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sessiongate.core.entry import SessionEntry
from sessiongate.core.keys import parse_session_key

if TYPE_CHECKING:
    from datetime import datetime
    from pathlib import Path

__all__ = ["LegacyRead", "backup_sessions_json", "read_sessions_json"]

log = logging.getLogger(__name__)

# A routing file of more than this is not a routing file.
MAX_SESSIONS_JSON_BYTES = 512 * 1024 * 1024


@dataclass(slots=True)
class LegacyRead:
    entries: list[SessionEntry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    backup: Path | None = None


def read_sessions_json(path: Path, *, now: datetime) -> LegacyRead:
    result = LegacyRead()
    if not path.exists():
        return result
    try:
        if path.stat().st_size > MAX_SESSIONS_JSON_BYTES:
            raise ValueError("file is too large")
        data: Any = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("top level is not an object")
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        # RecursionError: a hostile file nests deeper than the parser's stack.
        result.problems.append(f"{path.name} is unreadable ({exc!s:.200}); backed up and ignored")
        result.backup = backup_sessions_json(path, now)
        return result
    for key, value in data.items():
        if key.startswith("_"):
            continue
        try:
            if not isinstance(value, dict):
                raise ValueError("entry is not an object")
            value = {**value, "session_key": value.get("session_key", key)}
            entry = SessionEntry.from_dict(value)
            if entry.session_key != key:
                raise ValueError("session_key does not match its map key")
            parse_session_key(key) if key.startswith("agent:") else _check_key(key)
        except ValueError as exc:
            result.problems.append(f"entry {key[:80]!r} skipped: {exc!s:.200}")
            continue
        result.entries.append(entry)
    if result.problems and result.backup is None:
        result.backup = backup_sessions_json(path, now)
    return result


def _check_key(key: str) -> None:
    if not key or len(key) > 4096 or any(ord(ch) < 32 for ch in key):
        raise ValueError("not a usable session key")


def backup_sessions_json(path: Path, now: datetime) -> Path | None:
    """Copy a damaged file beside itself (`sessions.json.bad-<time>`, 0600) before anything
    overwrites it; None if it could not be copied (that is logged, never fatal)."""
    target = path.with_name(f"{path.name}.bad-{now:%Y%m%dT%H%M%S}")
    try:
        shutil.copy2(path, target)
        target.chmod(0o600)
    except OSError as exc:
        log.warning("could not back up %s: %s", path, exc)
        return None
    log.warning("backed up a damaged sessions.json", extra={"backup": str(target)})
    return target
