"""Structured logs: stdlib `logging` rendered by structlog as one JSON object per line.

Library modules log through `logging.getLogger(__name__)` and pass context as `extra=`
(`session_key`, `turn_id`, ...); `configure_logging` makes every record one JSON line carrying
those fields, so the gateway's output can be filtered by session or turn with `jq`. Nothing here
runs on import: only the command line (and tests) call `configure_logging`.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import IO, TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from structlog.typing import EventDict, Processor

__all__ = ["configure_logging", "render_json"]

# Extras that only make sense on a colour terminal (uvicorn's) or that repeat other fields.
_DROPPED_EXTRAS = frozenset({"color_message", "taskName"})
_HANDLER_NAME = "sessiongate"


def render_json(_logger: Any, _name: str, event_dict: EventDict) -> str:
    """One compact JSON object; values JSON cannot hold are rendered with `str`."""
    return json.dumps(event_dict, default=str, ensure_ascii=False, separators=(",", ":"))


def _drop_noise(_logger: Any, _name: str, event_dict: EventDict) -> EventDict:
    for key in _DROPPED_EXTRAS:
        event_dict.pop(key, None)
    return event_dict


def configure_logging(level: int | str = logging.INFO, *, stream: IO[str] | None = None) -> None:
    """Route the root logger to `stream` (stderr) as JSON lines; safe to call again.

    Each line has `timestamp` (ISO-8601 UTC), `level`, `logger`, `event` (the message) and every
    `extra=` field of the record; an exception adds `exception` with the formatted traceback.
    """
    pre_chain: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _drop_noise,
    ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=pre_chain,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            render_json,
        ],
    )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
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
