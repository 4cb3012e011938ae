"""Transcript entries (the store's event shape) and the pure model-context builder.

A transcript is an append-only tree of plain dicts. Every stored event has `id` (int),
`parent_id` (int | None), `type` (`EntryType`) and `timestamp` (ISO-8601 UTC). Message events
carry chat-format fields at the top level (`role`, `content`, `tool_calls`, `tool_call_id`,
`name`, `message_id`, `metadata`); `metadata.exclude_from_context: true` shows a message to
people but never sends it to the model.

`build_model_context` turns the active path (root → leaf) into what the model sees. It is pure,
so the store, the HTTP `/context` route and the property tests all share one definition. The
validators and the builder live together because the builder's rules are stated in terms of the
fields the validators guarantee; that pairing is why this module runs past the ~400-line budget.
"""

from __future__ import annotations

import copy
import enum
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sessiongate.core.clock import ensure_utc
from sessiongate.errors import InvalidEntryError

__all__ = [
    "BRANCH_SUMMARY_PREFIX",
    "SUMMARY_PREFIX",
    "EntryType",
    "ModelContext",
    "Role",
    "build_model_context",
    "choose_compaction_cut",
    "deterministic_summary",
    "estimate_tokens",
    "is_excluded_from_context",
    "last_turn_start",
    "repair_tool_pairing",
    "select_reset_tail",
    "validate_entry",
    "validate_message",
]


class EntryType(enum.StrEnum):
    MESSAGE = "message"
    CUSTOM_MESSAGE = "custom_message"  # extension text that does enter the model context
    CUSTOM = "custom"  # extension state; never enters the model context
    COMPACTION = "compaction"
    RESET = "reset"
    BRANCH_SUMMARY = "branch_summary"
    LABEL = "label"
    MODEL_CHANGE = "model_change"
    THINKING_LEVEL_CHANGE = "thinking_level_change"
    LEAF = "leaf"  # moves the active leaf (rewind, branch switch)


