"""What an importer reads out of another system's home, before anything is written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime

    from sessiongate.core.entry import SessionEntry

__all__ = ["ForeignNode", "ForeignSession", "ImportPlan", "Skipped"]


@dataclass(slots=True)
class ForeignNode:
    """One transcript entry: `ref` is the source's own id, `parent` its parent's ref (None:
    the root). `message` is a chat message (`role`, `content`, ...) or, with `entry`, any
    other tree entry (`type` and its fields; entry ids it names are refs, mapped on write)."""

    ref: str
    parent: str | None
    message: dict[str, Any] | None = None
    entry: dict[str, Any] | None = None


@dataclass(slots=True)
class ForeignSession:
    session_id: str
    session_key: str | None
    started_at: datetime
    nodes: list[ForeignNode] = field(default_factory=list)
    # The ref of the active leaf; None: the last node written.
    leaf: str | None = None
    parent_session_id: str | None = None
    ended_at: datetime | None = None
    end_reason: str | None = None
    # Usage counters of an incarnation that is not its key's current one (`save_counters`).
    counters: dict[str, Any] | None = None
    # Where it came from, for messages ("state.db", "sessions/<id>.jsonl").
    origin: str = ""


@dataclass(slots=True)
class Skipped:
    what: str
    why: str


@dataclass(slots=True)
class ImportPlan:
    source: str  # "hermes" | "openclaw"
    home: str
    sessions: list[ForeignSession] = field(default_factory=list)
    routes: list[SessionEntry] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
