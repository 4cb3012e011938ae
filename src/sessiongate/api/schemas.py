"""Request and response bodies of the HTTP API (pydantic), and so its OpenAPI description.

Input is strict where JSON has a type for it (a string is not a number, `"true"` is not a
boolean) and every bound the store relies on is stated here, so a schema-driven fuzzer that
stays inside the schema gets a 2xx or a documented 4xx. Bodies refuse unknown fields.

Over the ~400-line budget: every request and response model of the HTTP contract, one class
each, kept together so the OpenAPI document and `docs/reference/http.md` come from one place.
"""

from __future__ import annotations

from datetime import datetime  # noqa: TC003  # pydantic resolves annotations at run time
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    model_validator,
)

__all__ = [
    "MAX_ENTRY_ID",
    "MAX_KEY_COMPONENT_CHARS",
    "ApprovalDecisionIn",
    "ApprovalList",
    "ApprovalOut",
    "BranchOut",
    "BranchesOut",
    "CompactOut",
    "ContextOut",
    "DeleteOut",
    "ErrorDetail",
    "ErrorOut",
    "ForkIn",
    "ForkOut",
    "HealthOut",
    "MessageIn",
    "MessageOut",
    "PatchIn",
    "ResetIn",
    "ResetOut",
    "RewindIn",
    "RewindOut",
    "SearchHit",
    "SearchOut",
    "SessionCreateIn",
    "SessionList",
    "SessionMessageIn",
    "SessionRow",
    "SourceIn",
    "SwitchIn",
    "SwitchOut",
    "TranscriptEvent",
    "TranscriptOut",
]

# SQLite integers are signed 64-bit; anything larger cannot name an entry.
MAX_ENTRY_ID = 2**63 - 1


def _encodable(value: str) -> str:
    # JSON can carry lone surrogates ("\ud800") that no UTF-8 store can hold.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid Unicode (no lone surrogates)") from None
    return value