class Role(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


SUMMARY_PREFIX = "[Summary of the earlier conversation]"
BRANCH_SUMMARY_PREFIX = "[Summary of a branch the conversation came back from]"
_BOUNDARIES = (EntryType.RESET, EntryType.COMPACTION)


@dataclass(frozen=True, slots=True)
class ModelContext:
    """What the next model call gets: chat-format messages plus the selected model settings."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    provider: str | None = None
    thinking_level: str | None = None
    # The reset or compaction entry the context starts from, None when it starts at the root.
    boundary_entry_id: int | None = None


# --- validation --------------------------------------------------------------------------

_MESSAGE_FIELDS = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "name", "message_id", "metadata"}
)
# Stored events carry these too; accepting them lets a loaded transcript be written back.
_EVENT_FIELDS = frozenset({"id", "parent_id", "type", "timestamp"})


def _bad(message: str) -> InvalidEntryError:
    return InvalidEntryError(message)


def validate_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """Normalise a chat-format message; raise `InvalidEntryError` saying what is wrong."""
    if not isinstance(message, Mapping):
        raise _bad("a message must be an object")
    unknown = set(message) - _MESSAGE_FIELDS - _EVENT_FIELDS
    if unknown:
        raise _bad(f"unknown message fields: {', '.join(sorted(map(str, unknown)))}")
    if message.get("type", "message") != "message":
        raise _bad(f"not a message entry: type {message.get('type')!r}")
    role = message.get("role")
    if role not in Role.__members__.values():
        raise _bad(f"unknown role {role!r}; expected user, assistant, tool or system")
    out = _event_fields(message)
    out["role"] = str(role)
    content = message.get("content")
    if content is None and role != Role.ASSISTANT:
        raise _bad(f"a {role} message needs content (a string or a list of parts)")
    out["content"] = _content("content", content)
    calls = message.get("tool_calls")
    if calls is not None:
        if role != Role.ASSISTANT:
            raise _bad("only assistant messages carry tool_calls")
        if normalised := _tool_calls(calls):
            out["tool_calls"] = normalised
    call_id = message.get("tool_call_id")
    if role == Role.TOOL:
        out["tool_call_id"] = _nonempty_str("tool_call_id", call_id)
    elif call_id is not None:
        raise _bad("only tool messages carry a tool_call_id")
    if message.get("name") is not None:
        out["name"] = _nonempty_str("name", message["name"])
    if message.get("message_id") is not None:
        out["message_id"] = _message_id(message["message_id"])
    if message.get("metadata") is not None:
        out["metadata"] = _metadata("metadata", message["metadata"])
    return out


def validate_entry(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Normalise a transcript entry of any type (messages go through `validate_message`)."""
    if not isinstance(entry, Mapping):
        raise _bad("an entry must be an object")
    try:
        kind = EntryType(str(entry.get("type")))
    except ValueError:
        raise _bad(f"unknown entry type {entry.get('type')!r}") from None
    if kind is EntryType.MESSAGE:
        return {"type": "message", **validate_message(entry)}
    spec = _ENTRY_FIELDS[kind]
    unknown = set(entry) - set(spec) - _EVENT_FIELDS
    if unknown:
        raise _bad(f"unknown {kind} fields: {', '.join(sorted(map(str, unknown)))}")
    out = {"type": kind.value, **_event_fields(entry)}
    for name, (check, default) in spec.items():
        if entry.get(name) is None:
            if default is _REQUIRED:
                raise _bad(f"a {kind} entry needs {name}")
            out[name] = default
        else:
            out[name] = check(name, entry[name])
    return out


def _event_fields(entry: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if entry.get("id") is not None:
        out["id"] = _entry_id("id", entry["id"])
    if "parent_id" in entry:
        parent = entry["parent_id"]
        out["parent_id"] = None if parent is None else _entry_id("parent_id", parent)
    if entry.get("timestamp") is not None:
        out["timestamp"] = _timestamp(entry["timestamp"])
    return out


def _timestamp(value: object) -> str:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise _bad(f"timestamp is not ISO-8601: {value!r}") from None
    elif isinstance(value, datetime):
        parsed = value
    else:
        raise _bad(f"timestamp must be ISO-8601 text, got {type(value).__name__}")
    try:
        return ensure_utc(parsed).isoformat()
    except OverflowError:
        # Year 1 at +14:00 (or 9999 at -14:00) is a valid local time with no UTC equivalent.
        raise _bad(f"timestamp is out of range in UTC: {value!s}") from None


def _entry_id(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _nonempty_str(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise _bad(f"{name} must be a non-empty string, got {value!r}")
    return value


def _str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise _bad(f"{name} must be a string, got {type(value).__name__}")
    return value


def _bool(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise _bad(f"{name} must be true or false, got {value!r}")
    return value


def _message_id(value: object) -> str:
    # Platform SDKs hand out integer message ids; the idempotency key is text.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _nonempty_str("message_id", value)


def _json(name: str, value: Any) -> Any:
    try:
        return json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError):
        raise _bad(f"{name} must be JSON data") from None


def _content(name: str, value: object) -> str | list[Any] | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _bad(f"{name} must be a string, a list of parts or null")
    for part in value:
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            raise _bad(f"each {name} part must be an object with a string type")
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            raise _bad(f"a text part of {name} needs a string text")
    parts: list[Any] = _json(name, value)
    return parts


def _tool_calls(value: object) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise _bad("tool_calls must be a list")
    out: list[dict[str, Any]] = []
    for call in value:
        if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
            raise _bad("each tool call must be an object with a function object")
        if call.get("type", "function") != "function":
            raise _bad(f"unsupported tool call type {call.get('type')!r}")
        fn = call["function"]
        args = fn.get("arguments", "{}")
        if isinstance(args, Mapping):
            args = json.dumps(_json("arguments", dict(args)), ensure_ascii=False)
        out.append(
            {
                "id": _nonempty_str("tool call id", call.get("id")),
                "type": "function",
                "function": {
                    "name": _nonempty_str("tool call function name", fn.get("name")),
                    "arguments": _str("tool call arguments", args),
                },
            }
        )
    ids = [c["id"] for c in out]
    if len(set(ids)) != len(ids):
        raise _bad("tool call ids repeat within one message")
    return out


def _metadata(name: str, value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise _bad(f"{name} must be an object with string keys")
    if "exclude_from_context" in value:
        _bool("metadata.exclude_from_context", value["exclude_from_context"])
    data: dict[str, Any] = _json(name, dict(value))
    return data


def _role_of_custom(name: str, value: object) -> str:
    if value not in (Role.USER, Role.ASSISTANT, Role.SYSTEM):
        raise _bad(f"{name} must be user, assistant or system, got {value!r}")
    return str(value)


_REQUIRED: Any = object()
_Check = Any  # (field name, raw value) -> normalised value
_ENTRY_FIELDS: dict[EntryType, dict[str, tuple[_Check, Any]]] = {
    EntryType.CUSTOM_MESSAGE: {
        "content": (_content, _REQUIRED),
        "display": (_bool, True),
        "role": (_role_of_custom, "user"),
        "metadata": (_metadata, None),
    },
    EntryType.CUSTOM: {"custom_type": (_nonempty_str, _REQUIRED), "data": (_json, None)},
    EntryType.COMPACTION: {
        "summary": (_str, _REQUIRED),
        "first_kept_entry_id": (_entry_id, None),
        "tokens_before": (_entry_id, _REQUIRED),
        "tokens_after": (_entry_id, None),
    },
    EntryType.RESET: {
        "reason": (_nonempty_str, _REQUIRED),
        "first_kept_entry_id": (_entry_id, None),
    },
    EntryType.BRANCH_SUMMARY: {
        "summary": (_str, _REQUIRED),
        "from_entry_id": (_entry_id, _REQUIRED),
    },
    EntryType.LABEL: {"target_id": (_entry_id, _REQUIRED), "label": (_str, None)},
    # `model: null` goes back to the default model.
    EntryType.MODEL_CHANGE: {"model": (_nonempty_str, None), "provider": (_str, None)},
    EntryType.THINKING_LEVEL_CHANGE: {"thinking_level": (_str, None)},
    EntryType.LEAF: {"target_id": (_entry_id, None)},
}


# --- the model context --------------------------------------------------------------------


def is_excluded_from_context(entry: Mapping[str, Any]) -> bool:
    metadata = entry.get("metadata")
    return isinstance(metadata, Mapping) and metadata.get("exclude_from_context") is True


def build_model_context(path: Sequence[Mapping[str, Any]], *, owned: bool = False) -> ModelContext:
    """The model context of the active path (root → leaf order).

    The messages share nothing mutable with `path`, unless the caller hands the path over
    (`owned`: events fresh from a read, used by nobody else): then their values are taken as
    they are instead of copied, which was most of a tool-heavy turn's context cost.

    The latest `reset` or `compaction` is the boundary. A compaction contributes its summary
    (as a user message), then the entries from its `first_kept_entry_id` up to it; a reset
    contributes the entries from its `first_kept_entry_id`, if any, up to it. Everything after
    the boundary follows. `custom` entries and excluded messages never enter. Tool calls and
    results are then paired by `repair_tool_pairing`. Model, provider and thinking level come
    from the last change entries anywhere on the path.
    """
    boundary, entries = _context_entries(path)
    messages: list[dict[str, Any]] = []
    if boundary is not None and boundary.get("type") == EntryType.COMPACTION:
        messages.append({"role": "user", "content": f"{SUMMARY_PREFIX}\n{boundary.get('summary')}"})
    copy_value = _same if owned else _copy_value
    for entry in entries:
        chat = _to_chat(entry, copy_value)
        if chat is not None:
            messages.append(chat)
    model = provider = thinking = None
    for entry in path:
        kind = entry.get("type")
        if kind == "model_change":
            model, provider = entry.get("model"), entry.get("provider")
        elif kind == "thinking_level_change":
            thinking = entry.get("thinking_level")
    return ModelContext(
        messages=_pair_tools(messages, owned=True),
        model=model,
        provider=provider,
        thinking_level=thinking,
        boundary_entry_id=boundary.get("id") if boundary is not None else None,
    )


def repair_tool_pairing(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Drop orphan tool results and unanswered tool calls (what chat APIs reject).

    A result counts only inside the unbroken run of tool messages right after the assistant
    message that made the call, answering it once. Unanswered calls are removed from their
    assistant message, which is dropped when it is then left with no content and no calls.
    """
    return _pair_tools(messages, owned=False)


def _pair_tools(messages: Sequence[Mapping[str, Any]], *, owned: bool) -> list[dict[str, Any]]:
    """`repair_tool_pairing`; `owned` messages are fresh copies already and are reused."""
    if owned and not any(m.get("role") == Role.TOOL or m.get("tool_calls") for m in messages):
        return list(messages)  # type: ignore[arg-type]  # owned means list[dict]
    out: list[dict[str, Any]] = []
    group: int | None = None  # index in `out` of the assistant whose result run is open
    answered: dict[str, bool] = {}

    def close() -> None:
        if group is None:
            return
        assistant = out[group]
        calls = [c for c in assistant["tool_calls"] if answered.get(c["id"])]
        if calls:
            assistant["tool_calls"] = calls
        elif assistant.get("content") in (None, "", []):
            del out[group]  # nothing was answered, so it is the last message in `out`
        else:
            del assistant["tool_calls"]

    # Once per message of every turn's context: `answered` is only read while `group` is set,
    # so plain messages cost a lookup or two and an append.
    for message in messages:
        if message.get("role") == Role.TOOL:
            call_id = message.get("tool_call_id")
            if group is not None and isinstance(call_id, str) and answered.get(call_id) is False:
                answered[call_id] = True
                out.append(message if owned else _copy_message(message))  # type: ignore[arg-type]
            continue
        if group is not None:
            close()
            group = None
        # Owned messages are changed in place (their `tool_calls` list replaced, never edited).
        item: dict[str, Any] = message if owned else _copy_message(message)  # type: ignore[assignment]
        calls = item.pop("tool_calls", None)
        out.append(item)
        if calls and item.get("role") == Role.ASSISTANT:
            unique: dict[str, Any] = {}
            for call in calls:
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    unique.setdefault(call["id"], call)
            if unique:
                item["tool_calls"] = list(unique.values())
                answered = dict.fromkeys(unique, False)
                group = len(out) - 1
            elif item.get("content") in (None, "", []):
                out.pop()  # calls without ids and nothing else: nothing is left of it
    close()
    return out


def select_reset_tail(path: Sequence[Mapping[str, Any]], max_messages: int = 6) -> int | None:
    """The `first_kept_entry_id` for a reset that keeps a short tail of the conversation.

    Among the last `max_messages` user/assistant messages of the current context, the id of the
    first user message (so the tail never starts mid tool exchange); None when there is none.
    """
    if max_messages <= 0:
        return None
    _, entries = _context_entries(path)
    talk = [
        e
        for e in entries
        if e.get("type") == EntryType.MESSAGE
        and e.get("role") in (Role.USER, Role.ASSISTANT)
        and not is_excluded_from_context(e)
    ]
    for entry in talk[-max_messages:]:
        if entry.get("role") == Role.USER:
            return _id(entry)
    return None


def choose_compaction_cut(path: Sequence[Mapping[str, Any]], keep_last_tokens: int) -> int | None:
    """The `first_kept_entry_id` for a compaction keeping at most `keep_last_tokens` tokens.

    The cut is the earliest entry of the current context whose suffix fits the budget and that
    is not a tool result, so a call and its results are always kept or summarised together.
    None means keep nothing but the summary. When the whole context fits, the result is its
    first entry: there is nothing to compact.
    """
    if keep_last_tokens <= 0:
        return None
    _, entries = _context_entries(path)
    total, cut = 0, None
    for entry in reversed(entries):
        chat = _to_chat(entry)
        if chat is None:
            continue
        total += estimate_tokens([chat])
        if total > keep_last_tokens:
            break
        if chat["role"] != Role.TOOL:
            cut = _id(entry)
    return cut


def last_turn_start(path: Sequence[Mapping[str, Any]]) -> int | None:
    """The id of the current context's last user message: where its newest turn starts (a
    cut there never separates a tool call from its results). None if it has none."""
    _, entries = _context_entries(path)
    for entry in reversed(entries):
        chat = _to_chat(entry)
        if chat is not None and chat["role"] == Role.USER and _id(entry) is not None:
            return _id(entry)
    return None


# Four characters per token is the usual rule of thumb for English text under BPE tokenisers;
# the per-message overhead stands for the role and the framing tokens chat APIs add.
_CHARS_PER_TOKEN = 4
_MESSAGE_OVERHEAD_CHARS = 16


def estimate_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """A cheap token estimate: characters / 4, plus a small per-message overhead.

    Text parts count their text; other parts (images, audio) and tool calls count their JSON.
    Good enough to choose a compaction cut; never a billing number.
    """
    chars = 0
    for message in messages:
        chars += _MESSAGE_OVERHEAD_CHARS + len(str(message.get("role", "")))
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                text = part.get("text") if isinstance(part, Mapping) else None
                chars += len(text) if isinstance(text, str) else len(json.dumps(part, default=str))
        if message.get("tool_calls"):
            chars += len(json.dumps(message["tool_calls"], default=str))
        chars += len(str(message.get("tool_call_id") or "")) + len(str(message.get("name") or ""))
    return -(-chars // _CHARS_PER_TOKEN)


def deterministic_summary(
    messages: Sequence[Mapping[str, Any]], *, max_lines: int = 40, line_chars: int = 160
) -> str:
    """A summary without a model (the echo agent's compaction): one bullet per user message,
    its first non-empty line capped at `line_chars`, the last `max_lines` bullets kept. Bullets
    of an earlier summary carry over, so repeated compactions keep their history."""
    lines: list[str] = []
    for message in messages:
        if message.get("role") != Role.USER:
            continue
        text = _text_of(message.get("content"))
        if text.startswith(SUMMARY_PREFIX):
            lines.extend(ln for ln in text.splitlines()[1:] if ln.startswith("- "))
            continue
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        if first:
            lines.append(
                "- " + (first if len(first) <= line_chars else first[: line_chars - 1] + "…")
            )
    kept = lines[-max_lines:] if max_lines > 0 else []
    return "\n".join(kept) if kept else "(no earlier user messages)"


def _context_entries(
    path: Sequence[Mapping[str, Any]],
) -> tuple[Mapping[str, Any] | None, list[Mapping[str, Any]]]:
    """The latest boundary and the raw entries that follow its rules (before pairing)."""
    for index in range(len(path) - 1, -1, -1):
        boundary = path[index]
        if boundary.get("type") in _BOUNDARIES:
            first_kept = boundary.get("first_kept_entry_id")
            start = next(
                (i for i in range(index) if first_kept is not None and _id(path[i]) == first_kept),
                index,
            )
            return boundary, [*path[start:index], *path[index + 1 :]]
    return None, list(path)


def _to_chat(
    entry: Mapping[str, Any], copy_value: Callable[[Any], Any] | None = None
) -> dict[str, Any] | None:
    # Called once per entry of the active path on every turn: kept to a few dict lookups.
    copy_value = copy_value or _copy_value
    kind = entry.get("type")
    if kind == "message":
        metadata = entry.get("metadata")
        if metadata is not None and is_excluded_from_context(entry):
            return None
        content = entry.get("content")
        chat = {
            "role": entry.get("role"),
            "content": content
            if content is None or content.__class__ is str
            else copy_value(content),
        }
        for name in _CHAT_EXTRAS:
            value = entry.get(name)
            if value:
                chat[name] = copy_value(value)
        return chat
    if kind == EntryType.CUSTOM_MESSAGE:
        return {"role": entry.get("role") or "user", "content": copy_value(entry.get("content"))}
    if kind == EntryType.BRANCH_SUMMARY:
        return {"role": "user", "content": f"{BRANCH_SUMMARY_PREFIX}\n{entry.get('summary')}"}
    return None


_CHAT_EXTRAS = ("tool_calls", "tool_call_id", "name")


def _copy_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy sharing nothing mutable with `message`; plain text (the common case) is immutable
    and needs no deep copy, which keeps a 10,000-entry context cheap to build."""
    return {name: _copy_value(value) for name, value in message.items()}


def _copy_value(value: Any) -> Any:
    return value if value is None or isinstance(value, (str, int)) else _copy_json(value)


def _copy_json(value: Any) -> Any:
    # Transcript values are JSON (dicts, lists, scalars): copied by hand, several times faster
    # than `copy.deepcopy`, which tool calls of every turn went through.
    cls = value.__class__
    if cls is dict:
        return {
            k: v if v is None or v.__class__ in _ATOMS else _copy_json(v) for k, v in value.items()
        }
    if cls is list:
        return [v if v is None or v.__class__ in _ATOMS else _copy_json(v) for v in value]
    if cls in _ATOMS:
        return value
    return copy.deepcopy(value)  # anything else a caller put in (a tuple, a custom object)


_ATOMS = frozenset({str, int, float, bool})


def _same(value: Any) -> Any:
    return value


def _id(entry: Mapping[str, Any]) -> int | None:
    value = entry.get("id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    return ""
