"""Generates `docs/CONFIG.md` from the settings model (`core.config.GatewayConfig`).

    make config-docs      # or: .venv/bin/python -m sessiongate.cli._config_docs > docs/CONFIG.md

Every key is found by walking the model, so a key added to it appears here with its type,
default, bounds and environment variable; its meaning is the field's `description` (give one
with `Field(..., description=...)`), else the line for it in `MEANINGS` below.
`tests/cli/test_config_docs.py` fails when the file is stale or a key has no meaning.
"""

from __future__ import annotations

import json
import types
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, SecretStr
from pydantic_core import PydanticUndefined

from sessiongate.config import ENV_PREFIX
from sessiongate.core.config import PLATFORM_CONFIGS, GatewayConfig

__all__ = ["MEANINGS", "REGENERATE", "ConfigKey", "config_keys", "render_config_markdown"]

REGENERATE = "make config-docs"

# The meaning of each key whose field has no `description`. `<name>` stands for a key of a
# mapping (a platform name, a conversation type).
MEANINGS: dict[str, str] = {
    "group_sessions_per_user": "In a group, each participant gets a conversation of their own "
    "(false: the whole group shares one).",
    "thread_sessions_per_user": "In a thread, each participant gets a conversation of their "
    "own (false: the thread shares one).",
    "session_store_max_age_days": "Routing entries not updated for this many days are pruned "
    "by housekeeping and `sessions prune` (transcripts stay); 0 never prunes.",
    "redact_pii": "Hash user, chat and thread ids in the prompt's session context and in every "
    "log line (Discord ids stay raw in the prompt: the model needs them for mentions).",
    "reset_mode": "What `/new` does: `new_session` starts a new session id; `boundary` keeps "
    "the id and writes a reset boundary.",
    "reset_triggers": "The words that start a new session (`/new`, `/reset`, or any phrase).",
    "agent_commands": "Slash commands the agent understands itself: passed to it as text "
    "instead of being answered as unknown (e.g. `[/shrug]`; the slash is optional).",
    "reset_policy.mode": "Automatic resets: `none`, `daily` (at `at_hour`), `idle` (after "
    "`idle_minutes`) or `both`.",
    "reset_policy.at_hour": "Hour of the day (0-23, in `timezone`) of the daily reset.",
    "reset_policy.idle_minutes": "Minutes without a message after which the idle reset starts "
    "a new session.",
    "reset_policy.timezone": "IANA time zone of `at_hour` (e.g. `Europe/Berlin`).",
    "reset_policy.by_type.<name>.mode": "The reset mode for one conversation type (`direct`, "
    "`group`, `thread`).",
    "reset_policy.by_type.<name>.at_hour": "Daily reset hour for that conversation type.",
    "reset_policy.by_type.<name>.idle_minutes": "Idle minutes for that conversation type.",
    "reset_policy.by_channel.<name>.mode": "The reset mode for one platform (e.g. "
    "`telegram`); it wins over `by_type`.",
    "reset_policy.by_channel.<name>.at_hour": "Daily reset hour for that platform.",
    "reset_policy.by_channel.<name>.idle_minutes": "Idle minutes for that platform.",
    "busy_input_mode": "A message arriving while its conversation is answering: `interrupt` "
    "stops the reply and answers both; `queue` waits for the reply first.",
    "queue_cap": "Messages that may wait in one conversation; beyond it the sender is told "
    "the queue is full.",
    "stuck_loop_threshold": "Starts in a row that find the same turn cut off before the "
    "session is suspended instead of resumed again.",
    "housekeeping_interval_seconds": "Seconds between housekeeping passes (idle and memory "
    "sweeps of cached agents, redelivery of failed replies, hourly pruning).",
    "synchronous": "SQLite durability: `NORMAL` survives a process crash, `FULL` also a power "
    "loss (slower writes).",
    "mirror_sessions_json": "Keep `sessions/sessions.json`, a read-only copy of the routing "
    "entries for people and older tools; unset keeps it on SQLite and not on PostgreSQL, "
    "where every instance would rewrite the whole table into its own copy.",
    "protected_session_keys": "Session keys that refuse archive and delete (e.g. an "
    "operator's main conversation).",
    "platforms.<name>.enabled": "Whether the platform is connected (it is listed in the "
    "prompt's connected platforms).",
    "platforms.<name>.allow_from": "The user ids let in (`*` for everyone); unset lets "
    "everyone in. Platform adapters (docs/ADAPTERS.md) read it as user *and* chat ids and fail "
    "closed: unset admits only the DM senders `dm_policy` admits.",
    "platforms.<name>.home_channel": "The platform's home channel id, shown to the agent in "
    "the session context.",
    "platforms.<name>.token": "The platform's bot token.",
    "platforms.<name>.require_mention": "In groups and channels, answer only when mentioned, "
    "replied to, addressed `/cmd@bot`, or in a thread the bot takes part in.",
    "platforms.<name>.dm_policy": "DM senders not on `allow_from`: `allowlist` ignores them, "
    "`open` admits them, `pairing` answers with one code to approve with `sessiongate pairing "
    "approve CODE`.",
    "platforms.<name>.mention_patterns": "Regular expressions (case-insensitive) that count as "
    "addressing the bot in groups.",
    "platforms.<name>.answer_edits": "An edited message starts a turn (off: edits are ignored).",
    "platforms.<name>.allow_bots": "Other bots' messages may start turns (the bot's own never).",
    "platforms.<name>.max_media_mb": "Largest inbound attachment taken, in MB; a larger one "
    "is answered that it is too large.",
    "platforms.<name>.pairing_ttl_seconds": "Seconds a pairing code stays valid.",
    "platforms.<name>.merge_window_seconds": "A message as long as the client's split length "
    "waits this long for the rest of the paste from the same sender in the same chat and thread, "
    "merged into one message (0: off).",
    "platforms.<name>.reply_to_mode": "Whether a reply quotes (replies to) the message it "
    "answers: `first` its first chunk, `all` every chunk, `off` none. Slack has no quoted "
    "replies (replies stay in the message's thread).",
    "platforms.<name>.max_backlog_seconds": "A message older than this when it arrives (by the "
    "platform's own timestamp; a backlog after an outage) is not answered; unset: all are.",
    "platforms.<name>.media_dirs": "Folders a reply may send files from (a `MEDIA: <path>` line "
    "in the reply); none: replies send no files.",
    "platforms.<name>.max_upload_mb": "The largest file a reply sends, in MB; unset: the "
    "platform's own limit (Telegram 50, Discord 10, Slack 1,000, WhatsApp 100). A larger one "
    "gets a line of text instead.",
    "platforms.<name>.bot_loop_max_messages": "With `allow_bots`: more bot messages than this in "
    "one chat within `bot_loop_window_seconds` start a cooldown in which bots are ignored there.",
    "platforms.<name>.bot_loop_window_seconds": "The window the bot messages are counted in.",
    "platforms.<name>.bot_loop_cooldown_seconds": "How long bots are ignored in a chat after a "
    "burst (human messages never are).",
    "platforms.<name>.merge_min_length": "The length (measured the platform's way) from which a "
    "message counts as a split part; unset: 95% of the platform's message limit.",
    "platforms.telegram.base_url": "The Bot API root: https://api.telegram.org or a "
    "self-hosted Bot API server (without `/bot<token>`).",
    "platforms.telegram.mode": "`polling` (getUpdates) or `webhook` (`POST /hooks/telegram` "
    "on this gateway's HTTP server).",
    "platforms.telegram.webhook_secret": "The secret Telegram sends as "
    "`X-Telegram-Bot-Api-Secret-Token`; required in webhook mode.",
    "platforms.telegram.webhook_url": "The public URL registered with setWebhook at start "
    "(unset: register it yourself).",
    "platforms.telegram.poll_timeout_seconds": "The long-poll timeout of each getUpdates.",
    "platforms.telegram.poll_stall_seconds": "A getUpdates that has not answered this long "
    "after its timeout is abandoned and the client rebuilt (the watchdog).",
    "platforms.telegram.drop_pending_updates": "Drop the updates that waited while the "
    "gateway was down (off: they are answered).",
    "platforms.slack.bot_token": "The bot token (`xoxb-...`) the Web API is called with.",
    "platforms.slack.app_token": "The app-level token (`xapp-...`, scope `connections:write`) "
    "that opens the Socket Mode websocket; required in socket mode.",
    "platforms.slack.signing_secret": "The app's signing secret: `POST /hooks/slack/events` "
    "and `POST /hooks/slack/interactivity` check `X-Slack-Signature` with it; required in "
    "events mode.",
    "platforms.slack.mode": "`socket` (Socket Mode, no public URL) or `events` (the Events "
    "API posting to `POST /hooks/slack/events` on this gateway's HTTP server).",
    "platforms.slack.base_url": "The Web API root (https://slack.com/api/, or a stub).",
    "platforms.slack.app_config_token": "An app configuration token (`xoxe-...`): with "
    "`app_id`, the gateway's commands are written into the app manifest (unset: add them by "
    "hand).",
    "platforms.slack.app_id": "The app's id (`A...`), for the manifest update.",
    "platforms.slack.socket_stall_seconds": "The Socket Mode socket has not been connected "
    "for this long: it is closed and rebuilt (the watchdog).",
    "platforms.discord.api_base_url": "The REST root (https://discord.com/api/v10, or a stub); "
    "the gateway URL comes from its GET /gateway/bot.",
    "platforms.discord.allow_roles": "Role ids whose members are admitted in guilds, beside "
    "`allow_from` (the source is marked `role_authorized`).",
    "platforms.discord.command_sync": "`diff`: the application commands are created, edited "
    "and deleted to match the gateway's, keeping ids; `off`: left alone.",
    "platforms.discord.gateway_stall_seconds": "The gateway has delivered nothing (not even "
    "a heartbeat ack) for this long: the socket is closed and reopened (the watchdog).",
    "platforms.matrix.homeserver": "The homeserver's root URL (https://matrix.example.org, "
    "or a stub), without `/_matrix`.",
    "platforms.matrix.user_id": "The bot's Matrix id (`@bot:example.org`); when set, the "
    "start fails unless the access token belongs to it.",
    "platforms.matrix.access_token": "The bot account's access token (never logged); see "
    "docs/platforms/matrix.md for how to get one.",
    "platforms.matrix.sync_timeout_seconds": "How long one `/sync` long poll waits for events "
    "on the homeserver.",
    "platforms.matrix.sync_stall_seconds": "No `/sync` has completed for this long beyond its "
    "own timeout: its connection is closed and rebuilt (the watchdog).",
    "platforms.whatsapp.phone_number_id": "The business phone number's id (WhatsApp Manager, "
    "API setup) the Graph API sends from; webhooks for other numbers are skipped.",
    "platforms.whatsapp.app_secret": "The Meta app's secret: every `POST /hooks/whatsapp` must "
    "carry `X-Hub-Signature-256`, the HMAC-SHA256 of its body with it.",
    "platforms.whatsapp.verify_token": "Any string you choose and enter in the app's webhook "
    "settings: `GET /hooks/whatsapp` answers Meta's challenge only for it.",
    "platforms.whatsapp.base_url": "The Graph API root (https://graph.facebook.com, a proxy, "
    "or a stub), without the `/vNN.N` version.",
    "platforms.whatsapp.api_version": "The Graph API version the requests use.",
    "platforms.whatsapp.window_template": "An approved message template (no parameters) sent "
    "once when a reply falls outside the 24-hour customer-service window, inviting the user to "
    "write again; unset: the reply only fails, logged.",
    "platforms.whatsapp.window_template_language": "The template's language code (`en_US`).",
    "platforms.whatsapp.max_webhook_bytes": "The largest webhook body taken (at most 1 MiB, the "
    "route's own bound); a larger one is a "
    "413 and is not parsed.",
    "platforms.signal.url": "The signal-cli daemon's root (`signal-cli -a +NUMBER daemon "
    "--http 127.0.0.1:8080`): JSON-RPC at `/api/v1/rpc`, events at `/api/v1/events`.",
    "platforms.signal.account": "The bot's account (E.164 number) as registered or linked in "
    "signal-cli; required.",
    "platforms.signal.ack_reaction": "The reaction put on a message once the gateway accepted "
    "it (empty: none).",
    "platforms.signal.stream_stall_seconds": "The event stream delivered nothing (not even a "
    "keep-alive) for this long: the daemon is probed and the stream reopened (the watchdog).",
    "platforms.signal.attachments_dir": "signal-cli's attachments folder, when it is on this "
    "host: inbound attachments resolve to files there (else they are fetched over JSON-RPC).",
    "agent.gateway_timeout": "Seconds one agent turn may take before it is stopped and the "
    "user told.",
    "agent.gateway_auto_continue_freshness": "Seconds after its acceptance within which a "
    "turn cut off by a restart is resumed; older ones are reported as interrupted.",
    "agent.restart_drain_timeout": "Seconds a stop waits for running turns before it "
    "journals them for resume at the next start.",
    "agent.agent_cache.max_size": "Agents kept in memory at most (one per conversation).",
    "agent.agent_cache.idle_ttl_secs": "Seconds an unused agent stays cached.",
    "agent.agent_cache.memory_high_mb": "Memory budget of the cache in MB: `auto` derives it "
    "from the cgroup limit (else total RAM); `off` or 0 disables the valve.",
    "agent.agent_cache.max_evictions_per_pass": "Agents evicted at most per pass of the "
    "memory valve.",
    "agent.agent_cache.protect_recent": "The most recently used agents that the memory valve "
    "never evicts.",
    "agent.echo.delay_seconds": "The echo agent waits this long before replying (to see "
    "busy-conversation behaviour by hand).",
    "agents.<name>.delay_seconds": "As `agent.echo.delay_seconds`, for this echo agent.",
    "agents.<name>.base_url": "As `agent.openai.base_url`, for this OpenAI-compatible agent.",
    "agents.<name>.api_key": "As `agent.openai.api_key`, for this agent.",
    "agents.<name>.model": "As `agent.openai.model`, for this agent (and what its turns are "
    "priced by in `pricing`).",
    "agents.<name>.timeout_seconds": "As `agent.openai.timeout_seconds`, for this agent.",
    "agent.context_window": "The model's context window in tokens: forks beyond it are "
    "refused and compaction keeps about a quarter of it.",
    "api.host": "Address the HTTP API listens on; without `api.token` only a loopback "
    "address is allowed.",
    "api.port": "Port of the HTTP API (0 picks a free one).",
    "api.token": "Bearer token every route but `/healthz` requires; unset (or empty) means no "
    "authentication, on loopback only; beyond loopback it must be at least 16 characters.",
    "api.allowed_hosts": "Host names served besides loopback ones while `api.token` is unset "
    "(`name` or `name:port`), for a reverse proxy that passes its own name in `Host`; any "
    "other Host gets a 421, which keeps DNS-rebinding pages out.",
    "api.max_body_bytes": "Largest request body accepted, in bytes (a larger one is a 413).",
    "api.body_timeout_seconds": "Seconds a request body may take to arrive, from its first "
    "read to its last byte; a stalled upload is answered 408.",
    "api.max_message_chars": "Longest message text accepted, in characters.",
    "tracing.enabled": "Export OpenTelemetry spans of inbound messages, turns, agent and model "
    "calls, tool calls and deliveries (the `[otel]` extra; docs/OPERATIONS.md).",
    "tracing.exporter": "`otlp`: OTLP over HTTP, configured by the standard "
    "`OTEL_EXPORTER_OTLP_*` variables; `console`: spans printed on stdout; `none`: the tracer "
    "provider already installed (e.g. by `opentelemetry-instrument`).",
    "tracing.service_name": "The `service.name` of the spans' resource.",
    "log.format": "`console`: readable lines; `json`: one JSON object per line; `auto`: "
    "console when stderr is a terminal, else JSON.",
}

