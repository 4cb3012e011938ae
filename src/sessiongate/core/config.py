"""`GatewayConfig`: every key of the spec's configuration appendix under the same names.

Constructible with keyword arguments; `sessiongate.config.load_config` reads YAML plus
`SESSIONGATE_*` environment overrides into it. Dotted names nest (`agent.echo.delay_seconds`).
"""

from __future__ import annotations

from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    SerializeAsAny,
    ValidationError,
    field_validator,
)

__all__ = [
    "PLATFORM_CONFIGS",
    "AgentCacheConfig",
    "AgentConfig",
    "ApiConfig",
    "DiscordConfig",
    "EchoAgentConfig",
    "GatewayConfig",
    "LogConfig",
    "OpenAIAgentConfig",
    "PlatformConfig",
    "ResetPolicyConfig",
    "ResetRule",
    "SlackConfig",
    "TelegramConfig",
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


class OpenAIAgentConfig(_Model):
    base_url: str | None = None
    api_key: SecretStr | None = None
    model: str = "gpt-4o-mini"
    timeout_seconds: float = Field(120.0, gt=0)


class AgentConfig(_Model):
    gateway_timeout: int = Field(1800, ge=1)
    gateway_auto_continue_freshness: int = Field(3600, ge=0)
    restart_drain_timeout: float = Field(30.0, ge=0)
    agent_cache: AgentCacheConfig = Field(default_factory=AgentCacheConfig)
    echo: EchoAgentConfig = Field(default_factory=EchoAgentConfig)
    openai: OpenAIAgentConfig = Field(default_factory=OpenAIAgentConfig)
    # Model context window used to admit forks and trigger compaction (tokens).
    context_window: int = Field(100_000, ge=1000)


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


# Platforms whose adapter has keys of its own: their section is validated by this model.
PLATFORM_CONFIGS: dict[str, type[PlatformConfig]] = {
    "telegram": TelegramConfig,
    "slack": SlackConfig,
    "discord": DiscordConfig,
}


class ApiConfig(_Model):
    host: str = "127.0.0.1"
    port: int = Field(8787, ge=0, le=65535)
    token: SecretStr | None = None
    max_body_bytes: int = Field(1_048_576, ge=1024)
    # From the first read to the last byte: a stalled upload is answered 408, not held open.
    body_timeout_seconds: float = Field(30.0, gt=0)
    max_message_chars: int = Field(100_000, ge=1)

    @field_validator("token")
    @classmethod
    def _blank_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        # `SESSIONGATE_API__TOKEN=` is no token: counted as one, it would pass the check that
        # keeps a tokenless API off public addresses, and then every request would get a 401.
        if value is not None and not value.get_secret_value().strip():
            return None
        return value


class LogConfig(_Model):
    # "auto": readable lines when stderr is a terminal, JSON lines (one object each) otherwise.
    format: Literal["auto", "console", "json"] = "auto"


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
    mirror_sessions_json: bool = True
    # Keys that refuse archive and delete (e.g. an operator's main lane).
    protected_session_keys: list[str] = Field(default_factory=list)
    platforms: dict[str, SerializeAsAny[PlatformConfig]] = Field(default_factory=dict)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    api: ApiConfig = Field(default_factory=ApiConfig)
    log: LogConfig = Field(default_factory=LogConfig)

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
