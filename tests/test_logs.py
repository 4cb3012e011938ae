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


def test_redaction_hashes_every_id_field_and_keys_inside_text(stream):
    from sessiongate.core.redaction import redact_session_key

    configure_logging(stream=stream, redact_ids=True)
    key = "agent:main:whatsapp:dm:+15551234567"
    spaced = "agent:main:api:group:my room"
    try:
        raise LookupError(f"no session with key {key!r}")
    except LookupError:
        logging.getLogger("x").exception(
            f"failed on /v1/sessions/{key.replace(':', '%3A')}/rewind",
            extra={"session_key": spaced, "user_id": "+15551234567", "chat_id": "room-9"},
        )
    text = stream.getvalue()
    [line] = _lines(stream)
    for raw in ("15551234567", "my room", "room-9"):
        assert raw not in text
    assert line["session_key"] == redact_session_key(spaced)
    assert line["user_id"].startswith("user_")
    assert redact_session_key(key) in line["event"]
    assert redact_session_key(key) in line["exception"]


def test_without_redaction_ids_stay_as_they_are(stream):
    configure_logging(stream=stream)
    logging.getLogger("x").info("t", extra={"session_key": "agent:main:api:dm:ann"})
    assert _lines(stream)[0]["session_key"] == "agent:main:api:dm:ann"


def test_console_format_is_one_readable_line_per_record(stream):
    configure_logging(stream=stream, log_format="console")
    logging.getLogger("x").info("turn started", extra={"turn_id": 3})
    [line] = stream.getvalue().splitlines()
    assert not line.startswith("{")
    assert "turn started" in line
    assert "turn_id=3" in line
    assert "\x1b[" not in line  # no colour codes into a file


def test_auto_format_is_json_off_a_terminal_and_console_on_one():
    from sessiongate.logs import resolve_format

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert resolve_format("auto", io.StringIO()) == "json"
    assert resolve_format("auto", Tty()) == "console"
    assert resolve_format("json", Tty()) == "json"
