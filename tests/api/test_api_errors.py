from __future__ import annotations

import inspect
import logging

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import sessiongate.errors as errors_module
from sessiongate.api.errors import (
    ERROR_STATUS,
    CatchAllMiddleware,
    install_error_handlers,
    status_for,
)
from sessiongate.errors import SessiongateError, SessionNotFoundError

ERROR_CLASSES = [
    cls
    for _, cls in inspect.getmembers(errors_module, inspect.isclass)
    if issubclass(cls, SessiongateError) and cls is not SessiongateError
]


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_of_the_library_has_a_status(cls):
    status = status_for(cls("x"))
    assert status is not None
    assert 400 <= status < 600


def test_statuses_are_inherited_along_the_mro():
    class GoneError(SessionNotFoundError):
        code = "gone"

    assert status_for(GoneError("x")) == 404


def test_an_unlisted_error_has_no_status():
    class OddError(SessiongateError):
        code = "odd"

    assert status_for(OddError("x")) is None
    assert status_for(ValueError("x")) is None
    assert SessiongateError not in ERROR_STATUS


@pytest.fixture
def tiny() -> TestClient:
    app = FastAPI()
    install_error_handlers(app)
    app.add_middleware(CatchAllMiddleware)

    class OddError(SessiongateError):
        code = "odd"

    @app.get("/gone")
    async def gone() -> None:
        raise SessionNotFoundError("no such thing", session_key="k")

    @app.get("/odd")
    async def odd() -> None:
        raise OddError("unmapped")

    @app.get("/bug")
    async def bug() -> None:
        raise RuntimeError("secret internals")

    return TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)


def test_a_mapped_error_is_its_status_and_code(tiny):
    response = tiny.get("/gone")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "session_not_found", "message": "no such thing"}}


@pytest.mark.parametrize("path", ["/odd", "/bug"])
def test_anything_unmapped_is_a_generic_500_with_the_traceback_logged(tiny, caplog, path):
    with caplog.at_level(logging.ERROR, logger="sessiongate.api.errors"):
        response = tiny.get(path)
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert "secret" not in response.text
    assert any(r.exc_info for r in caplog.records)


def test_unknown_routes_and_methods_are_json_errors(client):
    missing = client.get("/v1/nothing")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    wrong = client.put("/v1/sessions")
    assert wrong.status_code == 405
    assert wrong.json()["error"]["code"] == "method_not_allowed"


BAD_REQUESTS = [
    ("GET", "/v1/sessions?limit=0", None),
    ("GET", "/v1/sessions?limit=abc", None),
    ("GET", "/v1/sessions?offset=-1", None),
    ("GET", "/v1/sessions?offset=99999999999999999999999", None),
    ("GET", "/v1/sessions?active_minutes=999999999999", None),
    ("GET", "/v1/sessions?archived=maybe", None),
    ("GET", "/v1/sessions/%ff%fe", None),
    ("GET", "/v1/sessions/%00", None),
    ("GET", "/v1/sessions/" + "a" * 5000, None),
    ("GET", "/v1/search?q=" + "x" * 1001, None),
    ("GET", "/v1/search?q=a&limit=100000", None),
    ("POST", "/v1/sessions/agent%3Amain%3Aapi%3Adm%3Ax/rewind", b"null"),
    ("POST", "/v1/sessions/agent%3Amain%3Aapi%3Adm%3Ax/rewind", b'{"turns": 1.5}'),
    (
        "POST",
        "/v1/sessions/agent%3Amain%3Aapi%3Adm%3Ax/branches/switch",
        b'{"leaf_entry_id": true}',
    ),
    ("PATCH", "/v1/sessions/agent%3Amain%3Aapi%3Adm%3Ax", b'{"expected_marked_unread_at": "soon"}'),
    ("POST", "/v1/messages", b'{"chat_id": "a", "text": "x", "message_id": ""}'),
    ("POST", "/v1/messages", b'{"chat_id": "' + b"x" * 1025 + b'", "text": "x"}'),
    ("POST", "/v1/messages", b"\xff\xfe"),
    ("POST", "/v1/messages", b'{"chat_id": "a", "text": "x"} trailing'),
    ("POST", "/v1/messages", b"[" * 10000),
]


@pytest.mark.parametrize(("method", "url", "body"), BAD_REQUESTS)
def test_bad_input_is_always_a_4xx_json_error(client, method, url, body):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    response = client.request(method, url, content=body, headers=headers)
    assert 400 <= response.status_code < 500, response.text
    assert set(response.json()["error"]) >= {"code", "message"}


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"chat_id": "a", "text": "\xff"}', "UTF-8"),
        (b'{"chat_id": "\xc3\x28", "text": "x"}', "UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested"),
        (b'{"a": ' * 50_000 + b"1" + b"}" * 50_000, "nested"),
    ],
)
def test_a_body_json_cannot_decode_is_invalid_json(client, body, words):
    # The parser fails on these with other errors than a syntax error (UnicodeDecodeError,
    # RecursionError); they are still bodies that are not valid JSON, as docs/API.md says.
    response = client.post(
        "/v1/messages", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_json"
    assert words in error["message"]
    assert client.get("/v1/sessions").json()["total"] == 0


def test_a_key_sent_with_a_bare_percent_says_to_percent_encode_it(client):
    # An incognito key's own `%f…` taken as an escape decodes to a byte that is not text.
    response = client.get("/v1/sessions/agent:main:api:dm:alice:%fa1b2c3/transcript")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_session_key"
    assert "percent-encode the key (`%` is `%25`" in error["message"]


def test_an_empty_text_says_what_is_wrong_in_words(client):
    response = client.post("/v1/messages", json={"chat_id": "alice", "text": ""})
    assert response.status_code == 422
    message = response.json()["error"]["message"]
    assert "text" in message
    assert "empty" in message
    assert "at least 1 item" not in message
    assert "after validation" not in message
