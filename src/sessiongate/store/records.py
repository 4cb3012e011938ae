"""The values that cross the storage seam: the rows a backend returns and the codecs of columns.

Every backend (`sqlite/`, `postgres/`) returns these, so `SessionStore` and `LaneStore` never
see a driver's row type. Times cross as integer microseconds since the epoch (exact and
sortable) and JSON payloads as text; each backend maps them to its own column types.
"""

from __future__ import annotations

import enum
import functools
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sessiongate.core.entry import SessionEntry
from sessiongate.core.jsontext import json_encoder
from sessiongate.errors import StaleWriteError

__all__ = [
    "TRANSITIONS",
    "WHY_NOT",
    "DeliveryRow",
    "DeliveryStatus",
    "EntryRecord",
    "EntryRow",
    "InboxKind",
    "InboxRow",
    "InboxState",
    "JobRow",
    "JobRunRow",
    "OutboxRow",
    "PairingRow",
    "PathMessageRow",
    "SeenRow",
    "SessionRow",
    "TakeoverRow",
    "TurnRow",
    "TurnState",
    "decoded_entry",
    "dumps",
    "from_us",
    "iso_from_us",
    "loads",
    "merged_slot",
    "refused_turn",
    "remember_entry",
    "row_to_event",
    "row_to_message",
    "to_us",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(value: datetime) -> int:
    """Aware datetime → integer microseconds since the epoch (exact, sortable)."""
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return datetime.fromtimestamp(value // 1_000_000, UTC).replace(microsecond=value % 1_000_000)


@functools.lru_cache(maxsize=4096)
def _iso_second(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def iso_from_us(value: int) -> str:
    """Same text as `from_us(value).isoformat()`, without building a datetime per row.

    Transcript loads format one timestamp per message; consecutive messages share a second.
    """
    seconds, micros = divmod(value, 1_000_000)
    base = _iso_second(seconds)
    return f"{base}.{micros:06d}+00:00" if micros else f"{base}+00:00"


# `json.dumps` with any non-default option builds a new encoder per call, which was a third of
# the cost of serialising a routing row, and so does `JSONEncoder.encode` (about half of a
# small row's 4 µs): the same text from one C encoder made once. What is stored is plain data
# (callers' JSON is validated, and so copied, before it gets here), so no cycle check.
_ENCODE = json_encoder(separators=(",", ":"))


def dumps(value: Any) -> str:
    return _ENCODE(value)


def loads(text: str) -> Any:
    return json.loads(text)


@dataclass(frozen=True, slots=True)
class SessionRow:
    sid: int
    session_id: str
    session_key: str | None
    parent_session_id: str | None
    started_at: int
    ended_at: int | None
    end_reason: str | None
    leaf_id: int | None
    leaf_depth: int
    leaf_mdepth: int
    generation: int
    header: str


@dataclass(frozen=True, slots=True)
class EntryRecord:
    type: str
    role: str | None
    content: str | None
    payload: dict[str, Any] | None
    ts: int
    idem: str | None = None

    @property
    def is_message(self) -> bool:
        return self.type == "message"


class InboxKind(enum.StrEnum):
    SLOT = "slot"  # follow-ups, merged while they wait
    QUEUED = "queued"  # `/queue` items and system events: one turn each


class InboxState(enum.StrEnum):
    PENDING = "pending"
    CLAIMED = "claimed"


@dataclass(frozen=True, slots=True)
class InboxRow:
    id: int
    session_key: str
    kind: InboxKind
    state: InboxState
    turn_id: int | None
    text: str
    # One part per merged message: {"text", "user_id", "user_name"} so a shared session can
    # prefix each part with its own sender instead of attributing a burst to the last one.
    parts: list[dict[str, Any]]
    media: list[str]
    message_id: str | None
    message_ids: list[str]
    source: dict[str, Any]
    message_type: str
    reply_to: str | None
    event_kind: str | None
    internal: bool
    accepted_at: int
    updated_at: int


def merged_slot(
    slot: InboxRow,
    *,
    part: dict[str, Any],
    media: list[str],
    message_id: str | None,
    source: dict[str, Any],
    message_type: str,
    reply_to: str | None,
    at: int,
) -> tuple[Any, ...]:
    """The slot's new columns after one follow-up merges into it, in `UPDATE` order (text,
    parts, media, message id, message ids, source, type, reply-to, updated at, id): text joined
    with a newline, parts and media accumulated, the newest message id kept (DESIGN decision 3:
    a merge never overwrites). One rule for every backend."""
    ids = [*slot.message_ids, message_id] if message_id else slot.message_ids
    return (
        f"{slot.text}\n{part['text']}",
        dumps([*slot.parts, part]),
        dumps([*slot.media, *media]),
        message_id or slot.message_id,
        dumps(ids),
        dumps(source),
        message_type,
        reply_to or slot.reply_to,
        at,
        slot.id,
    )


@dataclass(frozen=True, slots=True)
class SeenRow:
    platform: str
    chat_id: str
    message_id: str
    # The scope beyond (platform, chat, id): the lane and the sender ('' when the source has
    # none). Two messages are the same message only when all five agree.
    session_key: str
    sender_id: str
    # A fingerprint of the text and media (None for records older than the fingerprint): a
    # reused id whose content differs is a conflict, not a redelivery.
    content_hash: str | None
    session_id: str | None
    inbox_id: int | None
    turn_id: int | None
    status: str
    reply: str | None
    seen_at: int


class TurnState(enum.StrEnum):
    # Claimed but not running: a turn waiting to be resumed after a restart or drain timeout.
    ACCEPTED = "accepted"
    RUNNING = "running"
    REPLIED = "replied"  # outcome committed (transcript rows written), not yet delivered
    DELIVERED = "delivered"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


# The one transition table. RUNNING -> ACCEPTED is the crash / drain-timeout path: the turn keeps
# its inbox row and is resumed (attempt + 1) instead of being lost or started afresh.
TRANSITIONS: dict[TurnState, frozenset[TurnState]] = {
    TurnState.ACCEPTED: frozenset({TurnState.RUNNING, TurnState.FAILED, TurnState.INTERRUPTED}),
    TurnState.RUNNING: frozenset(
        {TurnState.REPLIED, TurnState.FAILED, TurnState.INTERRUPTED, TurnState.ACCEPTED}
    ),
    TurnState.REPLIED: frozenset({TurnState.DELIVERED}),
    TurnState.DELIVERED: frozenset(),
    TurnState.FAILED: frozenset(),
    TurnState.INTERRUPTED: frozenset(),
}

WHY_NOT: dict[TurnState, str] = {
    TurnState.ACCEPTED: "it is waiting to be resumed",
    TurnState.RUNNING: "it is running",
    TurnState.REPLIED: "its reply is committed and only delivery remains",
    TurnState.DELIVERED: "it is finished and delivered",
    TurnState.FAILED: "it has failed",
    TurnState.INTERRUPTED: "it was interrupted",
}


def refused_turn(
    turn_id: int, to: TurnState, allowed: list[str], state: str | None
) -> StaleWriteError:
    """The error of a transition the journal refused; `state` is the turn's (None: no turn)."""
    if state is None:
        return StaleWriteError(f"no turn {turn_id}", turn_id=turn_id, expected=None)
    current = TurnState(state)
    return StaleWriteError(
        f"turn {turn_id} cannot become {to}: {WHY_NOT[current]}",
        turn_id=turn_id,
        expected=allowed,
        state=str(current),
    )


@dataclass(frozen=True, slots=True)
class TurnRow:
    id: int
    session_key: str
    session_id: str
    inbox_id: int | None
    state: TurnState
    attempt: int
    resumes: int
    source: dict[str, Any]
    reply: str | None
    error: str | None
    accepted_at: int
    started_at: int | None
    finished_at: int | None
    delivered_at: int | None


class EntryRow(NamedTuple):
    """One transcript entry as either backend reads it (the `entries` table, in this column
    order). A tuple for the backends' sake (they build it from a driver row in one call);
    code above the seam reads it by field name only."""

    id: int
    parent_id: int | None
    # `message`, `compaction`, `reset`, `label`, `branch_summary`, `custom`, ...
    type: str
    role: str | None
    content: str | None
    # The entry's other fields as JSON text, or None.
    payload: str | None
    # When it was written, integer microseconds.
    ts: int
    # Entries from the root down to it, and the `message` entries among them.
    depth: int
    mdepth: int
    # 1 while it is on the session's active path, else 0.
    on_path: int
    sid: int


class PathMessageRow(NamedTuple):
    """A message of the active path as a rewind reads it (`Tx.user_turns_above`)."""

    id: int
    parent_id: int | None
    role: str | None
    content: str | None
    payload: str | None
    mdepth: int


def row_to_message(row: EntryRow) -> dict[str, Any]:
    """A `message` row as an OpenAI chat-format dict."""
    message: dict[str, Any] = {"role": row.role, "content": row.content}
    if row.payload is not None:
        message.update(loads(row.payload))
    message["timestamp"] = iso_from_us(row.ts)
    return message


def row_to_event(row: EntryRow) -> dict[str, Any]:
    """Any row as a transcript event: `id`, `parent_id`, `type`, `timestamp` and its fields."""
    event: dict[str, Any] = {
        "id": row.id,
        "parent_id": row.parent_id,
        "type": row.type,
        "timestamp": iso_from_us(row.ts),
    }
    if row.type == "message":
        event["role"] = row.role
        event["content"] = row.content
    elif row.content is not None:
        event["content"] = row.content
    if row.payload is not None:
        event.update(loads(row.payload))
    event["on_path"] = bool(row.on_path)
    return event


# ---------------------------------------------------------------------- platform adapters' state


@dataclass(frozen=True, slots=True)
class PairingRow:
    """One DM sender's pairing request (`store/platform_state.py`), times in microseconds."""

    platform: str
    user_id: str
    code: str
    chat_id: str
    user_name: str | None
    created_at: int
    expires_at: int
    approved_at: int | None


@dataclass(frozen=True, slots=True)
class JobRow:
    """One scheduled job (`store/jobs.py`): its spec as JSON text, times in microseconds.
    `cursor_at` is the latest slot the scheduler has dealt with (run or passed over)."""

    job_id: str
    spec: str
    paused: bool
    created_at: int
    updated_at: int
    cursor_at: int | None


@dataclass(frozen=True, slots=True)
class JobRunRow:
    """One claimed slot of a job (unique per job and slot): `state` is `claimed` (the claim
    committed), `prepared` (its lane is ready) or `accepted` (its turn `turn_id` is in the
    journal); `skipped` counts the missed slots passed over when it was claimed."""

    run_id: int
    job_id: str
    slot_at: int
    claimed_at: int
    owner: str
    state: str
    session_key: str | None
    turn_id: int | None
    skipped: int
    detail: str | None


@dataclass(frozen=True, slots=True)
class TakeoverRow:
    """A lane an operator took over (`store/takeover.py`); times in microseconds, `resume_at`
    None when it goes back only by hand."""

    session_key: str
    taken_by: str
    since: int
    resume_at: int | None


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    """One tool call waiting for (or given) a person's decision (`store/approvals.py`); times
    in microseconds, `approvers` a JSON list of `<platform>:<user_id>`."""

    id: str
    turn_id: int
    call_id: str
    session_key: str
    tool: str
    arguments: str
    arguments_sha256: str
    approvers: str
    status: str  # pending | approved | denied | expired | cancelled
    requested_at: int
    expires_at: int
    decided_at: int | None = None
    decided_by: str | None = None
    # Set (once) when an approved call starts running: a resumed turn never runs it again.
    used: bool = False


class DeliveryStatus(enum.StrEnum):
    """Where one outbound message stands (`store/deliveries.py`)."""

    PENDING = "pending"  # not confirmed yet: never tried, or being tried
    SENT = "sent"  # the platform confirmed it (`message_id` when it gave one)
    FAILED = "failed"  # the last try failed (`reason`); tried again at `next_at`
    DEAD = "dead"  # given up: out of tries, or too old to send (`reason` `stale`)


@dataclass(frozen=True, slots=True)
class DeliveryRow:
    """One outbound message: a turn's reply, a notice, a job's output. Times in
    microseconds; `source` is the chat's `SessionSource` as JSON text."""

    id: int
    kind: str
    turn_id: int | None
    session_key: str | None
    platform: str
    source: str
    text: str
    status: str
    attempts: int
    message_id: str | None
    reason: str | None
    created_at: int
    updated_at: int
    next_at: int


@dataclass(frozen=True, slots=True)
class HookReceiptRow:
    """One delivery an inbound webhook route took (`store/hook_receipts.py`); times in
    microseconds; `turn_id` None until its turn was accepted."""

    route: str
    delivery_id: str
    received_at: int
    turn_id: int | None
    session_key: str | None


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """One outbound webhook event for one receiver (`store/outbox.py`); times in
    microseconds, `body` the JSON text POSTed; status `pending`, `sent` or `dead`."""

    id: int
    event_id: str
    target: str
    event: str
    session_key: str | None
    body: str
    status: str
    attempts: int
    reason: str | None
    created_at: int
    updated_at: int
    next_at: int


# Entries are frozen, so one decoded from the same stored text can be shared. A backend tells
# the text it writes (`remember_entry`), so the next read of that route, usually the turn's
# outcome a moment later, skips JSON decoding and validation (`decoded_entry`).
_DECODED: OrderedDict[str, SessionEntry] = OrderedDict()
_DECODED_MAX = 4096
_DECODED_LOCK = threading.Lock()


def decoded_entry(text: str) -> SessionEntry:
    """The routing entry stored as `text` (JSON)."""
    with _DECODED_LOCK:
        entry = _DECODED.get(text)
        if entry is not None:
            _DECODED.move_to_end(text)
            return entry
    entry = SessionEntry.from_dict(loads(text))
    remember_entry(text, entry)
    return entry


def remember_entry(text: str, entry: SessionEntry) -> None:
    """`text` is how `entry` reads back from the database."""
    with _DECODED_LOCK:
        _DECODED[text] = entry
        if len(_DECODED) > _DECODED_MAX:
            _DECODED.popitem(last=False)
