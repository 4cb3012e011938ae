"""`SessionEntry`: the routing record of one conversation lane (session key → session id).

The flags form a small state machine evaluated by `get_or_create_session`; its precedence
(suspended > resume_pending > policy reset > reuse) lives in `next_action` so that it is written
down exactly once.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from typing import Any

from sessiongate.core.clock import ensure_utc, isoformat
from sessiongate.core.ids import validate_session_id
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource

__all__ = [
    "INCARNATION_COUNTERS",
    "EntryAction",
    "ResumeReason",
    "SessionEntry",
    "counters_of",
    "next_action",
]

# The usage counters of one session incarnation (session id). The routing entry carries the
# current incarnation's; when a key leaves an incarnation (a reset, `/resume` of another one)
# the store saves them with it, and going back restores them: `/status` and the rows always
# show the counts of the session they name, never those of the one just left.
INCARNATION_COUNTERS: dict[str, Any] = {
    "input_tokens": 0,
    "output_tokens": 0,
    "cache_read_tokens": 0,
    "cache_write_tokens": 0,
    "total_tokens": 0,
    "context_tokens": 0,
    "estimated_cost_usd": 0.0,
    "cost_status": "unknown",
    "last_prompt_tokens": 0,
    "compaction_count": 0,
}


class ResumeReason(enum.StrEnum):
    RESTART_TIMEOUT = "restart_timeout"
    SHUTDOWN_TIMEOUT = "shutdown_timeout"
    RESTART_INTERRUPTED = "restart_interrupted"


def counters_of(entry: SessionEntry) -> dict[str, Any]:
    """The entry's incarnation counters (the keys of `INCARNATION_COUNTERS`)."""
    return {name: getattr(entry, name) for name in INCARNATION_COUNTERS}


class EntryAction(enum.StrEnum):
    """What `get_or_create_session` does with an existing entry."""

    NEW_SUSPENDED = "new_suspended"
    RESUME = "resume"
    REUSE = "reuse"


