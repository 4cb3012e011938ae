"""Reading one OpenClaw per-agent SQLite database (its runtime session store); nothing is
written and nothing of the database is changed (it is opened read-only).

Where it lives: `<STATE_DIR>/agents/<agentId>/agent/openclaw-agent.sqlite`. The tables read
(OpenClaw's agent schema, version 1):
- `schema_meta`: the row `meta_key = 'primary'` names the database's `role` (`agent`) and
  its owner `agent_id`;
- `session_entries(session_key, session_id, entry_json, updated_at)`: the routing entries, one
  `SessionEntry` as JSON per key (the same camelCase object as a `sessions.json` value);
- `sessions(session_id, session_key, updated_at, model_provider, model, ...)`: the typed
  columns of each session, which take precedence over the JSON's copies;
- `transcript_events(session_id, seq, event_json, created_at)`: each session's transcript,
  one event per row in `seq` order (the same events as a JSONL transcript's lines: a
  `session` header, then entries with `id` / `parentId`).

A file that is not a SQLite database, or whose schema lacks any of these tables or columns,
or whose owner row names another role or agent, is refused whole, naming the file and what
is wrong. The mapping to sessiongate's model lives in `openclaw.py`.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sessiongate.errors import ForeignStoreError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["AGENT_DB_NAME", "AgentDatabase", "AgentDbSession", "read_agent_database"]

AGENT_DB_NAME = "openclaw-agent.sqlite"
_SCHEMA_VERSION = 1
_REQUIRED: dict[str, tuple[str, ...]] = {
    "schema_meta": ("meta_key", "role", "agent_id"),
    "sessions": ("session_id", "session_key", "updated_at", "model_provider", "model"),
    "session_entries": ("session_key", "session_id", "entry_json", "updated_at"),
    "transcript_events": ("session_id", "seq", "event_json", "created_at"),
}


@dataclass(slots=True)
class AgentDbSession:
    """One routing entry of the database with its transcript rows: `entry` is the parsed
    `entry_json` (None, with `problem`, when it is not a JSON object); `events` are
    `(seq, event_json)` in order."""

    session_key: str
    session_id: str
    entry: dict[str, Any] | None
    problem: str | None = None
    events: list[tuple[int, str]] = field(default_factory=list)


@dataclass(slots=True)
class AgentDatabase:
    agent_id: str
    sessions: list[AgentDbSession] = field(default_factory=list)
    # Session ids with transcript rows that no routing entry names.
    unnamed: list[str] = field(default_factory=list)


def read_agent_database(path: Path, name: str, folder_agent: str) -> AgentDatabase:
    """The sessions of the agent database at `path` (`name`: how messages call it), read in
    one snapshot; `ForeignStoreError` for a file that is not one (see the module doc)."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ForeignStoreError(f"{name}: cannot be opened ({exc})") from exc
    try:
        conn.execute("BEGIN")
        return _read(conn, name, folder_agent)
    except sqlite3.Error as exc:
        raise ForeignStoreError(f"{name}: not a readable SQLite database ({exc})") from exc
    finally:
        conn.close()


def _read(conn: sqlite3.Connection, name: str, folder_agent: str) -> AgentDatabase:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > _SCHEMA_VERSION:
        raise ForeignStoreError(
            f"{name}: OpenClaw agent schema version {version}; this importer reads version "
            f"{_SCHEMA_VERSION}"
        )
    missing: list[str] = []
    for table, columns in _REQUIRED.items():
        present = {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}
        if not present:
            missing.append(f"table {table}")
            continue
        missing.extend(f"column {table}.{c}" for c in columns if c not in present)
    if missing:
        raise ForeignStoreError(
            f"{name}: not an OpenClaw agent database (missing {', '.join(missing)})"
        )
    owner = conn.execute(
        "SELECT role, agent_id FROM schema_meta WHERE meta_key = 'primary'"
    ).fetchone()
    if owner is None:
        raise ForeignStoreError(f"{name}: not an OpenClaw agent database (no schema_meta owner)")
    role, agent_id = owner
    if role != "agent":
        raise ForeignStoreError(f"{name}: schema role {role!r}, not an agent database")
    if not isinstance(agent_id, str) or agent_id.strip().lower() != folder_agent.lower():
        raise ForeignStoreError(
            f"{name}: belongs to agent {agent_id!r}, found in the folder of {folder_agent!r}"
        )
    database = AgentDatabase(agent_id.strip().lower())
    events: dict[str, list[tuple[int, str]]] = {}
    for session_id, seq, event_json in conn.execute(
        "SELECT session_id, seq, event_json FROM transcript_events ORDER BY session_id, seq"
    ):
        events.setdefault(str(session_id), []).append((int(seq), str(event_json)))
    named: set[str] = set()
    rows = conn.execute(
        "SELECT se.session_key, se.session_id, se.entry_json, se.updated_at,"
        " s.updated_at, s.model_provider, s.model"
        " FROM session_entries AS se LEFT JOIN sessions AS s ON s.session_id = se.session_id"
        " ORDER BY se.session_key"
    )
    for key, session_id, entry_json, entry_updated, updated, provider, model in rows:
        session = AgentDbSession(str(key), str(session_id), None)
        named.add(session.session_id)
        try:
            entry = json.loads(entry_json) if isinstance(entry_json, str) else None
        except (ValueError, RecursionError) as exc:
            entry = None
            session.problem = f"entry_json is not JSON ({exc!s:.120})"
        if entry is not None and not isinstance(entry, dict):
            entry = None
        if entry is None:
            session.problem = session.problem or "entry_json is not a JSON object"
        else:
            # The typed columns win over the JSON's copies, as OpenClaw reads them.
            entry["sessionId"] = session.session_id
            stamp = updated if isinstance(updated, int) else entry_updated
            if isinstance(stamp, int) and not isinstance(stamp, bool):
                entry["updatedAt"] = stamp
            if isinstance(provider, str) and provider.strip():
                entry["modelProvider"] = provider.strip()
            if isinstance(model, str) and model.strip():
                entry["model"] = model.strip()
        session.entry = entry
        session.events = events.get(session.session_id, [])
        database.sessions.append(session)
    database.unnamed = sorted(set(events) - named)
    return database
