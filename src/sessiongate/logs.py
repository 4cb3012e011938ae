"""Structured logs: stdlib `logging` rendered by structlog, as JSON lines or for a person.

Library modules log through `logging.getLogger(__name__)` and pass context as `extra=`
(`session_key`, `turn_id`, ...); `configure_logging` renders every record with those fields:
one JSON object per line (`json`, for `jq` and log shippers) or one readable line (`console`,
for a terminal; `auto` picks it when the stream is a terminal). Nothing here runs on import:
only the command line (and tests) call `configure_logging`.

With `redact_ids` (the config's `redact_pii`), no raw id reaches a line: session keys are
shown as `core.redaction.redact_session_key` shows them in the prompt, user and chat id fields
are hashed the same way, and key-shaped text inside messages and errors is replaced too. It
is applied to every record in one place, so a log call written later cannot forget it.

The configuration's secrets (`hide_secrets`, given by the command line once the configuration
is read) never reach a line either: every rendered line, the traceback included, is masked
(`core.secrets`), whatever a library put in its message.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import IO, TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

from sessiongate.core.redaction import hash_chat_id, hash_user_id, redact_session_key
from sessiongate.core.secrets import mask_secrets

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from structlog.typing import EventDict, Processor

__all__ = [
    "LogFormat",
    "configure_logging",
    "hidden",
    "hide_secrets",
    "redact_record",
    "render_json",
    "resolve_format",
]

# Values no line may show (`hide_secrets`): read when a line is rendered, so a secret hidden
# after `configure_logging` ran is masked all the same.
_secrets: frozenset[str] = frozenset()


def hide_secrets(values: Iterable[str]) -> None:
    """Mask these values (the configuration's secrets) in every line and error from now on."""
    global _secrets
    _secrets = _secrets | frozenset(values)


def hidden(text: str) -> str:
    """`text` with every hidden secret masked (`***`)."""
    return mask_secrets(text, _secrets)


def _masking(render: Callable[[Any, str, EventDict], str]) -> Processor:
    def masked(logger: Any, name: str, event_dict: EventDict) -> str:
        return hidden(render(logger, name, event_dict))

    return masked


LogFormat = Literal["auto", "console", "json"]

# Extras that only make sense on a colour terminal (uvicorn's) or that repeat other fields.
_DROPPED_EXTRAS = frozenset({"color_message", "taskName"})
_HANDLER_NAME = "sessiongate"

# Fields that hold a whole id, hashed as the prompt hashes that kind of id.
_KEY_FIELDS = frozenset({"session_key", "tagged_key", "key"})
_USER_FIELDS = frozenset({"user_id", "participant_id", "alias", "canonical", "sender"})
_CHAT_FIELDS = frozenset({"chat_id", "thread_id", "home_channel"})
# A session key inside free text (an error message, a request path), raw or URL-encoded. A
# key's components are percent-escaped for `:` only, so its end is guessed at a space, a
# quote or a bracket (and in a URL at `/`, `?`, `&`, `#`); the record's own key fields are
# also replaced exactly (see `redact_record`).
_KEY_IN_TEXT = re.compile(
    r"\bagent:[\w.-]+:[^\s\"'<>,;()\[\]{}]+"
    r"|\bagent%3[Aa][\w.-]+%3[Aa][^\s\"'<>,;()\[\]{}/?&#]+"
)
_HELD = re.compile("\x00([0-9]+)\x00")


def render_json(_logger: Any, _name: str, event_dict: EventDict) -> str:
    """One compact JSON object; values JSON cannot hold are rendered with `str`."""
    return json.dumps(event_dict, default=str, ensure_ascii=False, separators=(",", ":"))


def _drop_noise(_logger: Any, _name: str, event_dict: EventDict) -> EventDict:
    for key in _DROPPED_EXTRAS:
        event_dict.pop(key, None)
    return event_dict


def _hashed_key_in_text(text: str) -> str:
    # Percent-encoded (from a URL path): decode to the key first, so the hash is the key's.
    return redact_session_key(text if text.startswith("agent:") else unquote(text))


def redact_record(_logger: Any, _name: str, event_dict: EventDict) -> EventDict:
    """Replace every raw id in the record by its hashed form (a structlog processor)."""
    keys: dict[str, str] = {}
    ids: dict[str, str] = {}
    for name, value in event_dict.items():
        if not isinstance(value, str) or not value:
            continue
        if name in _KEY_FIELDS:
            keys[value] = redact_session_key(value)
        elif name in _USER_FIELDS:
            ids[value] = hash_user_id(value)
        elif name in _CHAT_FIELDS:
            ids[value] = hash_chat_id(value)
    # Each replacement is held as a placeholder until the end, so no later step rewrites a
    # hash (a short numeric id could occur inside one). Keys go first and whole, then other
    # key-shaped text, then bare ids, each longest first.
    held: list[str] = []

    def hold(hashed: str) -> str:
        held.append(hashed)
        return f"\x00{len(held) - 1}\x00"

    for name, value in list(event_dict.items()):
        if not isinstance(value, str):
            continue
        for raw in sorted(keys, key=len, reverse=True):
            if raw in value:
                value = value.replace(raw, hold(keys[raw]))
        value = _KEY_IN_TEXT.sub(lambda m: hold(_hashed_key_in_text(m.group(0))), value)
        for raw in sorted(ids, key=len, reverse=True):
            if raw in value:
                value = value.replace(raw, hold(ids[raw]))
        event_dict[name] = _HELD.sub(lambda m: held[int(m.group(1))], value)
    return event_dict


def resolve_format(wanted: LogFormat, stream: IO[str]) -> Literal["console", "json"]:
    """`auto` is `console` on a terminal (a person reads it) and `json` anywhere else."""
    if wanted != "auto":
        return wanted
    isatty = getattr(stream, "isatty", None)
    return "console" if isatty is not None and isatty() else "json"


def configure_logging(
    level: int | str = logging.INFO,
    *,
    stream: IO[str] | None = None,
    log_format: LogFormat = "json",
    redact_ids: bool = False,
) -> None:
    """Route the root logger to `stream` (stderr); safe to call again.

    A JSON line has `timestamp` (ISO-8601 UTC), `level`, `logger`, `event` (the message) and
    every `extra=` field of the record; an exception adds `exception` with the formatted
    traceback. A console line shows the same fields as `name=value` after the message.
    """
    # Here, not at the top: only a command that logs needs structlog (`hidden` does not).
    import structlog

    out = stream if stream is not None else sys.stderr
    pre_chain: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _drop_noise,
    ]
    # The traceback becomes text first, so redaction sees it too.
    final: list[Processor] = [
        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
        structlog.processors.format_exc_info,
    ]
    if redact_ids:
        final.append(redact_record)
    render: Callable[[Any, str, EventDict], str] = render_json
    if resolve_format(log_format, out) == "console":
        render = structlog.dev.ConsoleRenderer(
            colors=bool(getattr(out, "isatty", lambda: False)()),
            exception_formatter=structlog.dev.plain_traceback,
            pad_event_to=0,
        )
    final.append(_masking(render))
    formatter = structlog.stdlib.ProcessorFormatter(foreign_pre_chain=pre_chain, processors=final)
    handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    # Replace our own handler on a second call instead of stacking duplicates.
    for existing in list(root.handlers):
        if existing.get_name() == _HANDLER_NAME:
            root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level)
    # structlog-native loggers (if a caller uses them) go through the same formatter.
    structlog.configure(
        processors=[*pre_chain, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
