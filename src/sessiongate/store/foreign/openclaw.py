"""Reading an OpenClaw state directory into an `ImportPlan`; nothing is written.

Layout read, per agent folder `<STATE_DIR>/agents/<agentId>/`:
- `agent/openclaw-agent.sqlite`: OpenClaw's runtime store (per-agent SQLite; routing entries
  and transcript events, read by `openclaw_db.py`);
- `sessions/sessions.json` (the legacy routing index: key -> entry, camelCase, times in epoch
  milliseconds) and `<sessionId>.jsonl` beside it (the transcript: a `session` header line,
  then entries with `id`/`parentId` forming a tree). A key the database also holds is taken
  from the database (the legacy file is what OpenClaw migrated from).
Both carry the same entry objects and the same transcript events, mapped the same way.

How it maps:
- The agent id is the key's namespace: OpenClaw keys are already `agent:<agentId>:...`; a
  legacy key without the prefix gets the prefix of the agent folder it was found in.
- Entry fields: `sessionId`, `updatedAt`, `sessionStartedAt`, `lastInteractionAt`,
  `lastActivityAt`, `archivedAt`, `pinnedAt`, `lastReadAt`, `markedUnreadAt`,
  `memoryFlushAt` (epoch ms -> UTC times), the toggles, `providerOverride` /
  `modelOverride` / `authProfileOverride`, the token counters, `compactionCount`, `label`,
  `displayName`, `subject`; `chatType` direct|group|room -> dm|group|channel.
- The whole tree is kept, with the active leaf (the last entry written, or the target of the
  latest `leaf` entry): `message` (user, assistant with its text and `toolCall` blocks as
  `tool_calls`, `toolResult` as a `tool` message with its call id), `custom_message`,
  `custom`, `compaction` (with `firstKeptEntryId`), `reset`, `branch_summary`, `label`,
  `model_change`, `thinking_level_change`; any other entry type is kept as a `custom` entry
  (`custom_type: openclaw:<type>`) so nothing of the tree is lost.
- A transcript whose header does not match its session id, or whose entry names a parent
  that does not come before it, is refused (that session and its routing entry), with the
  file and line (or database and `seq`) in the reason. A database that is not OpenClaw's
  agent schema is refused whole (see `openclaw_db.py`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sessiongate.core.entry import SessionEntry
from sessiongate.core.ids import is_safe_id
from sessiongate.errors import ForeignStoreError
from sessiongate.store.foreign.model import ForeignNode, ForeignSession, ImportPlan, Skipped
from sessiongate.store.foreign.openclaw_db import AGENT_DB_NAME, read_agent_database

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

__all__ = ["read_openclaw_state"]

_MAX_JSON_BYTES = 256 * 1024 * 1024
_CHAT_TYPES = {
    "direct": "dm",
    "dm": "dm",
    "group": "group",
    "room": "channel",
    "channel": "channel",
}
_TIMES = {
    "updatedAt": "updated_at",
    "sessionStartedAt": "session_started_at",
    "lastInteractionAt": "last_interaction_at",
    "lastActivityAt": "last_activity_at",
    "archivedAt": "archived_at",
    "pinnedAt": "pinned_at",
    "lastReadAt": "last_read_at",
    "markedUnreadAt": "marked_unread_at",
    "memoryFlushAt": "memory_flush_at",
}
_PLAIN = {
    "displayName": "display_name",
    "subject": "subject",
    "label": "label",
    "thinkingLevel": "thinking_level",
    "verboseLevel": "verbose_level",
    "reasoningLevel": "reasoning_level",
    "elevatedLevel": "elevated_level",
    "sendPolicy": "send_policy",
    "providerOverride": "provider_override",
    "modelOverride": "model_override",
    "authProfileOverride": "auth_profile_override",
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "totalTokens": "total_tokens",
    "contextTokens": "context_tokens",
    "compactionCount": "compaction_count",
    "memoryFlushCompactionCount": "memory_flush_compaction_count",
}


def read_openclaw_state(state_dir: Path) -> ImportPlan:
    """The plan of an OpenClaw state directory; `ForeignStoreError` for one that is not, or
    whose routing index is damaged (naming the file and the problem)."""
    agents_dir = state_dir / "agents"
    if not state_dir.is_dir():
        raise ForeignStoreError(f"{state_dir}: not a directory")
    if not agents_dir.is_dir():
        raise ForeignStoreError(f"{state_dir}: not an OpenClaw state directory (no agents/)")
    plan = ImportPlan("openclaw", str(state_dir.resolve()))
    found = False
    for agent_dir in sorted(p for p in agents_dir.iterdir() if p.is_dir()):
        sessions_dir = agent_dir / "sessions"
        index = sessions_dir / "sessions.json"
        database = agent_dir / "agent" / AGENT_DB_NAME
        others = sorted(
            p
            for pattern in ("*.sqlite", "*.sqlite3", "*.db")
            for p in agent_dir.rglob(pattern)
            if p != database
        )
        for other in others:
            plan.skipped.append(
                Skipped(
                    f"agents/{agent_dir.name}/{other.relative_to(agent_dir)}",
                    f"not OpenClaw's session store (that is agent/{AGENT_DB_NAME}); not read",
                )
            )
        taken: set[str] = set()
        if database.is_file():
            found = True
            taken = _read_database(plan, agent_dir.name, database)
        if index.exists():
            found = True
            _read_agent(plan, agent_dir.name, sessions_dir, index, taken)
    if not found and not plan.skipped:
        raise ForeignStoreError(
            f"{state_dir}: not an OpenClaw state directory (no agents/*/sessions/sessions.json "
            f"and no agents/*/agent/{AGENT_DB_NAME})"
        )
    return plan


def _read_database(plan: ImportPlan, agent: str, path: Path) -> set[str]:
    """Adds the database's sessions to `plan`; returns the keys it holds."""
    name = f"agents/{agent}/agent/{AGENT_DB_NAME}"
    database = read_agent_database(path, name, agent)
    keys: set[str] = set()
    for row in database.sessions:
        key = (
            row.session_key
            if row.session_key.startswith("agent:")
            else (f"agent:{database.agent_id}:{row.session_key}")
        )
        keys.add(key)
        what = f"{name}: {row.session_key[:80]!r}"
        if row.entry is None:
            plan.skipped.append(Skipped(what, row.problem or "no entry"))
            continue
        try:
            entry = _entry(key, row.entry)
        except (ValueError, TypeError) as exc:
            plan.skipped.append(Skipped(what, f"{exc!s:.200}"))
            continue
        events = ((f"seq {seq}", text) for seq, text in row.events)
        try:
            session = _tree(f"{name} (session {entry.session_id})", events, entry)
        except ForeignStoreError as exc:
            plan.skipped.append(Skipped(what, exc.message))
            continue
        plan.sessions.append(session)
        plan.routes.append(entry)
    for session_id in database.unnamed:
        plan.skipped.append(
            Skipped(f"{name}: session {session_id[:80]!r}", "no routing entry names it (no key)")
        )
    return keys


