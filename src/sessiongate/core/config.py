"""`GatewayConfig`: every key of the spec's configuration appendix under the same names.

Constructible with keyword arguments; `sessiongate.config.load_config` reads YAML plus
`SESSIONGATE_*` environment overrides into it. Dotted names nest (`agent.echo.delay_seconds`).

Over the ~400-line budget: it is the whole configuration schema, one model per section, so
`docs/CONFIG.md` and the cross-section checks read it from one module.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    SerializeAsAny,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sessiongate.core.bindings import AGENT_ID, DEFAULT_AGENT, agent_for, agent_of_key
from sessiongate.core.inbound_hooks import HookRouteSpec, hook_source
from sessiongate.core.jobs import JobSpec  # noqa: TC001  # pydantic reads it at run time
from sessiongate.core.mcp import (
    MCP_SERVER_NAME,
    McpServerConfig,
    is_mcp_tool_spec,
    parse_mcp_tool_spec,
)
from sessiongate.core.platform import Platform
from sessiongate.core.source import ChatType, SessionSource

__all__ = [
    "PLATFORM_CONFIGS",
    "WEBHOOK_EVENTS",
    "AgentCacheConfig",
    "AgentConfig",
    "AgentSpec",
    "ApiConfig",
    "ApprovalsConfig",
    "BindingConfig",
    "DeliveryConfig",
    "DiscordConfig",
    "EchoAgentConfig",
    "EchoAgentSpec",
    "EntryAgentSpec",
    "FeedConfig",
    "GatewayConfig",
    "HooksConfig",
    "LogConfig",
    "ModelPrice",
    "OpenAIAgentConfig",
    "OpenAIAgentSpec",
    "OutboundWebhook",
    "PlatformConfig",
    "ResetPolicyConfig",
    "ResetRule",
    "SessionToolsConfig",
    "SignalConfig",
    "SlackConfig",
    "StoreConfig",
    "TakeoverConfig",
    "TelegramConfig",
    "TracingConfig",
    "WebhooksConfig",
    "WhatsAppConfig",
]


class _Model(BaseModel):
    # Ids and tokens written as bare numbers in YAML (`home_channel: -10012345`) are text.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, coerce_numbers_to_str=True)


class AgentCacheConfig(_Model):
    max_size: int = Field(128, ge=1)
    idle_ttl_secs: int = Field(3600, ge=1)
    # "auto" derives the budget from the cgroup limit, else total RAM; 0 or "off" disables.
    memory_high_mb: int | Literal["auto", "off"] = "auto"
    max_evictions_per_pass: int = Field(16, ge=1)
    protect_recent: int = Field(8, ge=0)


class EchoAgentConfig(_Model):
    delay_seconds: float = Field(0.0, ge=0)


class SessionToolsConfig(_Model):
    """Settings of the built-in session tools (`sessions_list`, ... `sessions_spawn`)."""

    visibility: Literal["tree", "agent", "all"] = Field(
        "tree",
        description=(
            "Which sessions the tools may see and address: `tree` the calling session and the "
            "sessions it forked or spawned, `agent` every session of the same agent namespace "
            "(`agent:<id>:...`), `all` every session of the gateway."
        ),
    )
    history_limit: int = Field(
        50, ge=1, le=500, description="Most messages `sessions_history` returns at once."
    )
    max_spawn_depth: int = Field(
        2,
        ge=0,
        description=(
            "How deep `sessions_spawn` may nest: a spawned session at this depth may not spawn "
            "again (0 turns spawning off)."
        ),
    )
    context_windows: dict[str, int] = Field(
        default_factory=dict,
        description=(
            "Usable input capacity (tokens) of a child model, by model name: a spawn whose "
            "parent branch is larger starts with an isolated context. A model not listed uses "
            "the 100,000-token cap."
        ),
    )
    schedule_max_jobs: int = Field(
        5,
        ge=1,
        le=100,
        description="Most jobs the `schedule` tool keeps for one session at a time.",
    )
    schedule_min_interval_seconds: int = Field(
        300,
        ge=60,
        description="Shortest gap between two runs of a job the `schedule` tool makes (an "
        "`every` interval, or two slots of a `cron` schedule).",
    )


class OpenAIAgentConfig(_Model):
    base_url: str | None = Field(
        None,
        description=(
            "Base URL of an OpenAI-compatible server (e.g. `http://127.0.0.1:8080/v1`); "
            "setting it (or `api_key`) chooses the OpenAI-compatible agent over the echo agent."
        ),
    )
    api_key: SecretStr | None = Field(
        None, description="The API key sent to that server; `OPENAI_API_KEY` when not set."
    )
    model: str = Field(
        "gpt-4o-mini",
        description="The model name sent with each request (a session's `/model` overrides it).",
    )
    timeout_seconds: float = Field(
        120.0,
        gt=0,
        description=(
            "How long the agent waits on the server for any one step of a call: connecting, "
            "sending, or the next bytes of the answer. A streamed reply may take longer in all "
            "as long as chunks keep coming; a call that runs out is retried like a 5xx. The "
            "whole turn is bounded by `agent.gateway_timeout`."
        ),
    )
    max_retries: int = Field(
        2,
        ge=0,
        le=10,
        description=(
            "Retries of a model call after a rate limit (429), a 5xx, a timeout, a dropped "
            "connection or a broken or empty stream; then the turn fails as temporarily "
            "unavailable."
        ),
    )
    retry_backoff_seconds: float = Field(
        1.0,
        ge=0,
        description=(
            "Wait before the first retry, doubled for each next one (a server's "
            "`Retry-After` is honoured up to the cap)."
        ),
    )
    retry_backoff_max_seconds: float = Field(
        30.0, ge=0, description="The longest wait between two retries."
    )
    tools: list[str] = Field(
        default_factory=list,
        description=(
            "Tools the model may call: a built-in by name (`sessions_list`, `sessions_history`, "
            "`sessions_search`, `sessions_send`, `sessions_spawn`), your own function by "
            "import path (`mypkg.tools:lookup_order`), or an MCP server's tool "
            "(`mcp:<server>:<tool>`, `mcp:<server>:*`; see `mcp_servers`)."
        ),
    )
    tool_timeout_seconds: float = Field(
        30.0, gt=0, description="How long one tool call may run before it is stopped."
    )
    tool_timeouts: dict[str, float] = Field(
        default_factory=dict,
        description=(
            "Per-tool timeouts (seconds) by tool name, over `tool_timeout_seconds` and a "
            "tool's own default (`sessions_spawn` waits up to 600 s for its sub-agent)."
        ),
    )
    max_tool_iterations: int = Field(
        25,
        ge=1,
        description=(
            "Most model calls in one turn; a model still calling tools after that many ends "
            "the turn with `tool_loop_limit`."
        ),
    )
    parallel_tool_calls: bool = Field(
        True, description="Let the model ask for several tool calls at once; they run together."
    )
    max_tool_result_chars: int = Field(
        20_000, ge=100, description="A tool result longer than this is cut, with a note."
    )
    session_tools: SessionToolsConfig = Field(default_factory=SessionToolsConfig)


_SYSTEM_PROMPT_DESCRIPTION = (
    "The agent's instructions or persona, sent to the model before the session context block "
    "of every turn. Text; or use `system_prompt_file`, not both."
)
_SYSTEM_PROMPT_FILE_DESCRIPTION = (
    "A UTF-8 text file holding the system prompt (a relative path is read from the config "
    "file's folder), read once at start; it must exist."
)
_MODELS_DESCRIPTION = (
    "The models a session may choose with `/model <name>`, besides the agent's own `model` "
    "(always allowed; `/model default` goes back to it). Empty: only the agent's own model."
)


class _Instructions(_Model):
    """A system prompt given as text or as a file, never both (an agent's, or a binding's)."""

    system_prompt: str | None = Field(None, description=_SYSTEM_PROMPT_DESCRIPTION)
    system_prompt_file: str | None = Field(None, description=_SYSTEM_PROMPT_FILE_DESCRIPTION)

    @model_validator(mode="after")
    def _one_prompt(self) -> _Instructions:
        if self.system_prompt is not None and self.system_prompt_file is not None:
            raise ValueError(
                "system_prompt and system_prompt_file are both set; keep one (the text, or "
                "the file that holds it)"
            )
        if self.system_prompt_file is not None and not self.system_prompt_file.strip():
            raise ValueError("system_prompt_file is empty; name a file or leave it out")
        return self


_APPROVER = re.compile(r"[a-z][a-z0-9_-]*:\S+")
SESSION_USER = "session-user"


class ApprovalsConfig(_Model):
    """Tool calls that wait for a person's approval, asked in the chat (`docs/AGENTS.md`)."""

    tools: list[str] = Field(
        default_factory=list,
        description=(
            "Tools whose calls need approval: a tool name, or a pattern with `*` "
            "(`mcp:<server>:*`, `delete_*`). Empty: no call needs approval."
        ),
    )
    approvers: list[str] | Literal["session-user"] = Field(
        "session-user",
        description=(
            "Who may decide: `session-user` (the person whose message started the turn), or a "
            "list of `<platform>:<user_id>`."
        ),
    )
    timeout_minutes: float = Field(
        30.0,
        gt=0,
        le=7 * 24 * 60,
        description="How long an approval waits; then the call is denied as expired.",
    )

    @field_validator("tools")
    @classmethod
    def _tool_patterns(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if not pattern.strip() or len(pattern) > 200 or any(c.isspace() for c in pattern):
                raise ValueError(
                    f"invalid tool pattern {pattern!r}: 1 to 200 characters, no spaces"
                )
        return value

    @field_validator("approvers")
    @classmethod
    def _approver_ids(cls, value: list[str] | str) -> list[str] | str:
        if isinstance(value, list):
            if not value:
                raise ValueError("approvers is empty; list `<platform>:<user_id>` or say "
                                 "`session-user`")  # fmt: skip
            for approver in value:
                if not _APPROVER.fullmatch(approver):
                    raise ValueError(
                        f"invalid approver {approver!r}: `<platform>:<user_id>`, e.g. "
                        "`telegram:12345`"
                    )
        return value


class _AgentChoices(_Instructions):
    """What every agent may carry besides its kind's settings."""

    models: list[str] = Field(default_factory=list, description=_MODELS_DESCRIPTION)
    approvals: ApprovalsConfig = Field(default_factory=ApprovalsConfig)

    @field_validator("models")
    @classmethod
    def _model_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name.strip() or len(name) > 200 or any(c.isspace() for c in name):
                raise ValueError(f"invalid model name {name!r}: 1 to 200 characters, no spaces")
        return value


class AgentConfig(_AgentChoices):
    gateway_timeout: int = Field(1800, ge=1)
    gateway_auto_continue_freshness: int = Field(3600, ge=0)
    restart_drain_timeout: float = Field(30.0, ge=0)
    agent_cache: AgentCacheConfig = Field(default_factory=AgentCacheConfig)
    echo: EchoAgentConfig = Field(default_factory=EchoAgentConfig)
    openai: OpenAIAgentConfig = Field(default_factory=OpenAIAgentConfig)
    # Model context window used to admit forks and trigger compaction (tokens).
    context_window: int = Field(100_000, ge=1000)


_KIND_DESCRIPTION = (
    "The agent's kind: `echo`, `openai`, or one built by your code (`python`, "
    "`openai-agents`, `pydantic-ai`, `langgraph`, with `entry`)."
)
_CONTEXT_WINDOW_DESCRIPTION = (
    "This agent's model context window in tokens (fork admission, compaction); unset means "
    "`agent.context_window`."
)


class EchoAgentSpec(EchoAgentConfig, _AgentChoices):
    """An agent of `agents`: the echo agent, with `agent.echo`'s settings."""

    kind: Literal["echo"] = Field(description=_KIND_DESCRIPTION)
    context_window: int | None = Field(None, ge=1000, description=_CONTEXT_WINDOW_DESCRIPTION)


class OpenAIAgentSpec(OpenAIAgentConfig, _AgentChoices):
    """An agent of `agents`: an OpenAI-compatible agent, with `agent.openai`'s settings."""

    kind: Literal["openai"] = Field(description=_KIND_DESCRIPTION)
    context_window: int | None = Field(None, ge=1000, description=_CONTEXT_WINDOW_DESCRIPTION)


EntryKind = Literal["python", "openai-agents", "pydantic-ai", "langgraph"]


class EntryAgentSpec(_AgentChoices):
    """An agent of `agents` built by your own code: `entry` names an object or a factory."""

    kind: EntryKind = Field(
        description="`python`: any object below, recognised by type; `openai-agents`: an "
        "OpenAI Agents SDK `Agent`; `pydantic-ai`: a pydantic-ai `Agent`; `langgraph`: a "
        "compiled LangGraph graph with a `messages` state key."
    )
    entry: str = Field(
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
        description="`module:attribute` of the object, or of a function that returns one "
        "(called once per session, with no arguments or with the session key).",
    )
    context_window: int | None = Field(None, ge=1000, description=_CONTEXT_WINDOW_DESCRIPTION)
    tools: list[str] = Field(
        default_factory=list,
        description=(
            "MCP tools the framework's agent gets besides its own (`mcp:<server>:<tool>`, "
            "`mcp:<server>:*`; see `mcp_servers`): as function tools of an OpenAI Agents SDK "
            "agent, a toolset of a pydantic-ai agent. A LangGraph graph's tools are compiled "
            "in: none may be given."
        ),
    )

    @field_validator("tools")
    @classmethod
    def _mcp_only(cls, value: list[str]) -> list[str]:
        for name in value:
            if not is_mcp_tool_spec(name):
                raise ValueError(
                    f"{name!r}: an agent of your code names only MCP tools here "
                    "(`mcp:<server>:<tool>`); its own tools stay in its code"
                )
        return value


AgentSpec = Annotated[EchoAgentSpec | OpenAIAgentSpec | EntryAgentSpec, Field(discriminator="kind")]


class BindingConfig(_Instructions):
    """Routes inbound messages to an agent; every field given must match, the first binding
    that matches wins, and a message no binding matches goes to `main`. Its `system_prompt`
    (or `system_prompt_file`), when given, replaces the agent's for the chats it matches."""

    platform: str = Field(description="The platform the message came from (`telegram`, ...).")
    chat_id: str | None = Field(None, description="Only this chat (the platform's chat id).")
    guild_id: str | None = Field(None, description="Only this guild, server or workspace.")
    chat_type: Literal["dm", "group", "channel", "thread"] | None = Field(
        None, description="Only this kind of conversation."
    )
    agent: str = Field(description="The id of the agent (a key of `agents`, or `main`).")
    system_prompt: str | None = Field(
        None,
        description=(
            "Instructions that replace the agent's `system_prompt` for the chats this binding "
            "matches (one agent, two personas); or use `system_prompt_file`, not both."
        ),
    )
    system_prompt_file: str | None = Field(
        None,
        description=(
            "A UTF-8 text file holding this binding's system prompt (a relative path is read "
            "from the config file's folder); it must exist."
        ),
    )


class ModelPrice(_Model):
    """What a model costs, in US dollars per million tokens, for `estimated_cost_usd`."""

    input_per_million: float = Field(ge=0, description="Per million input (prompt) tokens.")
    output_per_million: float = Field(ge=0, description="Per million output tokens.")
    cache_read_per_million: float | None = Field(
        None, ge=0, description="Per million tokens read from the prompt cache (default: input)."
    )
    cache_write_per_million: float | None = Field(
        None, ge=0, description="Per million tokens written to the prompt cache (default: input)."
    )


class FeedConfig(_Model):
    """The live event feed (`GET /v1/events`): how much history a reconnecting client can
    replay with `Last-Event-ID`."""

    history_events: int = Field(
        10_000, ge=1, description="Always keep at least this many of the newest events."
    )
    history_seconds: float = Field(
        3600.0, ge=0, description="Also keep events younger than this, up to `max_events`."
    )
    max_events: int = Field(
        100_000, ge=1, description="Never keep more events than this (bounds the memory)."
    )
    max_lag_events: int = Field(
        10_000,
        ge=1,
        description="A subscriber further behind than this gets `reset` and skips ahead.",
    )
    keepalive_seconds: float = Field(
        15.0, gt=0, description="A comment line is sent after this long without events."
    )
    batch_seconds: float = Field(
        0.05,
        ge=0,
        le=5,
        description="After sending, a stream waits until the next multiple of this (every "
        "stream alike) and then sends what came meanwhile in one write: a busy gateway wakes "
        "its subscribers at most this often, all in one pass (0: a write per commit).",
    )

    @model_validator(mode="after")
    def _history_fits(self) -> FeedConfig:
        if self.max_events < self.history_events:
            raise ValueError("feed.max_events must be at least feed.history_events")
        return self


class ResetRule(_Model):
    mode: Literal["none", "daily", "idle", "both"] = "none"
    at_hour: int = 4
    idle_minutes: int = 60

    @field_validator("at_hour")
    @classmethod
    def _clamp_hour(cls, value: int) -> int:
        return min(23, max(0, value))

    @field_validator("idle_minutes")
    @classmethod
    def _min_idle(cls, value: int) -> int:
        return max(1, value)


class ResetPolicyConfig(ResetRule):
    """The default rule plus overrides per conversation type and per channel (platform)."""

    timezone: str = "UTC"
    by_type: dict[Literal["direct", "group", "thread"], ResetRule] = Field(default_factory=dict)
    by_channel: dict[str, ResetRule] = Field(default_factory=dict)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        # Checked when the configuration loads: found only at a reset, an unknown zone would
        # fail every message of a running gateway instead of its start.
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(
                f"unknown timezone: {value!r} (an IANA name, e.g. Europe/Berlin)"
            ) from None
        return value


class PlatformConfig(_Model):
    enabled: bool = True
    # None lets everyone in; a list lets only those user ids (or "*") in. A platform adapter
    # built on the kit reads it as user ids *and chat ids*, and fails closed: None admits nobody
    # but DM senders admitted by `dm_policy` (docs/ADAPTERS.md).
    allow_from: list[str] | None = None
    home_channel: str | None = None
    token: SecretStr | None = None
    # The adapter kit's keys (docs/ADAPTERS.md); platforms without an adapter ignore them.
    require_mention: bool = True
    dm_policy: Literal["allowlist", "pairing", "open"] = "pairing"
    mention_patterns: list[str] = Field(default_factory=list)
    answer_edits: bool = False
    allow_bots: bool = False
    max_media_mb: float = Field(20.0, gt=0)
    pairing_ttl_seconds: int = Field(3600, ge=60)
    # A paste the client split: a part this long (None: 95% of the platform's limit) waits
    # this many seconds for the rest, which is merged into one message (0: off).
    merge_window_seconds: float = Field(1.0, ge=0, le=5)
    merge_min_length: int | None = Field(None, gt=0)
    # With `allow_bots`: more bot messages than this in one chat within the window, and bots
    # are ignored there for the cooldown (two bots must not answer each other for ever).
    # Whether a reply quotes the message it answers: `first` its first chunk, `all` every
    # chunk, `off` none.
    reply_to_mode: Literal["off", "first", "all"] = "first"
    # Messages that waited longer than this (by the platform's timestamp) when they arrive, such
    # as a backlog after an outage, are not answered; unset: every one is.
    max_backlog_seconds: float | None = Field(None, gt=0)
    # Replies may attach files (a `MEDIA: <path>` line) from these folders only; none: no files.
    media_dirs: list[str] = Field(default_factory=list)
    # The largest file sent; unset: the platform's own upload limit.
    max_upload_mb: float | None = Field(None, gt=0)
    bot_loop_max_messages: int = Field(5, ge=1)
    bot_loop_window_seconds: float = Field(60.0, gt=0)
    bot_loop_cooldown_seconds: float = Field(600.0, ge=0)


class TelegramConfig(PlatformConfig):
    """`platforms.telegram`: the Bot API over python-telegram-bot."""

    base_url: str = "https://api.telegram.org"
    mode: Literal["polling", "webhook"] = "polling"
    webhook_secret: SecretStr | None = None
    # When set, the adapter registers it with setWebhook at start (else it is set by hand).
    webhook_url: str | None = None
    poll_timeout_seconds: int = Field(30, ge=0, le=50)
    # No getUpdates completed for this long (beyond its own timeout): rebuild the transport.
    poll_stall_seconds: float = Field(90.0, gt=0)
    # Updates that waited while the gateway was down: kept (the default) or dropped at start.
    drop_pending_updates: bool = False

    @field_validator("base_url")
    @classmethod
    def _root_url(cls, value: str) -> str:
        value = value.rstrip("/")
        if not value.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http(s) URL such as https://api.telegram.org")
        if value.rsplit("/", 1)[-1].startswith("bot"):
            raise ValueError("base_url is the Bot API root, without /bot<token>")
        return value


def _http_url(value: str, example: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"must be an http(s) URL such as {example}")
    return value


class SlackConfig(PlatformConfig):
    """`platforms.slack`: the Web API plus Socket Mode or the HTTP Events API, on slack-sdk."""

    bot_token: SecretStr | None = None  # xoxb-...
    app_token: SecretStr | None = None  # xapp-... with connections:write (Socket Mode)
    signing_secret: SecretStr | None = None  # the Events API's (mode: events)
    mode: Literal["socket", "events"] = "socket"
    base_url: str = "https://slack.com/api/"
    # Optional: an app configuration token (xoxe-...) and the app id let the adapter write the
    # gateway's commands into the app manifest (apps.manifest.update); else they are listed
    # in docs/ADAPTERS.md to add by hand.
    app_config_token: SecretStr | None = None
    app_id: str | None = None
    # The Socket Mode socket not connected for this long: close it and build a new one.
    socket_stall_seconds: float = Field(60.0, gt=0)

    @field_validator("base_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        return _http_url(value, "https://slack.com/api/").rstrip("/") + "/"


class DiscordConfig(PlatformConfig):
    """`platforms.discord`: REST plus the gateway websocket, on discord.py."""

    api_base_url: str = "https://discord.com/api/v10"
    # Role ids whose members are admitted in guilds (beside `allow_from`); sets role_authorized.
    allow_roles: list[str] = Field(default_factory=list)
    # Application commands: `diff` creates, edits and deletes only what changed (ids kept).
    command_sync: Literal["diff", "off"] = "diff"
    # No gateway event or heartbeat ack for this long: close the socket and reconnect.
    gateway_stall_seconds: float = Field(90.0, gt=0)

    @field_validator("api_base_url")
    @classmethod
    def _api_url(cls, value: str) -> str:
        return _http_url(value, "https://discord.com/api/v10").rstrip("/")


class MatrixConfig(PlatformConfig):
    """`platforms.matrix`: the client-server API (`/sync`) of any homeserver, on mautrix."""

    homeserver: str = "https://matrix.org"
    # The bot's account (`@bot:example.org`); when set, the token must belong to it.
    user_id: str | None = None
    access_token: SecretStr | None = None
    sync_timeout_seconds: int = Field(30, ge=0, le=120)
    # No sync completed for this long (beyond its own timeout): rebuild its connection.
    sync_stall_seconds: float = Field(90.0, gt=0)

    @field_validator("homeserver")
    @classmethod
    def _homeserver_url(cls, value: str) -> str:
        value = _http_url(value, "https://matrix.example.org").rstrip("/")
        if "/_matrix" in value:
            raise ValueError("homeserver is the server's root URL, without /_matrix/...")
        return value

    @field_validator("user_id")
    @classmethod
    def _matrix_user(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"@[^:\s]+:\S+", value):
            raise ValueError("user_id is a Matrix user id such as @bot:example.org")
        return value


class WhatsAppConfig(PlatformConfig):
    """`platforms.whatsapp`: the official Cloud API (Graph API plus a signed webhook), on pywa.

    `token` (inherited) is the Graph API access token; `allow_from` and `home_channel` take
    phone numbers in any spelling (`+1 555 123 4567`), normalised like every WhatsApp id."""

    phone_number_id: str | None = None
    app_secret: SecretStr | None = None  # signs every webhook POST (X-Hub-Signature-256)
    verify_token: SecretStr | None = None  # answers the GET verification (hub.verify_token)
    base_url: str = "https://graph.facebook.com"
    api_version: str = "26.0"
    # Sent when a reply falls outside the 24-hour customer-service window (an approved
    # template, with no parameters, in this language); unset: the reply only fails, logged.
    window_template: str | None = None
    window_template_language: str = "en_US"
    # The largest webhook body taken (Meta's are a few KB; batches stay well under this).
    max_webhook_bytes: int = Field(1_048_576, ge=1024, le=1_048_576)

    @field_validator("base_url")
    @classmethod
    def _graph_url(cls, value: str) -> str:
        value = _http_url(value, "https://graph.facebook.com").rstrip("/")
        if value.rsplit("/", 1)[-1].startswith("v") and value.rsplit("/", 1)[-1][1:2].isdigit():
            raise ValueError("base_url is the Graph API root, without the /vNN.N version")
        return value

    @field_validator("api_version")
    @classmethod
    def _version(cls, value: str) -> str:
        value = value.strip().removeprefix("v")
        try:
            float(value)
        except ValueError:
            raise ValueError("api_version is a Graph API version such as 23.0") from None
        return value


class SignalConfig(PlatformConfig):
    """`platforms.signal`: a signal-cli daemon in HTTP mode (JSON-RPC + its SSE event stream)."""

    # The daemon's root (`signal-cli -a +NUMBER daemon --http 127.0.0.1:8080`).
    url: str = "http://127.0.0.1:8080"
    # The bot's own account (E.164 number) as registered or linked in signal-cli.
    account: str | None = None
    # The reaction put on a message once the gateway accepted it (empty: none).
    ack_reaction: str = "\N{EYES}"
    # No event and no keep-alive on the stream for this long: probe and reconnect (watchdog).
    stream_stall_seconds: float = Field(120.0, gt=0)
    # signal-cli's attachments folder, when on this host: `resolve_media` returns file paths.
    attachments_dir: str | None = None

    @field_validator("url")
    @classmethod
    def _daemon_url(cls, value: str) -> str:
        value = _http_url(value, "http://127.0.0.1:8080").rstrip("/")
        if value.endswith("/api/v1"):
            raise ValueError("url is the daemon's root, without /api/v1")
        return value

    @field_validator("account")
    @classmethod
    def _e164(cls, value: str | None) -> str | None:
        if value is not None and not (value.startswith("+") and value[1:].isdigit()):
            raise ValueError("account is the bot's number in E.164 form, such as +15551234567")
        return value


# Platforms whose adapter has keys of its own: their section is validated by this model.
PLATFORM_CONFIGS: dict[str, type[PlatformConfig]] = {
    "telegram": TelegramConfig,
    "slack": SlackConfig,
    "discord": DiscordConfig,
    "matrix": MatrixConfig,
    "whatsapp": WhatsAppConfig,
    "signal": SignalConfig,
}


class ApiConfig(_Model):
    host: str = "127.0.0.1"
    port: int = Field(8787, ge=0, le=65535)
    token: SecretStr | None = None
    max_body_bytes: int = Field(1_048_576, ge=1024)
    # From the first read to the last byte: a stalled upload is answered 408, not held open.
    body_timeout_seconds: float = Field(30.0, gt=0)
    max_message_chars: int = Field(100_000, ge=1)
    # Host names served besides loopback ones while no token is set (a reverse proxy's name).
    allowed_hosts: list[str] = Field(default_factory=list)

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        names = []
        for entry in value:
            name = entry.strip().lower()
            if not name or any(c in name for c in "/ @?#*\t"):
                raise ValueError(
                    f"{entry!r} is not a host name: write the name the proxy passes in Host, "
                    "optionally with :port (gateway.example.com, gateway.example.com:443)"
                )
            names.append(name)
        return names

    @field_validator("token")
    @classmethod
    def _blank_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        # `SESSIONGATE_API__TOKEN=` is no token: counted as one, it would pass the check that
        # keeps a tokenless API off public addresses, and then every request would get a 401.
        if value is not None and not value.get_secret_value().strip():
            return None
        return value


class StoreConfig(_Model):
    # `sqlite:///path/state.db`, or `postgresql://user@host/db` for several instances on one
    # database; None is the embedded `state.db` in the home's sessions folder.
    url: str | None = Field(
        None,
        description="The store's database: `sqlite:///path/state.db` or "
        "`postgresql://user@host/db` (several instances can share it); unset is `state.db` "
        "in the home's sessions folder.",
    )
    lease_ttl_seconds: float = Field(
        10.0,
        ge=2,
        description="On a shared PostgreSQL: seconds after which a silent instance's lane and "
        "leader leases may be taken over (the takeover raises the lease's epoch).",
    )
    heartbeat_seconds: float = Field(
        2.0,
        gt=0,
        description="On a shared PostgreSQL: how often each instance renews its heartbeat "
        "and its leases (at most half of `store.lease_ttl_seconds`).",
    )
    prepare_threshold: int | None = Field(
        5,
        ge=0,
        description="On PostgreSQL: run a statement as a server-side prepared statement "
        "once it has run this many times on a connection (0: from the first time). Unset "
        "(null) never prepares, for PgBouncer in transaction mode before 1.21, which cannot "
        "keep a connection's prepared statements.",
    )
    sweep_seconds: float = Field(
        1.0,
        gt=0,
        description="On a shared PostgreSQL: how often (±30 % jitter) each instance looks for "
        "lanes with waiting work and no live owner; the ground truth behind the wake-up hints.",
    )
    lane_idle_seconds: float = Field(
        30.0,
        ge=0,
        description="On a shared PostgreSQL: how long an instance keeps an idle lane's lease "
        "(the lane's next message needs no claim, and its agent stays warm there) before it "
        "gives the lane back.",
    )
    connections: int = Field(
        8,
        ge=1,
        le=64,
        description="On PostgreSQL: writer connections, and the gateway's store threads that "
        "use them; lanes whose store calls run at once overlap their round trips on this many.",
    )
    poll_only: bool = Field(
        False,
        description="On a shared PostgreSQL: no LISTEN/NOTIFY wake-ups, only the sweep (for a "
        "pooler in transaction mode, such as PgBouncer, which cannot LISTEN).",
    )

    @field_validator("url")
    @classmethod
    def _known_scheme(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip()
        if value.startswith("sqlite:///") and len(value) > len("sqlite:///"):
            return value
        if value.startswith(("postgresql://", "postgres://")):
            return value
        raise ValueError("store.url must be sqlite:///path or postgresql://…")


class RetentionConfig(_Model):
    max_age_days: int | None = Field(
        None,
        ge=1,
        description="Housekeeping deletes sessions (transcripts, search rows, archive blobs) "
        "not updated for this many days; unset keeps them.",
    )
    max_disk_mb: float | None = Field(
        None,
        gt=0,
        description="Housekeeping deletes the oldest sessions (archived first) while the "
        "store's database is larger than this many MiB; unset has no size budget.",
    )
    max_sessions: int | None = Field(
        None,
        ge=1,
        description="Housekeeping deletes the oldest sessions (archived first) while there "
        "are more than this many; unset has no count budget.",
    )


class LogConfig(_Model):
    # "auto": readable lines when stderr is a terminal, JSON lines (one object each) otherwise.
    format: Literal["auto", "console", "json"] = "auto"


# The `agent:` section's settings that `agents.main` would give a second time.
def job_agent_problem(job: JobSpec, known: set[str], bindings: list[BindingConfig]) -> str | None:
    """A job's `agent` must be configured and be the agent that serves its target: the
    agent of its session key's namespace, or the one bound to its `deliver_to` chat."""
    if job.agent is None:
        return None
    if job.agent not in known:
        return f"agent {job.agent!r} is not configured (agents: {', '.join(sorted(known))})"
    target = job.target()
    if target is None:
        serving = agent_of_key(job.session_key or "") or DEFAULT_AGENT
    else:
        source = SessionSource(
            platform=Platform(target[0]), chat_id=target[1], chat_type=ChatType(job.chat_type)
        )
        serving = agent_for(source, bindings)
    if serving != job.agent:
        return f"agent {job.agent!r} does not serve the job's target (agent {serving!r} does)"
    return None


_MAIN_SETTINGS = frozenset(
    {"echo", "openai", "context_window", "system_prompt", "system_prompt_file", "models"}
)


class TracingConfig(_Model):
    """`tracing`: OpenTelemetry spans (the `[otel]` extra; see gateway/tracing.py)."""

    enabled: bool = False
    exporter: Literal["otlp", "console", "none"] = "otlp"
    service_name: str = Field("sessiongate", min_length=1, max_length=200)


class DeliveryConfig(_Model):
    """`delivery`: how outbound messages are tried again (`store/deliveries.py`)."""

    max_age_seconds: float = Field(
        3600.0,
        gt=0,
        description="A message not confirmed sent within this long after it was written is "
        "reported dead (reason `stale`), never sent late; the default is 1 h.",
    )
    max_attempts: int = Field(
        8,
        ge=1,
        description="A message whose sends failed this many times is dead (the dead-letter "
        "list); `deliveries retry` sends it again.",
    )
    retry_backoff_seconds: float = Field(
        60.0, gt=0, description="The wait after the first failed send; doubled after each."
    )
    retry_backoff_max_seconds: float = Field(
        3600.0, gt=0, description="The longest wait between two sends of one message."
    )


# The events an outbound webhook may subscribe to: the store's change kinds
# (`store/changes.py`), kept here because config sits below the store.
WEBHOOK_EVENTS = (
    "session.created",
    "session.updated",
    "session.archived",
    "session.deleted",
    "transcript.appended",
    "turn.started",
    "turn.finished",
    "queue.changed",
    "delivery.failed",
    "session.takeover",
    "session.handback",
)


class OutboundWebhook(_Model):
    """One receiver of outbound events (`webhooks.outbound`)."""

    url: str = Field(
        pattern=r"^https?://[^\s/]+\S*$",
        max_length=2000,
        description="Where each event is POSTed (http or https).",
    )
    events: list[str] = Field(
        min_length=1,
        description="The event types sent there: " + ", ".join(WEBHOOK_EVENTS) + ".",
    )
    secret: SecretStr = Field(
        description="The HMAC-SHA256 key of the `X-Sessiongate-Signature` header.",
    )

    @field_validator("events")
    @classmethod
    def _known_events(cls, value: list[str]) -> list[str]:
        unknown = sorted(set(value) - set(WEBHOOK_EVENTS))
        if unknown:
            raise ValueError(f"unknown event {unknown[0]!r}; one of: " + ", ".join(WEBHOOK_EVENTS))
        return value

    @field_validator("secret")
    @classmethod
    def _secret_given(cls, value: SecretStr) -> SecretStr:
        if len(value.get_secret_value()) < 16:
            raise ValueError("the secret must be at least 16 characters")
        return value


class WebhooksConfig(_Model):
    """`webhooks`: events POSTed to other systems, at least once, in order per session."""

    outbound: list[OutboundWebhook] = Field(
        default_factory=list,
        description="Receivers of events: `[{url, events: [turn.finished, delivery.failed, "
        "session.created, ...], secret}]`; each event is signed, retried and kept in order "
        "per session (docs/AUTOMATION.md).",
    )
    max_attempts: int = Field(
        10, ge=1, description="An event refused this many times is dead (the dead-letter list)."
    )
    retry_backoff_seconds: float = Field(
        5.0, gt=0, description="The wait after an event's first failed POST; doubled after each."
    )
    retry_backoff_max_seconds: float = Field(
        600.0, gt=0, description="The longest wait between two POSTs of one event."
    )
    timeout_seconds: float = Field(
        10.0, gt=0, le=300, description="A POST not answered within this long has failed."
    )

    @field_validator("outbound")
    @classmethod
    def _one_per_url(cls, value: list[OutboundWebhook]) -> list[OutboundWebhook]:
        urls = [hook.url for hook in value]
        if len(set(urls)) != len(urls):
            raise ValueError("two receivers with one url; merge their events")
        return value


class HooksConfig(_Model):
    """`hooks`: inbound webhooks, each a route `POST /hooks/in/<name>` (docs/AUTOMATION.md)."""

    routes: list[HookRouteSpec] = Field(
        default_factory=list,
        description="Inbound webhook routes: `[{name, secret or bearer, session_key, prompt, "
        "deliver_to?, agent?}]`; each JSON body posted to `/hooks/in/<name>` runs one system "
        "turn, its payload fenced as untrusted data.",
    )
    dedupe_hours: int = Field(
        24,
        ge=24,
        le=24 * 90,
        description="How long a delivery id is remembered: a repeat within it runs nothing.",
    )

    @field_validator("routes")
    @classmethod
    def _unique_names(cls, value: list[HookRouteSpec]) -> list[HookRouteSpec]:
        seen: set[str] = set()
        for index, route in enumerate(value):
            if route.name in seen:
                raise ValueError(f"routes[{index}]: the name {route.name!r} is used twice")
            seen.add(route.name)
        return value


def hook_agent_problem(
    route: HookRouteSpec, known: set[str], bindings: list[BindingConfig]
) -> str | None:
    """A route's `agent` must be configured and be the agent its lane's bindings choose."""
    if route.agent is None:
        return None
    if route.agent not in known:
        return f"agent {route.agent!r} is not configured (agents: {', '.join(sorted(known))})"
    source = hook_source(route, None)
    serving = agent_for(source, bindings)
    if serving != route.agent:
        return (
            f"agent {route.agent!r} does not serve the route's lane (agent {serving!r} does; "
            f"bind it: {{platform: {source.platform}, chat_id: {source.chat_id!r}, "
            f"agent: {route.agent}}})"
        )
    return None


class TakeoverConfig(_Model):
    """`takeover`: an operator answering a chat in the agent's place (docs/AUTOMATION.md)."""

    auto_resume_minutes: float = Field(
        60.0,
        ge=0,
        le=30 * 24 * 60,
        description="A lane taken over goes back to the agent this long after the takeover "
        "began; 0: only when handed back.",
    )
    operators: list[str] = Field(
        default_factory=list,
        description="Who may say `/bot off` and `/bot on` in a chat: `<platform>:<user_id>`, "
        "as approvers are named. Empty: nobody in a chat (the HTTP routes and the dashboard, "
        "under the operator's token, still can).",
    )

    @field_validator("operators")
    @classmethod
    def _operator_ids(cls, value: list[str]) -> list[str]:
        for operator in value:
            if not _APPROVER.fullmatch(operator):
                raise ValueError(
                    f"invalid operator {operator!r}: `<platform>:<user_id>`, e.g. `telegram:12345`"
                )
        return value


class GatewayConfig(_Model):
    group_sessions_per_user: bool = True
    thread_sessions_per_user: bool = False
    session_store_max_age_days: int = 0
    redact_pii: bool = False
    reset_mode: Literal["new_session", "boundary"] = "new_session"
    reset_triggers: list[str] = Field(default_factory=lambda: ["/new", "/reset"])
    # Slash commands the agent itself understands: passed to it as text instead of being
    # answered "unknown command" (e.g. ["/shrug"]; the slash is optional).
    agent_commands: list[str] = Field(default_factory=list)
    reset_policy: ResetPolicyConfig = Field(default_factory=ResetPolicyConfig)
    busy_input_mode: Literal["interrupt", "queue"] = "interrupt"
    queue_cap: int = Field(32, ge=1)
    stuck_loop_threshold: int = Field(3, ge=1)
    housekeeping_interval_seconds: float = Field(300.0, gt=0)
    # "NORMAL" survives a process crash (WAL); "FULL" also survives power loss.
    synchronous: Literal["NORMAL", "FULL"] = "NORMAL"
    # Unset: on for a database of this home's own (SQLite), off on one instances share
    # (`SessionStore.keeps_mirror`).
    mirror_sessions_json: bool | None = None
    # Keys that refuse archive and delete (e.g. an operator's main lane).
    protected_session_keys: list[str] = Field(default_factory=list)
    platforms: dict[str, SerializeAsAny[PlatformConfig]] = Field(default_factory=dict)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    agents: dict[str, AgentSpec] = Field(
        default_factory=dict,
        description="Several agents behind one gateway, by id (`agents.support.kind: openai`). "
        "Agent `main` is the `agent:` section's unless given here; each agent's sessions have "
        "keys `agent:<id>:...`.",
    )
    bindings: list[BindingConfig] = Field(
        default_factory=list,
        description="Which agent an inbound message goes to: the first binding that matches "
        "wins; none matching means `main`.",
    )
    pricing: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description="Prices by model name, for each session's `estimated_cost_usd`; a turn "
        "of a model not listed here leaves the cost `unknown`.",
    )
    mcp_servers: dict[str, McpServerConfig] = Field(
        default_factory=dict,
        description="MCP servers whose tools agents may call (`mcp:<server>:<tool>` in an "
        "agent's `tools`), by name (a letter, then letters, digits and `_`).",
    )
    feed: FeedConfig = Field(default_factory=FeedConfig, description="The live event feed.")
    api: ApiConfig = Field(default_factory=ApiConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    retention: RetentionConfig = Field(
        default_factory=RetentionConfig,
        description="Budgets housekeeping keeps the store under; pinned, protected, busy and "
        "resume-pending sessions are never deleted.",
    )
    tracing: TracingConfig = Field(default_factory=TracingConfig)
    jobs: list[JobSpec] = Field(
        default_factory=list,
        description="Scheduled jobs (see docs/AUTOMATION.md): each runs its prompt as a "
        "system turn at every slot of its `cron`, `every` or `at` schedule, exactly once.",
    )
    webhooks: WebhooksConfig = Field(
        default_factory=WebhooksConfig,
        description="Outbound webhooks: events POSTed, signed, to other systems.",
    )
    hooks: HooksConfig = Field(
        default_factory=HooksConfig,
        description="Inbound webhooks: JSON posted to `/hooks/in/<name>` runs a system turn.",
    )
    takeover: TakeoverConfig = Field(
        default_factory=TakeoverConfig,
        description="An operator taking a chat over from the agent (`/bot off`, the "
        "dashboard's Take over, `POST /v1/sessions/{key}/takeover`).",
    )
    delivery: DeliveryConfig = Field(
        default_factory=DeliveryConfig,
        description="Outbound messages: every reply and notice is a delivery row, retried "
        "with back-off, dead after its tries or when stale.",
    )

    @field_validator("agents")
    @classmethod
    def _agent_ids(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        bad = [name for name in value if not AGENT_ID.fullmatch(name)]
        if bad:
            raise ValueError(
                f"invalid agent id {bad[0]!r}: 1 to 32 of a-z, 0-9, '_' and '-', starting "
                "with a letter or digit"
            )
        agent = info.data.get("agent")
        if DEFAULT_AGENT in value and agent is not None:
            given = sorted(_MAIN_SETTINGS & agent.model_fields_set)
            if given:
                raise ValueError(
                    "agent main is given twice: as agents.main and as "
                    + ", ".join(f"agent.{name}" for name in given)
                    + "; keep one"
                )
        return value

    @field_validator("bindings")
    @classmethod
    def _known_agents(cls, value: list[BindingConfig], info: ValidationInfo) -> list[Any]:
        known = {DEFAULT_AGENT, *info.data.get("agents", {})}
        for index, binding in enumerate(value):
            if binding.agent not in known:
                raise ValueError(
                    f"bindings[{index}] names agent {binding.agent!r}, which is not configured "
                    f"(agents: {', '.join(sorted(known))})"
                )
        return value

    @field_validator("jobs")
    @classmethod
    def _jobs(cls, value: list[JobSpec], info: ValidationInfo) -> list[JobSpec]:
        known = {DEFAULT_AGENT, *info.data.get("agents", {})}
        seen: set[str] = set()
        for index, job in enumerate(value):
            if job.id in seen:
                raise ValueError(f"jobs[{index}]: the id {job.id!r} is used twice")
            seen.add(job.id)
            problem = job_agent_problem(job, known, info.data.get("bindings", []))
            if problem is not None:
                raise ValueError(f"jobs[{index}]: {problem}")
        return value

    @field_validator("hooks")
    @classmethod
    def _hooks(cls, value: HooksConfig, info: ValidationInfo) -> HooksConfig:
        known = {DEFAULT_AGENT, *info.data.get("agents", {})}
        for index, route in enumerate(value.routes):
            problem = hook_agent_problem(route, known, info.data.get("bindings", []))
            if problem is not None:
                raise ValueError(f"routes[{index}]: {problem}")
        return value

    def job_problem(self, job: JobSpec) -> str | None:
        """Why `job` cannot run under this configuration (its agent), or None."""
        return job_agent_problem(job, set(self.agent_ids()), self.bindings)

    @field_validator("mcp_servers")
    @classmethod
    def _mcp_server_names(cls, value: dict[str, McpServerConfig]) -> dict[str, McpServerConfig]:
        bad = [name for name in value if not MCP_SERVER_NAME.fullmatch(name)]
        if bad:
            raise ValueError(
                f"invalid MCP server name {bad[0]!r}: a letter, then up to 31 letters, digits "
                "and '_'"
            )
        return value

    @model_validator(mode="after")
    def _known_mcp_servers(self) -> GatewayConfig:
        """Every `mcp:` entry of an agent's `tools` names a configured server."""
        lists: list[tuple[str, list[str]]] = [("agent.openai.tools", self.agent.openai.tools)]
        lists += [
            (f"agents.{agent_id}.tools", spec.tools)
            for agent_id, spec in self.agents.items()
            if isinstance(spec, (OpenAIAgentSpec, EntryAgentSpec))
        ]
        for setting, names in lists:
            for position, name in enumerate(names):
                if not is_mcp_tool_spec(name):
                    continue
                where = f"{setting}[{position}]"
                try:
                    ref = parse_mcp_tool_spec(name)
                except ValueError as exc:
                    raise ValueError(f"{where}: {exc}") from None
                if ref.server not in self.mcp_servers:
                    known = ", ".join(sorted(self.mcp_servers)) or "none configured"
                    raise ValueError(
                        f"{where} ({name!r}) names MCP server {ref.server!r}, which is not in "
                        f"mcp_servers ({known})"
                    )
        return self

    @field_validator("platforms", mode="before")
    @classmethod
    def _typed_platforms(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        typed: dict[object, object] = {}
        for name, section in value.items():
            model = PLATFORM_CONFIGS.get(str(name))
            if model is None or not isinstance(section, dict):
                typed[name] = section
                continue
            try:
                typed[name] = model.model_validate(section)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(map(str, e['loc']))}: "
                    + ("unknown key" if e["type"] == "extra_forbidden" else e["msg"])
                    for e in exc.errors()
                )
                raise ValueError(f"platforms.{name}: {problems}") from None
        return typed

    def connected_platforms(self) -> list[str]:
        return sorted(name for name, cfg in self.platforms.items() if cfg.enabled)

    def agent_ids(self) -> list[str]:
        """Every configured agent: `main` first."""
        return [DEFAULT_AGENT, *sorted(set(self.agents) - {DEFAULT_AGENT})]

    def agent_spec(self, agent_id: str) -> EchoAgentSpec | OpenAIAgentSpec | EntryAgentSpec:
        """The settings of agent `agent_id` (`main` from the `agent:` section unless
        `agents.main` is given); `KeyError` for an agent that is not configured."""
        if agent_id in self.agents:
            return self.agents[agent_id]
        if agent_id != DEFAULT_AGENT:
            raise KeyError(agent_id)
        shared = {
            "system_prompt": self.agent.system_prompt,
            "system_prompt_file": self.agent.system_prompt_file,
            "models": list(self.agent.models),
            "approvals": self.agent.approvals,
        }
        if self._main_is_openai():
            return OpenAIAgentSpec(kind="openai", **self.agent.openai.model_dump(), **shared)
        return EchoAgentSpec(kind="echo", **self.agent.echo.model_dump(), **shared)

    def _main_is_openai(self) -> bool:
        openai = self.agent.openai
        return bool(openai.base_url) or openai.api_key is not None

    def model_of(self, session_key: str) -> str | None:
        """The configured model of the agent serving `session_key` (None for echo agents)."""
        agent_id = agent_of_key(session_key) or DEFAULT_AGENT
        spec = self.agents.get(agent_id)
        if spec is None:
            # `main` from the `agent:` section (read here without building its spec: this
            # runs for every priced turn), or an agent no longer configured.
            main = agent_id == DEFAULT_AGENT and self._main_is_openai()
            return self.agent.openai.model if main else None
        return spec.model if isinstance(spec, OpenAIAgentSpec) else None

    def context_window_for(self, session_key: str) -> int:
        """The context window of the agent serving `session_key` (its key's namespace)."""
        agent_id = agent_of_key(session_key) or DEFAULT_AGENT
        spec = self.agents.get(agent_id)
        if spec is not None and spec.context_window is not None:
            return spec.context_window
        return self.agent.context_window