_INTRO = f"""\
# Configuration

<!-- Generated by `{REGENERATE}` from the settings model (sessiongate/core/config.py);
     tests/cli/test_config_docs.py fails when the two differ. Edit the model, not this. -->

sessiongate reads `config.yaml` in its home (or the file given with `--config` or
`$SESSIONGATE_CONFIG`); every key is optional. Keys nest as YAML mappings or as dotted names
(`agent.echo.delay_seconds: 1` is `agent: {{echo: {{delay_seconds: 1}}}}`). An environment
variable overrides one value: `{ENV_PREFIX}` and the key's path in upper case, `__` between
levels; its value is read as YAML (`true`, `30`, `[a, b]`), except for text keys, which take
the raw string. `<NAME>` in a variable is the mapping key (a platform name, in upper case).
A list of sections (`bindings`) is set whole by one variable holding it as JSON:
`SESSIONGATE_BINDINGS='[{{"platform": "telegram", "chat_id": "42", "agent": "support"}}]'`.
`sessiongate config` prints the configuration in effect, secrets masked (every `secret` key
and a password written into a URL); no error or log line shows them either.

| key | type | default | meaning | environment variable |
|---|---|---|---|---|
"""


@dataclass(frozen=True, slots=True)
class ConfigKey:
    path: str  # dotted, `<name>` for a mapping's key
    type: str
    default: str
    meaning: str
    env: str