@dataclass(frozen=True, slots=True)
class SessionEntry:
    session_key: str
    session_id: str
    created_at: datetime
    updated_at: datetime
    origin: SessionSource | None = None
    display_name: str | None = None
    platform: Platform | None = None
    chat_type: ChatType = ChatType.DM
    # Token and cost counters (best effort, provider dependent).
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    total_tokens: int = 0
    context_tokens: int = 0
    estimated_cost_usd: float = 0.0
    cost_status: str = "unknown"
    last_prompt_tokens: int = 0
    # State-machine flags (spec §2).
    was_auto_reset: bool = False
    auto_reset_reason: str | None = None
    reset_had_activity: bool = False
    is_fresh_reset: bool = False
    expiry_finalized: bool = False
    suspended: bool = False
    resume_pending: bool = False
    resume_reason: str | None = None
    last_resume_marked_at: datetime | None = None
    # Freshness and read state: `updated_at` is bookkeeping, never a freshness authority.
    session_started_at: datetime | None = None
    last_interaction_at: datetime | None = None
    last_activity_at: datetime | None = None
    archived_at: datetime | None = None
    pinned_at: datetime | None = None
    last_read_at: datetime | None = None
    marked_unread_at: datetime | None = None
    label: str | None = None
    # Behaviour toggles and model selection, carried over a reset.
    thinking_level: str | None = None
    verbose_level: str | None = None
    reasoning_level: str | None = None
    elevated_level: str | None = None
    send_policy: str | None = None
    provider_override: str | None = None
    model_override: str | None = None
    auth_profile_override: str | None = None
    compaction_count: int = 0
    memory_flush_at: datetime | None = None
    memory_flush_compaction_count: int | None = None
    subject: str | None = None
    incognito: bool = False
    forked_from_parent: bool = False
    parent_session_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def archived(self) -> bool:
        return self.archived_at is not None

    @property
    def pinned(self) -> bool:
        return self.pinned_at is not None

    @property
    def unread(self) -> bool:
        # Never-read sessions are not unread, so an upgrade does not light everything up.
        if self.marked_unread_at is not None:
            return True
        if self.last_read_at is None or self.last_activity_at is None:
            return False
        return self.last_activity_at > self.last_read_at

    def evolve(self, **changes: Any) -> SessionEntry:
        """A copy with `changes` applied (a faster `dataclasses.replace`: no `__init__` pass,
        which matters on the per-message path)."""
        unknown = changes.keys() - _FIELD_SET
        if unknown:
            raise TypeError(f"unknown SessionEntry fields: {sorted(unknown)}")
        new = object.__new__(SessionEntry)
        for name in _FIELD_NAMES:
            object.__setattr__(new, name, changes[name] if name in changes else getattr(self, name))
        return new

    def to_dict(self, *, compact: bool = False) -> dict[str, Any]:
        """A JSON-ready dict; `compact` leaves out fields at their default (the store's rows,
        where most of ~60 fields are defaults, stay small enough to live in their page).

        Written for speed: every write of a routing row runs it (a new conversation's first
        turn among them). Defaults come from a precomputed table, and an instant already
        formatted is not formatted again (`clock.isoformat`)."""
        out: dict[str, Any] = {}
        for name, default in _FIELD_DEFAULTS:
            value = getattr(self, name)
            if compact and (value is default or value == default):
                continue
            if value is None or value.__class__ in _PLAIN:
                out[name] = value
                continue
            if isinstance(value, datetime):
                value = isoformat(value)
            elif isinstance(value, SessionSource):
                value = _compact_source_dict(value) if compact else _source_dict(value)
            elif isinstance(value, (Platform, ChatType)):
                value = str(value)
            elif isinstance(value, dict):
                value = dict(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SessionEntry:
        """Load a stored entry; ids with path tricks and wrong types raise `ValueError`."""
        if not isinstance(data, Mapping):
            raise ValueError("a session entry must be an object")
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data or data[f.name] is None:
                continue
            kwargs[f.name] = _load_field(f.name, _FIELD_KINDS.get(f.name, "str"), data[f.name])
        for required in ("session_key", "session_id", "created_at", "updated_at"):
            if required not in kwargs:
                raise ValueError(f"session entry lacks {required}")
        validate_session_id(kwargs["session_id"])
        return cls(**kwargs)


@functools.lru_cache(maxsize=1024)
def _source_dict(source: SessionSource) -> dict[str, Any]:
    # Every message re-serialises the lane's origin; sources repeat, so cache the dict. The
    # cached dict is only ever read (callers copy it into their own structures via json).
    return source.to_dict()


@functools.lru_cache(maxsize=1024)
def _compact_source_dict(source: SessionSource) -> dict[str, Any]:
    # One pass over the fields, not `to_dict` and a filter of it: a new conversation's source
    # is always a miss of this cache.
    out: dict[str, Any] = {}
    for name in _SOURCE_FIELD_NAMES:
        value = getattr(source, name)
        if value is None or value is False:
            continue
        out[name] = str(value) if isinstance(value, (Platform, ChatType)) else value
    return out


_SOURCE_FIELD_NAMES = tuple(f.name for f in fields(SessionSource))


def next_action(entry: SessionEntry) -> EntryAction:
    """The precedence of spec §2, in one place."""
    if entry.suspended:
        return EntryAction.NEW_SUSPENDED
    if entry.resume_pending:
        return EntryAction.RESUME
    return EntryAction.REUSE


_FIELD_NAMES = tuple(f.name for f in fields(SessionEntry))
_FIELD_SET = frozenset(_FIELD_NAMES)
_REQUIRED = frozenset({"session_key", "session_id", "created_at", "updated_at"})
_NO_DEFAULT = object()
_DEFAULTS: dict[str, Any] = {}
for _f in fields(SessionEntry):
    if _f.default is not MISSING:
        _DEFAULTS[_f.name] = _f.default
    elif _f.default_factory is not MISSING:
        _DEFAULTS[_f.name] = _f.default_factory()
_PLAIN = (str, int, float, bool)
# (name, default) in field order; a required field gets a default nothing equals, so `compact`
# always keeps it.
_FIELD_DEFAULTS: tuple[tuple[str, Any], ...] = tuple(
    (name, _NO_DEFAULT if name in _REQUIRED else _DEFAULTS.get(name, _NO_DEFAULT))
    for name in _FIELD_NAMES
)
_FIELD_KINDS: dict[str, str] = {}
for _f in fields(SessionEntry):
    _t = str(_f.type)
    if "datetime" in _t:
        _FIELD_KINDS[_f.name] = "datetime"
    elif _t.startswith("bool"):
        _FIELD_KINDS[_f.name] = "bool"
    elif _t.startswith("int") or _t == "int | None":
        _FIELD_KINDS[_f.name] = "int"
    elif _t.startswith("float"):
        _FIELD_KINDS[_f.name] = "float"
_FIELD_KINDS.update(origin="source", platform="platform", chat_type="chat_type", extra="dict")


def _load_field(name: str, kind: str, value: Any) -> Any:
    try:
        if kind == "datetime":
            if not isinstance(value, str):
                raise TypeError
            return ensure_utc(datetime.fromisoformat(value))
        if kind == "bool":
            if not isinstance(value, bool):
                raise TypeError
            return value
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError
            return value
        if kind == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError
            return float(value)
        if kind == "source":
            return SessionSource.from_dict(value)
        if kind == "platform":
            return Platform(value)
        if kind == "chat_type":
            return ChatType.parse(value)
        if kind == "dict":
            if not isinstance(value, dict):
                raise TypeError
            return dict(value)
        if not isinstance(value, str):
            raise TypeError
        # A lone surrogate is valid in a Python str (and in JSON) but has no UTF-8 form, so
        # the entry could never be stored: refuse it here, not at the database bind.
        value.encode("utf-8")
        return value
    except (TypeError, ValueError, OverflowError) as exc:
        # OverflowError: valid ISO text such as year 1 at +14:00 has no UTC equivalent.
        raise ValueError(f"session entry field {name!r} has an invalid value: {value!r}") from exc
