from __future__ import annotations

import io
import json
import logging

import pytest
import structlog

from sessiongate.logs import configure_logging


@pytest.fixture
def stream():
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    out = io.StringIO()
    yield out
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_records_are_json_lines_carrying_their_extras(stream):
    configure_logging(stream=stream)
    logging.getLogger("sessiongate.gateway.test").info(
        "turn finished", extra={"session_key": "agent:main:api:dm:a", "turn_id": 7}
    )
    [line] = _lines(stream)
    assert line["event"] == "turn finished"
    assert line["level"] == "info"
    assert line["logger"] == "sessiongate.gateway.test"
    assert line["session_key"] == "agent:main:api:dm:a"
    assert line["turn_id"] == 7
    assert line["timestamp"].endswith("Z")


def test_an_exception_is_rendered_into_the_line(stream):
    configure_logging(stream=stream)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("x").exception("it failed", extra={"turn_id": 1})
    [line] = _lines(stream)
    assert "RuntimeError: boom" in line["exception"]
    assert line["level"] == "error"


def test_configuring_twice_does_not_duplicate_lines(stream):
    configure_logging(stream=stream)
    configure_logging(stream=stream)
    logging.getLogger("x").warning("once")
    assert len(_lines(stream)) == 1


def test_values_json_cannot_hold_are_rendered_as_text(stream):
    configure_logging(stream=stream)
    logging.getLogger("x").info("odd", extra={"path": object(), "color_message": "\x1b[1m"})
    [line] = _lines(stream)
    assert line["path"].startswith("<object")
    assert "color_message" not in line


def test_level_filters_records(stream):
    configure_logging("WARNING", stream=stream)
    logging.getLogger("x").info("hidden")
    logging.getLogger("x").warning("shown")
    assert [line["event"] for line in _lines(stream)] == ["shown"]