def config_keys() -> list[ConfigKey]:
    """Every leaf key of `GatewayConfig`, in the model's order."""
    return list(_walk(GatewayConfig, ()))


def _walk(model: type[BaseModel], prefix: tuple[str, ...], only: list[str] | None = None) -> Any:
    for name, field in model.model_fields.items():
        if only is not None and name not in only:
            continue
        path = (*prefix, name)
        annotation = _strip_optional(field.annotation)
        if _is_model(annotation):
            yield from _walk(annotation, path)
            continue
        value = _strip_optional(get_args(annotation)[1]) if get_origin(annotation) is dict else None
        if value is not None and _is_model(value):
            yield from _walk(value, (*path, "<name>"))
            # Sections with keys of their own (`platforms.telegram`): those keys by name.
            for section, special in PLATFORM_CONFIGS.items():
                if path == ("platforms",) and issubclass(special, value):
                    own = [n for n in special.model_fields if n not in value.model_fields]
                    yield from _walk(special, (*path, section), only=own)
            continue
        if get_origin(annotation) is dict and _models_of(get_args(annotation)[1]):
            # A mapping of a choice of models (`agents.<name>`, by `kind`): each key once.
            yield from _merged(_models_of(get_args(annotation)[1]), (*path, "<name>"))
            continue
        if get_origin(annotation) is list and _is_model(get_args(annotation)[0]):
            yield from _walk(get_args(annotation)[0], (*path[:-1], f"{name}[]"))
            continue
        dotted = ".".join(path)
        yield ConfigKey(
            path=dotted,
            type=_type_name(field.annotation) + _bounds(field.metadata),
            default=_default(field),
            meaning=field.description or MEANINGS.get(dotted, ""),
            # A list's items have no variable of their own: the whole list is set in YAML.
            env=""
            if any(p.endswith("[]") for p in path)
            else ENV_PREFIX + "__".join(p.upper() for p in path),
        )


