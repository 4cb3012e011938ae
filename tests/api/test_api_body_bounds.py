"""A body has to arrive in time and as UTF-8 text before anything parses it: a stalled upload is
a JSON 408 (a 503 once the server stops), and a JSON body in another encoding a 400."""

from __future__ import annotations

import asyncio
import json

import pytest

from live_server import raw_connection, read_response, request_head, serving
from sessiongate import GatewayConfig
from sessiongate.api.app import create_app

# Long enough for no honest test client to hit it, short enough for a test to wait for it.
SHORT_TIMEOUT = 0.5


@pytest.fixture
def config() -> GatewayConfig:
    return GatewayConfig(api={"body_timeout_seconds": SHORT_TIMEOUT})


def _stalled_head() -> bytes:
    headers = {"Content-Type": "application/json", "Content-Length": "100"}
    return request_head("POST", "/v1/messages", headers) + b'{"chat_id":'


async def test_a_stalled_upload_is_a_json_408_over_a_real_socket(store, config, runner):
    await runner.start()
    try:
        async with serving(create_app(runner, store, config)) as server:
            assert server.bound is not None
            async with raw_connection(*server.bound) as (reader, writer):
                writer.write(_stalled_head())
                await writer.drain()
                response = await read_response(reader)
                assert response.status == 408
                assert response.headers["content-type"] == "application/json"
                assert response.headers["connection"] == "close"
                error = response.json()["error"]
                assert error["code"] == "request_timeout"
                assert "0.5 seconds" in error["message"]
                assert await reader.read() == b"", "the connection stays open"
    finally:
        await runner.stop()
    assert store.list_sessions() == []


async def test_closing_the_gate_answers_a_stalled_upload_at_once(store, runner):
    # The timeout is far away: only the gate's closing can end this read.
    config = GatewayConfig(api={"body_timeout_seconds": 3600})
    app = create_app(runner, store, config)
    gate = app.state.uploads
    first_part = asyncio.Event()
    sent: list[dict] = []

    async def receive() -> dict:
        if not first_part.is_set():
            first_part.set()
            return {"type": "http.request", "body": b'{"chat_id":', "more_body": True}
        await asyncio.Event().wait()  # the client has gone silent
        raise AssertionError("unreachable")

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/v1/messages",
        "raw_path": b"/v1/messages",
        "query_string": b"",
        "headers": [
            (b"host", b"127.0.0.1:8787"),
            (b"content-type", b"application/json"),
            (b"content-length", b"100"),
        ],
    }
    request = asyncio.create_task(app(scope, receive, send))
    await first_part.wait()
    gate.close()
    async with asyncio.timeout(30):  # a hang guard
        await request
    assert sent[0]["status"] == 503
    assert json.loads(sent[1]["body"])["error"]["code"] == "shutting_down"
    assert gate.is_closed


def test_a_complete_body_is_not_cut_by_the_deadline(client):
    response = client.post("/v1/messages", json={"chat_id": "a", "text": "in time"})
    assert response.json()["reply"] == "echo: in time"


MESSAGE = {"chat_id": "a", "text": "hello"}


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le"])
def test_a_json_body_that_is_not_utf8_is_invalid_json(client, encoding):
    response = client.post(
        "/v1/messages",
        content=json.dumps(MESSAGE).encode(encoding),
        headers={"Content-Type": f"application/json; charset={encoding}"},
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_json"
    assert "UTF-8" in error["message"]
    assert client.get("/v1/sessions").json()["total"] == 0


@pytest.mark.parametrize("content_type", ["application/json", "application/merge+json"])
def test_the_encoding_rule_covers_every_body_parsed_as_json(client, content_type):
    headers = {"Content-Type": content_type}
    response = client.post(
        "/v1/messages", content=json.dumps(MESSAGE).encode("utf-16"), headers=headers
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_json"


def test_utf8_text_with_any_characters_is_accepted(client):
    body = json.dumps({"chat_id": "a", "text": "héllo ✓ 日本"}, ensure_ascii=False)
    response = client.post(
        "/v1/messages", content=body.encode("utf-8"), headers={"Content-Type": "application/json"}
    )
    assert response.json()["reply"] == "echo: héllo ✓ 日本"