def _read_agent(
    plan: ImportPlan, agent: str, sessions_dir: Path, index: Path, taken: set[str]
) -> None:
    try:
        if index.stat().st_size > _MAX_JSON_BYTES:
            raise ValueError("the file is too large")
        data = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ForeignStoreError(f"{index}: not a readable routing index ({exc})") from exc
    if not isinstance(data, dict):
        raise ForeignStoreError(f"{index}: not an OpenClaw routing index (not an object)")
    where = f"agents/{agent}/sessions"
    named: set[str] = set()
    for raw_key, value in data.items():
        key = raw_key if raw_key.startswith("agent:") else f"agent:{agent}:{raw_key}"
        if not isinstance(value, dict):
            plan.skipped.append(Skipped(f"{where}: {raw_key[:80]!r}", "entry is not an object"))
            continue
        try:
            entry = _entry(key, value)
        except (ValueError, TypeError) as exc:
            plan.skipped.append(Skipped(f"{where}: {raw_key[:80]!r}", f"{exc!s:.200}"))
            continue
        transcript = sessions_dir / f"{entry.session_id}.jsonl"
        named.add(entry.session_id)
        if key in taken:
            plan.skipped.append(
                Skipped(
                    f"{where}: {raw_key[:80]!r}",
                    f"superseded by the same key in agent/{AGENT_DB_NAME}",
                )
            )
            continue
        try:
            session = _transcript(transcript, entry, where)
        except ForeignStoreError as exc:
            plan.skipped.append(Skipped(f"{where}: {raw_key[:80]!r}", exc.message))
            continue
        plan.sessions.append(session)
        plan.routes.append(entry)
    for path in sorted(sessions_dir.glob("*.jsonl")):
        if path.stem not in named:
            plan.skipped.append(
                Skipped(f"{where}/{path.name}", "no routing entry names it (no key)")
            )