def _models_of(annotation: Any) -> list[type[BaseModel]]:
    """The models of an (annotated) union of models, else none."""
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) not in (Union, types.UnionType):
        return []
    members = list(get_args(annotation))
    return members if all(_is_model(m) for m in members) else []


def _merged(models: list[type[BaseModel]], prefix: tuple[str, ...]) -> Any:
    """The keys of every model under `prefix`; a key several models have is listed once,
    with the types they give it joined (`kind`: `"echo"` or `"openai"`)."""
    seen: dict[str, ConfigKey] = {}
    for model in models:
        for key in _walk(model, prefix):
            known = seen.get(key.path)
            if known is None:
                seen[key.path] = key
            elif key.type != known.type:
                seen[key.path] = replace(known, type=f"{known.type} \\| {key.type}")
    yield from seen.values()


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _strip_optional(annotation: Any) -> Any:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{json.dumps(a)}`" for a in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in get_args(annotation))
    if origin is list:
        return f"list of {_type_name(get_args(annotation)[0])}"
    if origin is dict:
        return f"mapping of {_type_name(get_args(annotation)[1])}"
    names = {bool: "bool", int: "int", float: "number", str: "text", SecretStr: "secret"}
    if annotation is type(None):
        return "null"
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(metadata: list[Any]) -> str:
    found = []
    for item in metadata:
        if isinstance(item, annotated_types.Ge):
            found.append(f"≥ {item.ge}")
        elif isinstance(item, annotated_types.Gt):
            found.append(f"> {item.gt}")
        elif isinstance(item, annotated_types.Le):
            found.append(f"≤ {item.le}")
    return f" ({', '.join(found)})" if found else ""


def _default(field: Any) -> str:
    value = field.default
    if value is PydanticUndefined and field.default_factory is None:
        return "required"
    if value is PydanticUndefined:
        value = field.default_factory()
    if value is None:
        return "unset"
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _list_variable(path: str) -> str:
    """The variable that sets the whole list a `list[].key` belongs to."""
    return ENV_PREFIX + "__".join(p.upper() for p in path.split("[]")[0].split("."))


def render_config_markdown() -> str:
    rows = [
        f"| `{k.path}` | {k.type} | {k.default} | {_cell(k.meaning)} | "
        + (f"`{k.env}` |" if k.env else f"`{_list_variable(k.path)}` (the list, as JSON) |")
        for k in config_keys()
    ]
    return _INTRO + "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(render_config_markdown(), end="")
