"""Reading a Hermes home (`HERMES_HOME`) into an `ImportPlan`; nothing is written.

What is read:
- `state.db` (`sessions`, `messages`; the `gateway_routing` table where present). Its FTS
  tables are ignored: the store indexes what it imports itself.
- `sessions/sessions.json`, the legacy routing index: its entries fill in keys that
  `gateway_routing` lacks (as Hermes itself reads them).
- `sessions/<session_id>.jsonl`, the legacy transcripts, for a routed session with no
  database row.

How it maps: keys and session ids are kept (Hermes keys are the spec's keys). Every session
row of a key is imported, ended ones with their end, so `/resume` lists them; a key's current
incarnation is the one its routing entry names, and the others keep their usage counters.
Messages become a tree in id order: live rows (`active = 1`) form the active path; rows a
rewind soft-deleted (`active = 0`, `compacted = 0`) hang as a side branch from where they
were taken back; rows a compaction archived (`compacted = 1`) stay on the path before a
`reset` boundary, so the model context is the compacted set, as Hermes loads it. Tool calls
and results keep their ids (`tool_calls`, `tool_call_id`). Routing entries keep their flags
(`suspended`, `resume_pending` with its reason) and counters; when the entry's counters are
zero the session row's are used, and a session row marked `archived` archives its lane.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sessiongate.core.entry import SessionEntry
from sessiongate.errors import ForeignStoreError
from sessiongate.store.foreign.model import ForeignNode, ForeignSession, ImportPlan, Skipped
from sessiongate.store.sqlite.foreign import read_foreign_tables

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["read_hermes_home"]

_SESSION_COLUMNS = {"id", "source", "session_key", "started_at", "ended_at", "end_reason"}
_MESSAGE_COLUMNS = {"id", "session_id", "role", "content", "tool_call_id", "tool_calls"}
_ROUTING_COLUMNS = {"session_key", "entry_json", "updated_at"}
_ROLES = {"user", "assistant", "tool", "system"}
_COUNTERS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
_MAX_JSON_BYTES = 256 * 1024 * 1024


def read_hermes_home(home: Path) -> ImportPlan:
    """The plan of a Hermes home; `ForeignStoreError` for a home that is not one, or whose
    database or routing index is damaged (naming the file and the problem)."""
    if not home.is_dir():
        raise ForeignStoreError(f"{home}: not a directory")
    db_path = home / "state.db"
    sessions_dir = home / "sessions"
    index_path = sessions_dir / "sessions.json"
    if not db_path.exists() and not index_path.exists():
        raise ForeignStoreError(
            f"{home}: not a Hermes home (neither state.db nor sessions/sessions.json is there)"
        )
    plan = ImportPlan("hermes", str(home.resolve()))
    tables: dict[str, list[dict[str, Any]]] = {"sessions": [], "messages": []}
    if db_path.exists():
        tables = read_foreign_tables(
            db_path,
            {"sessions": _SESSION_COLUMNS, "messages": _MESSAGE_COLUMNS},
            {"gateway_routing": _ROUTING_COLUMNS},
            what="a Hermes state database",
        )
    raw_routes = _routing_entries(tables.get("gateway_routing", []), index_path)
    by_session: dict[str, list[dict[str, Any]]] = {}
    for message in tables["messages"]:
        by_session.setdefault(str(message["session_id"]), []).append(message)
    rows = {str(r["id"]): r for r in tables["sessions"]}
    routes: dict[str, SessionEntry] = {}
    for key, data in raw_routes.items():
        try:
            routes[key] = _entry(data, rows.get(str(data.get("session_id"))))
        except ValueError as exc:
            plan.skipped.append(Skipped(f"route {key[:80]!r}", f"{exc!s:.200}"))
    current = {entry.session_id for entry in routes.values()}
    for session_id, row in rows.items():
        messages = sorted(by_session.get(session_id, []), key=lambda m: int(m["id"]))
        plan.sessions.append(_session(row, messages, current=session_id in current))
    for entry in routes.values():
        if entry.session_id in rows:
            continue
        legacy = sessions_dir / f"{entry.session_id}.jsonl"
        try:
            plan.sessions.append(_legacy_session(legacy, entry))
        except ForeignStoreError as exc:
            plan.skipped.append(Skipped(f"route {entry.session_key[:80]!r}", exc.message))
            continue
    plan.routes = list(routes.values())
    known = {s.session_id for s in plan.sessions}
    if sessions_dir.is_dir():
        for path in sorted(sessions_dir.glob("*.jsonl")):
            if path.stem not in known:
                plan.skipped.append(
                    Skipped(f"sessions/{path.name}", "no routing entry names it (no key)")
                )
    return plan


def _routing_entries(rows: list[dict[str, Any]], index_path: Path) -> dict[str, dict[str, Any]]:
    """Key -> entry dict: the `gateway_routing` table first (the newest row of a key), then
    `sessions.json` for the keys the table lacks."""
    found: dict[str, tuple[float, dict[str, Any]]] = {}
    for row in rows:
        try:
            data = json.loads(row["entry_json"])
        except (TypeError, ValueError) as exc:
            raise ForeignStoreError(
                f"state.db: gateway_routing row {row['session_key']!r} is not JSON ({exc})"
            ) from exc
        if not isinstance(data, dict):
            continue
        at = float(row["updated_at"] or 0)
        key = str(row["session_key"])
        if key not in found or found[key][0] < at:
            found[key] = (at, data)
    out = {key: data for key, (_, data) in found.items()}
    if index_path.exists():
        try:
            if index_path.stat().st_size > _MAX_JSON_BYTES:
                raise ValueError("the file is too large")
            index = json.loads(index_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
            raise ForeignStoreError(f"{index_path}: not a readable routing index ({exc})") from exc
        if not isinstance(index, dict):
            raise ForeignStoreError(f"{index_path}: not a Hermes routing index (not an object)")
        for key, value in index.items():
            if key.startswith("_") or not isinstance(value, dict) or key in out:
                continue
            out[key] = {**value, "session_key": value.get("session_key", key)}
    return out


def _entry(data: dict[str, Any], row: dict[str, Any] | None) -> SessionEntry:
    data = dict(data)
    override = data.get("model_override")
    if isinstance(override, dict):
        data["model_override"] = override.get("model")
        data["provider_override"] = override.get("provider")
    entry = SessionEntry.from_dict(data)
    if row is not None and not any(getattr(entry, name) for name in _COUNTERS):
        counters: dict[str, Any] = {name: int(row.get(name) or 0) for name in _COUNTERS}
        counters["total_tokens"] = counters["input_tokens"] + counters["output_tokens"]
        if row.get("estimated_cost_usd") is not None:
            counters["estimated_cost_usd"] = float(row["estimated_cost_usd"])
        entry = entry.evolve(**counters)
    if row is not None and row.get("archived") and entry.archived_at is None:
        entry = entry.evolve(archived_at=entry.updated_at, pinned_at=None)
    return entry


def _when(value: Any) -> datetime | None:
    if value is None:
        return None
    return datetime.fromtimestamp(float(value), UTC)


def _session(
    row: dict[str, Any], messages: list[dict[str, Any]], *, current: bool
) -> ForeignSession:
    started = _when(row["started_at"]) or datetime.fromtimestamp(0, UTC)
    session = ForeignSession(
        session_id=str(row["id"]),
        session_key=row["session_key"],
        started_at=started,
        parent_session_id=row.get("parent_session_id"),
        ended_at=_when(row.get("ended_at")),
        end_reason=row.get("end_reason"),
        origin="state.db",
    )
    if not current:
        counters = {name: int(row.get(name) or 0) for name in _COUNTERS}
        counters["total_tokens"] = counters["input_tokens"] + counters["output_tokens"]
        session.counters = counters
    path: str | None = None  # the last node on the active path
    previous_rewound: str | None = None
    compacted_seen = boundary = False
    for message in messages:
        node = _message_node(message)
        if node is None:
            continue
        active = message.get("active")
        compacted = bool(message.get("compacted"))
        if active in (0, False) and not compacted:
            # Taken back by a rewind: a side branch from where it was taken back.
            node.parent = previous_rewound or path
            previous_rewound = node.ref
            session.nodes.append(node)
            continue
        previous_rewound = None
        if compacted:
            compacted_seen = True
        elif compacted_seen and not boundary:
            reset = ForeignNode(
                f"reset-{node.ref}", path, entry={"type": "reset", "reason": "hermes_compaction"}
            )
            session.nodes.append(reset)
            path = reset.ref
            boundary = True
        node.parent = path
        path = node.ref
        session.nodes.append(node)
    session.leaf = path
    return session


def _message_node(message: dict[str, Any]) -> ForeignNode | None:
    role = str(message.get("role") or "")
    if role not in _ROLES:
        return None
    out: dict[str, Any] = {"role": role, "content": message.get("content")}
    if message.get("tool_calls"):
        try:
            out["tool_calls"] = json.loads(message["tool_calls"])
        except (TypeError, ValueError):
            out["tool_calls"] = None
    if message.get("tool_call_id"):
        out["tool_call_id"] = str(message["tool_call_id"])
    if message.get("tool_name"):
        out["name"] = str(message["tool_name"])
    stamp = _when(message.get("timestamp"))
    if stamp is not None:
        out["timestamp"] = stamp.isoformat()
    extra = {
        name: message[name]
        for name in ("platform_message_id", "finish_reason", "reasoning", "token_count")
        if message.get(name) is not None
    }
    if extra:
        out["metadata"] = {"hermes": extra}
    if out["content"] is None and not out.get("tool_calls"):
        out["content"] = ""
    return ForeignNode(
        f"m{message['id']}", None, message={k: v for k, v in out.items() if v is not None}
    )


def _legacy_session(path: Path, entry: SessionEntry) -> ForeignSession:
    if not path.exists():
        raise ForeignStoreError(f"{path.name}: no database row and no legacy transcript")
    session = ForeignSession(
        session_id=entry.session_id,
        session_key=entry.session_key,
        started_at=entry.created_at,
        origin=f"sessions/{path.name}",
    )
    previous: str | None = None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ForeignStoreError(f"{path.name}: unreadable ({exc})") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise ForeignStoreError(f"{path.name}: line {number} is not JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise ForeignStoreError(f"{path.name}: line {number} is not an object")
        if data.get("role") not in _ROLES:
            continue
        message: dict[str, Any] = {"role": data["role"], "content": data.get("content") or ""}
        for name in ("tool_calls", "tool_call_id", "name"):
            if data.get(name) is not None:
                message[name] = data[name]
        stamp = data.get("timestamp")
        if isinstance(stamp, str):
            message["timestamp"] = stamp
        ref = f"l{number}"
        session.nodes.append(ForeignNode(ref, previous, message=message))
        previous = ref
    session.leaf = previous
    return session