def _ms(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{value!r} is not epoch milliseconds")
    return datetime.fromtimestamp(value / 1000, UTC)


def _entry(key: str, value: dict[str, Any]) -> SessionEntry:
    session_id = value.get("sessionId")
    if not is_safe_id(session_id):
        raise ValueError(f"unusable sessionId {session_id!r}")
    times = {ours: _ms(value.get(theirs)) for theirs, ours in _TIMES.items()}
    updated = times["updated_at"] or times["session_started_at"]
    if updated is None:
        raise ValueError("no updatedAt")
    data: dict[str, Any] = {
        "session_key": key,
        "session_id": session_id,
        "created_at": (times["session_started_at"] or updated).isoformat(),
    }
    data.update({k: v.isoformat() for k, v in times.items() if v is not None})
    data["updated_at"] = updated.isoformat()
    data.update(
        {ours: value[theirs] for theirs, ours in _PLAIN.items() if value.get(theirs) is not None}
    )
    chat_type = _CHAT_TYPES.get(str(value.get("chatType") or "direct"))
    if chat_type is not None:
        data["chat_type"] = chat_type
    platform = value.get("channel") or value.get("provider")
    if isinstance(platform, str) and platform:
        data["platform"] = platform
    return SessionEntry.from_dict(data)


def _transcript(path: Path, entry: SessionEntry, where: str) -> ForeignSession:
    name = f"{where}/{path.name}"
    if not path.exists():
        raise ForeignStoreError(f"{name}: the transcript is missing")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ForeignStoreError(f"{name}: unreadable ({exc})") from exc
    events = ((f"line {n}", line) for n, line in enumerate(lines, 1) if line.strip())
    return _tree(name, events, entry)


def _tree(name: str, events: Iterable[tuple[str, str]], entry: SessionEntry) -> ForeignSession:
    """The session of one transcript: `events` are (where, JSON text) in written order."""
    session = ForeignSession(
        session_id=entry.session_id,
        session_key=entry.session_key,
        started_at=entry.session_started_at or entry.created_at,
        origin=name,
    )
    seen: set[str] = set()
    last: str | None = None
    leaf: str | None = None
    for at, line in events:
        try:
            data = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ForeignStoreError(f"{name}: {at} is not JSON ({exc})") from exc
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise ForeignStoreError(f"{name}: {at} is not a transcript entry")
        if data["type"] == "session":
            if data.get("id") != entry.session_id:
                raise ForeignStoreError(
                    f"{name}: {at}: the header names session {data.get('id')!r}"
                )
            stamp = data.get("timestamp")
            if isinstance(stamp, str):
                try:
                    session.started_at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
                except ValueError as exc:
                    raise ForeignStoreError(f"{name}: {at}: bad timestamp ({exc})") from exc
            parent = data.get("parentSession")
            if isinstance(parent, str) and parent:
                stem = parent.rsplit("/", 1)[-1].removesuffix(".jsonl")
                session.parent_session_id = stem if is_safe_id(stem) else None
            continue
        ref, parent_ref = data.get("id"), data.get("parentId")
        if not isinstance(ref, str) or ref in seen:
            raise ForeignStoreError(f"{name}: {at}: a missing or repeated entry id")
        if parent_ref is not None and parent_ref not in seen:
            raise ForeignStoreError(f"{name}: {at}: parent {parent_ref!r} does not come before it")
        seen.add(ref)
        if data["type"] == "leaf":
            target = data.get("targetId") or data.get("leafId")
            leaf = target if target in seen else leaf
            continue
        try:
            session.nodes.append(_node(data, ref, parent_ref))
        except (ValueError, TypeError) as exc:
            raise ForeignStoreError(f"{name}: {at}: {exc!s:.200}") from exc
        last = ref
        leaf = None  # a later append moves the leaf to itself
    session.leaf = leaf or last
    return session


def _node(data: dict[str, Any], ref: str, parent: str | None) -> ForeignNode:
    kind = data["type"]
    stamp = data.get("timestamp")
    extra: dict[str, Any] = {}
    if isinstance(stamp, str):
        extra["timestamp"] = stamp.replace("Z", "+00:00")
    if kind == "message" and isinstance(data.get("message"), dict):
        message = _message(data["message"])
        if message is not None:
            return ForeignNode(ref, parent, message={**message, **extra})
        return ForeignNode(
            ref,
            parent,
            entry={
                "type": "custom",
                "custom_type": "openclaw:message",
                "data": data["message"],
                **extra,
            },
        )
    if kind == "custom_message":
        return ForeignNode(
            ref,
            parent,
            entry={
                "type": "custom_message",
                "content": _text(data.get("content")),
                "display": bool(data.get("display", True)),
                "metadata": {"custom_type": data.get("customType")},
                **extra,
            },
        )
    if kind == "custom":
        return ForeignNode(
            ref,
            parent,
            entry={
                "type": "custom",
                "custom_type": str(data.get("customType") or "openclaw"),
                "data": data.get("data"),
                **extra,
            },
        )
    if kind == "compaction":
        entry: dict[str, Any] = {
            "type": "compaction",
            "summary": str(data.get("summary") or ""),
            "tokens_before": int(data.get("tokensBefore") or 0),
            **extra,
        }
        if data.get("firstKeptEntryId"):
            entry["first_kept_entry_id"] = data["firstKeptEntryId"]
        return ForeignNode(ref, parent, entry=entry)
    if kind == "reset":
        entry = {"type": "reset", "reason": str(data.get("reason") or "reset"), **extra}
        if data.get("firstKeptEntryId"):
            entry["first_kept_entry_id"] = data["firstKeptEntryId"]
        return ForeignNode(ref, parent, entry=entry)
    if kind == "branch_summary" and data.get("fromId"):
        return ForeignNode(
            ref,
            parent,
            entry={
                "type": "branch_summary",
                "summary": str(data.get("summary") or ""),
                "from_entry_id": data["fromId"],
                **extra,
            },
        )
    if kind == "label" and data.get("targetId"):
        return ForeignNode(
            ref,
            parent,
            entry={
                "type": "label",
                "target_id": data["targetId"],
                "label": data.get("label"),
                **extra,
            },
        )
    if kind == "model_change":
        return ForeignNode(
            ref,
            parent,
            entry={
                "type": "model_change",
                "model": data.get("modelId") or data.get("model"),
                "provider": data.get("provider"),
                **extra,
            },
        )
    if kind == "thinking_level_change":
        return ForeignNode(
            ref,
            parent,
            entry={
                "type": "thinking_level_change",
                "thinking_level": data.get("thinkingLevel"),
                **extra,
            },
        )
    kept = {k: v for k, v in data.items() if k not in ("id", "parentId", "timestamp")}
    return ForeignNode(
        ref,
        parent,
        entry={"type": "custom", "custom_type": f"openclaw:{kind}", "data": kept, **extra},
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text") or ""))
            elif isinstance(block, dict) and block.get("type") == "image":
                parts.append("[image]")
        return "\n".join(parts)
    return ""


def _message(message: dict[str, Any]) -> dict[str, Any] | None:
    role = message.get("role")
    if role == "user" or role == "system":
        return {"role": role, "content": _text(message.get("content"))}
    if role == "assistant":
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        calls = [
            {
                "id": str(block.get("id")),
                "type": "function",
                "function": {
                    "name": str(block.get("name")),
                    "arguments": json.dumps(block.get("arguments") or {}),
                },
            }
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "toolCall"
        ]
        out: dict[str, Any] = {"role": "assistant", "content": _text(content)}
        if calls:
            out["tool_calls"] = calls
        meta = {k: message[k] for k in ("provider", "model", "stopReason", "usage") if k in message}
        if meta:
            out["metadata"] = {"openclaw": meta}
        return out
    if role == "toolResult":
        out = {
            "role": "tool",
            "content": _text(message.get("content")),
            "tool_call_id": str(message.get("toolCallId")),
        }
        if message.get("toolName"):
            out["name"] = str(message["toolName"])
        if message.get("isError"):
            out["metadata"] = {"openclaw": {"isError": True}}
        return out
    return None