Text = Annotated[StrictStr, AfterValidator(_encodable)]
Id = Annotated[StrictStr, Field(min_length=1, max_length=1024), AfterValidator(_encodable)]
# Ids that become session key components: escaped (up to three characters each), three of
# them plus a tag and a fork suffix stay far under the key routes' bound (`MAX_KEY_CHARS`,
# 4096, core/keys.py), so every session a message creates can be addressed by key.
MAX_KEY_COMPONENT_CHARS = 256
KeyId = Annotated[
    StrictStr, Field(min_length=1, max_length=MAX_KEY_COMPONENT_CHARS), AfterValidator(_encodable)
]
EntryId = Annotated[StrictInt, Field(ge=0, le=MAX_ENTRY_ID)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------------------------- errors


class ErrorDetail(BaseModel):
    code: str = Field(description="stable machine-readable name, e.g. session_not_found")
    message: str
    details: list[dict[str, Any]] | None = Field(
        None, description="per-field problems of a 422 invalid_request"
    )


class ErrorOut(BaseModel):
    error: ErrorDetail


# ---------------------------------------------------------------------------------- messages


class SourceIn(_In):
    """A conversation on the `api` platform: the fields of a session source."""

    platform: Literal["api"] = "api"
    chat_id: KeyId
    chat_type: Literal["dm", "group", "channel", "thread"] = "dm"
    chat_name: Id | None = None
    user_id: KeyId | None = None
    user_name: Id | None = None
    thread_id: KeyId | None = None
    chat_topic: Id | None = None
    user_id_alt: KeyId | None = None
    chat_id_alt: KeyId | None = None
    guild_id: KeyId | None = None
    parent_chat_id: KeyId | None = None
    is_bot: StrictBool = False


class _MessageFields(_In):
    text: Annotated[Text, Field(min_length=1, description="at most api.max_message_chars")]
    message_id: Id | None = Field(
        None, description="the client's id for this message; a retry with it is not run twice"
    )
    reply_to: Id | None = None
    wait: StrictBool = Field(True, description="wait for the reply (false: answer 202 queued)")
    stream: StrictBool = Field(
        False,
        description="answer text/event-stream: accepted, delta, message, then done or error",
    )
    visible_session_id: Id | None = Field(
        None,
        description="a reconnecting client's one-shot claim: the session id it is showing; "
        "if a reset policy made it stale, this one send still goes to it",
    )


class MessageIn(SourceIn, _MessageFields):
    """An inbound message on the `api` platform: the fields of a session source plus text."""


class SessionMessageIn(_MessageFields):
    """A message to one session addressed by key (a fork, an incognito session)."""

    user_id: KeyId | None = None
    user_name: Id | None = None


class SessionCreateIn(SourceIn):
    """Create the session a source routes to, or with `incognito` a new in-memory one."""

    incognito: StrictBool = Field(
        False,
        description="held in memory only: never written to disk, hidden from search and from "
        "ordinary listings, gone (its key refused) after a restart",
    )


# The runner's receipt statuses that reach a client as a 2xx (see routes_messages).
ReceiptStatus = Literal[
    "replied", "queued", "duplicate", "command", "failed", "interrupted", "held"
]


class MessageOut(BaseModel):
    session_key: str
    session_id: str | None
    status: ReceiptStatus
    reply: str | None
    turn_id: int | None = None


class TurnOut(BaseModel):
    """One turn of the journal (`GET /v1/turns/{id}`); `queued` while its message waits."""

    turn_id: int
    session_key: str
    session_id: str | None
    state: Literal["queued", "accepted", "running", "replied", "delivered", "failed", "interrupted"]
    reply: str | None
    error: str | None
    attempt: int
    accepted_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    partial: str | None = Field(
        default=None,
        description="while the turn runs here: the text of the message being generated so far "
        "(not durable; it starts over on a retry)",
    )
    retries: int | None = Field(
        default=None,
        description="while the turn runs here: how many times the message being generated "
        "started over (its model call retried after the stream broke; the SSE `retry` event)",
    )


# ---------------------------------------------------------------------------------- sessions


class SessionRow(BaseModel):
    session_key: str
    session_id: str
    agent: str | None = Field(
        description="the agent serving the session (its key's namespace; null for a legacy key)"
    )
    created_at: datetime
    updated_at: datetime
    display_name: str | None
    platform: str | None
    chat_type: str
    label: str | None
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    total_tokens: int
    context_tokens: int
    last_prompt_tokens: int
    estimated_cost_usd: float = Field(
        description="the sum of the priced turns' costs (`pricing` in the configuration)"
    )
    cost_status: str = Field(
        description="`estimated` while every turn's model had a price, else `unknown`"
    )
    compaction_count: int
    archived: bool
    pinned: bool
    unread: bool
    archived_at: datetime | None
    pinned_at: datetime | None
    last_read_at: datetime | None
    marked_unread_at: datetime | None = Field(
        description="send it back as expected_marked_unread_at to acknowledge safely"
    )
    last_activity_at: datetime | None
    session_started_at: datetime | None
    last_interaction_at: datetime | None
    next_reset_at: datetime | None = Field(
        description="when the reset policy next makes this session stale (lazily, on a message)"
    )
    suspended: bool
    resume_pending: bool
    parent_session_key: str | None
    forked_from_parent: bool
    incognito: bool
    was_auto_reset: bool
    auto_reset_reason: str | None
    thinking_level: str | None
    verbose_level: str | None
    reasoning_level: str | None
    elevated_level: str | None
    send_policy: str | None
    provider_override: str | None
    model_override: str | None
    memory_flush_at: datetime | None
    memory_flush_compaction_count: int | None
    subject: str | None
    # Filled by the list and the one-row read (null elsewhere): what a person looks for first.
    message_count: int | None = Field(
        None, description="messages on the active branch (the list and the one-row read)"
    )
    last_message: LastMessage | None = Field(
        None, description="the active branch's last message (the list and the one-row read)"
    )
    model: str | None = Field(
        None,
        description="the model the next turn uses: the session's choice, else its agent's "
        "(null for an agent without one, such as echo; the list and the one-row read)",
    )
    agent_kind: str | None = Field(
        None, description="`echo` or `openai` (null for an agent no longer configured)"
    )


class LastMessage(BaseModel):
    role: str
    text: str = Field(description="the first line of its text, cut at 160 characters")
    timestamp: datetime
    notice: str | None = Field(
        None,
        description="a gateway notice instead of a reply (`failed`: the turn failed)",
    )


class SessionList(BaseModel):
    sessions: list[SessionRow]
    total: int
    has_more: bool
    next_offset: int | None


class PatchIn(_In):
    """Fields left out are left alone; `null` for `pinned`, `archived`, `unread` is the same.

    `label: null` clears the label. `expected_marked_unread_at` (with `unread: false`) makes the
    acknowledgement conditional: `null` means "I saw no marker". `model`, `provider` and
    `thinking_level` choose the lane's model (`null`: back to the default); each change is
    also a `model_change` / `thinking_level_change` entry in the transcript.
    """

    pinned: StrictBool | None = None
    archived: StrictBool | None = None
    expected_session_id: Id | None = Field(
        None, description="archive only if the key still points at this session id"
    )
    unread: StrictBool | None = None
    expected_marked_unread_at: datetime | None = None
    label: Annotated[Text, Field(min_length=1, max_length=512)] | None = None
    model: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    provider: Annotated[Text, Field(min_length=1, max_length=200)] | None = None
    thinking_level: Annotated[Text, Field(min_length=1, max_length=200)] | None = None

    @model_validator(mode="after")
    def _archive_names_its_session(self) -> PatchIn:
        # Without it a conversation that moved on could be archived by mistake.
        if self.archived and self.expected_session_id is None:
            raise ValueError(
                "expected_session_id is required with archived: true (the session_id of the "
                "row you are archiving)"
            )
        return self


class ResetIn(_In):
    """Optional: a reset with no body is the configured `reset_mode`, keeping no tail."""

    mode: Literal["new_session", "boundary"] | None = Field(
        None, description="new_session: a new session id; boundary: same id, a reset entry"
    )
    keep_tail: StrictBool = Field(
        False, description="keep the last 6 user/assistant messages, from a user message"
    )


class ResetOut(BaseModel):
    session_id: str


class DeleteOut(BaseModel):
    deleted: bool
    session_key: str


# ---------------------------------------------------------------------------------- transcripts


class TranscriptEvent(BaseModel):
    """One entry of the transcript tree; message entries add `role`, `content`, ..."""

    model_config = ConfigDict(extra="allow")

    id: int
    parent_id: int | None
    type: str
    timestamp: str
    role: str | None = None
    content: str | list[Any] | None = None


class TranscriptOut(BaseModel):
    session_id: str
    header: dict[str, Any] = Field(
        description="the session's header: type, version, id, timestamp, parent session"
    )
    events: list[TranscriptEvent]
    has_more: bool = Field(
        False, description="with `limit`: earlier events exist (page with `before`)"
    )


class ContextOut(BaseModel):
    session_key: str
    session_id: str
    system_prompt: str | None = Field(
        description="the session-context section a turn from the session's last sender gets "
        "(null for a session with no recorded sender)"
    )
    messages: list[dict[str, Any]]
    model: str | None
    provider: str | None
    thinking_level: str | None
    boundary_entry_id: int | None


class SearchHit(BaseModel):
    session_id: str
    session_key: str | None
    role: str | None
    snippet: str
    timestamp: str | None


class SearchOut(BaseModel):
    results: list[SearchHit]
    degraded: bool = Field(description="true when the index was stale and a scan answered")


# ---------------------------------------------------------------------------------- tree


class RewindIn(_In):
    """Exactly one of `entry_id` and `turns`."""

    entry_id: EntryId | None = Field(None, description="a user message on the active path")
    turns: Annotated[StrictInt, Field(ge=1, le=10_000)] | None = Field(
        None, description="how many user turns to undo (1 to 10000)"
    )

    @model_validator(mode="after")
    def _one_target(self) -> RewindIn:
        if (self.entry_id is None) == (self.turns is None):
            raise ValueError(
                "give exactly one of entry_id (a user message's id) and turns (1 to 10000)"
            )
        return self


class RewindOut(BaseModel):
    status: Literal[
        "rewound", "nothing_to_rewind", "missing", "not_user_message", "off_active_path"
    ] = Field(
        description="over HTTP `rewound` or `nothing_to_rewind`: an entry that is missing, off "
        "the active path or not a user message is a 404 or 400 error, as for a fork"
    )
    editor_text: str
    rewound_count: int


class ForkIn(_In):
    """At most one of `entry_id` and `fork_from`; no body, or `{}`, is `fork_from: active`."""

    entry_id: EntryId | None = Field(None, description="fork before this user message")
    fork_from: Literal["active", "last-completed"] | None = Field(
        None, description="copy the whole active branch, or up to the last finished reply"
    )

    @model_validator(mode="after")
    def _one_target(self) -> ForkIn:
        if self.entry_id is not None and self.fork_from is not None:
            raise ValueError("give entry_id or fork_from, not both")
        return self


class ForkOut(BaseModel):
    session_key: str
    session_id: str
    editor_text: str


class BranchOut(BaseModel):
    # None for the empty start of the session, active when everything was rewound.
    leaf_entry_id: int | None
    headline: str
    message_count: int
    updated_at: str | None
    active: bool


class BranchesOut(BaseModel):
    branches: list[BranchOut]


class SwitchIn(_In):
    leaf_entry_id: EntryId


class SwitchOut(BaseModel):
    status: Literal["switched", "missing", "not_a_tip", "already_active"]


class CompactOut(BaseModel):
    compacted: bool
    tokens_before: int
    tokens_after: int
    # Why nothing was compacted (`nothing_to_compact`, `summary_failed`, `no_gain`); None when
    # it was.
    reason: str | None = None


class HealthOut(BaseModel):
    status: Literal["ok", "unavailable"]
    store: Literal["open", "closed"]
    version: str


class ApprovalOut(BaseModel):
    """A tool call waiting for (or given) a person's decision."""

    id: str
    status: Literal["pending", "approved", "denied", "expired", "cancelled"]
    tool: str
    arguments: str = Field(description="the call's arguments, exactly as the prompt showed them")
    arguments_sha256: str = Field(description="what a decision binds to (tool name and arguments)")
    session_key: str
    turn_id: int
    call_id: str
    approvers: list[str]
    requested_at: datetime
    expires_at: datetime
    decided_at: datetime | None = None
    decided_by: str | None = None


class ApprovalList(BaseModel):
    approvals: list[ApprovalOut]


class TakeoverOut(BaseModel):
    """Whether an operator holds the session's lane instead of the agent
    (`/v1/sessions/{key}/takeover`)."""

    session_key: str
    taken_over: bool
    taken_by: str | None = Field(
        None, description="`operator` (HTTP, dashboard, CLI) or `<platform>:<user_id>` (`/bot off`)"
    )
    since: datetime | None = None
    resume_at: datetime | None = Field(
        None,
        description="when the lane goes back to the agent by itself (`takeover."
        "auto_resume_minutes`); null: only when handed back",
    )


class OperatorReplyIn(_In):
    text: Annotated[Text, Field(min_length=1, description="at most api.max_message_chars")]


class OperatorReplyOut(BaseModel):
    """An operator's reply: stored as the assistant's message (`metadata.written_by:
    operator`) and sent to the chat as a delivery row of kind `operator`."""

    session_key: str
    session_id: str
    entry_id: int | None
    sent: bool = Field(
        description="the platform confirmed it (false: its delivery is retried; "
        "`GET /v1/deliveries` shows it)"
    )


class ApprovalDecisionIn(_In):
    decision: Literal["approve", "deny"]
    arguments_sha256: str | None = Field(
        None,
        min_length=64,
        max_length=64,
        description="when given, the decision applies only if the call is this one",
    )
