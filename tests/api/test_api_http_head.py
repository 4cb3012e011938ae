"""Requests whose head is malformed, oversized or ambiguous, over a real socket to the protocol
the gateway serves with: each is refused with a 400 and its connection closed, and nothing
reaches the app; well-formed heads that are merely unusual are served."""

from __future__ import annotations

import asyncio
import json

import pytest

from live_server import GUARD_SECONDS, raw_connection, read_response, request_head, serving
from sessiongate.api.app import create_app
from sessiongate.api.http_protocol import MAX_HEAD_BYTES

_JSON = b'{"chat_id": "c", "text": "hi"}'

REFUSED = {
    "not HTTP": b"GARBAGE\r\n\r\n",
    "a TLS hello on the plain port": bytes.fromhex("160301002c010000280303") + bytes(40),
    "a header with no colon": b"GET /healthz HTTP/1.1\r\nHost: a\r\nNo Colon\r\n\r\n",
    "a NUL in a header": b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: a\x00b\r\n\r\n",
    "a space before the colon": b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-A : b\r\n\r\n",
    "a folded header": b"GET /healthz HTTP/1.1\r\nHost: a\r\nX-A: a\r\n  b\r\n\r\n",
    "bare line feeds": b"GET /healthz HTTP/1.1\nHost: a\n\n",
    "HTTP/9.9": b"GET /healthz HTTP/9.9\r\nHost: a\r\n\r\n",
    # A method HTTP defines but the route does not take is the app's JSON 405.
    "a method HTTP does not define": b"BREW /healthz HTTP/1.1\r\nHost: a\r\n\r\n",
    "HTTP/1.1 without Host": b"GET /healthz HTTP/1.1\r\n\r\n",
    "a length that is not a number": (
        b"POST /v1/messages HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n"
    ),
    "a negative length": b"POST /v1/messages HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n",
    "two lengths that differ": (
        b"POST /v1/messages HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}"
    ),
    # The shape of a request-smuggling attempt: which one frames the body is ambiguous.
    "a length and chunked together": (
        b"POST /v1/messages HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    ),
    "a chunk size that is not hex": (
        b"POST /v1/messages HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"
    ),
    "one header over the bound": request_head(
        "GET", "/healthz", {"X-Big": "x" * (MAX_HEAD_BYTES + 1)}
    ),
    "many small headers over the bound": request_head(
        "GET", "/healthz", {f"X-{i}": "v" for i in range(MAX_HEAD_BYTES // 6)}
    ),
    "a URL over the bound": request_head("GET", "/healthz?" + "q" * (MAX_HEAD_BYTES + 1)),
}


@pytest.fixture
async def server(store, config, runner):
    await runner.start()
    try:
        async with serving(create_app(runner, store, config)) as server:
            yield server
    finally:
        await runner.stop()


@pytest.mark.parametrize("raw", REFUSED.values(), ids=REFUSED.keys())
async def test_a_bad_head_is_a_400_and_the_connection_closes(server, store, raw):
    async with raw_connection(*server.bound) as (reader, writer):
        writer.write(raw)
        await writer.drain()
        response = await read_response(reader)
        assert response.status == 400
        assert response.headers["connection"] == "close"
        async with asyncio.timeout(GUARD_SECONDS):
            assert await reader.read() == b""
    # Nothing reached the app, and the server goes on serving.
    assert store.list_sessions() == []
    async with raw_connection(*server.bound) as (reader, writer):
        writer.write(request_head("GET", "/healthz"))
        assert (await read_response(reader)).status == 200


async def test_a_head_just_inside_the_bound_is_served(server):
    # A big cookie or token is an ordinary request: the bound is the whole head's.
    head = request_head("GET", "/healthz", {"Cookie": "c" * (MAX_HEAD_BYTES - 200)})
    async with raw_connection(*server.bound) as (reader, writer):
        writer.write(head)
        assert (await read_response(reader)).status == 200


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /healthz HTTP/1.0\r\n\r\n",  # Host is HTTP/1.1's requirement
        b"GET http://elsewhere.example/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    ],
    ids=["HTTP/1.0 without Host", "an absolute URL"],
)
async def test_unusual_but_valid_heads_are_served(server, raw):
    async with raw_connection(*server.bound) as (reader, writer):
        writer.write(raw)
        response = await read_response(reader)
        assert response.status == 200
        assert response.json()["status"] == "ok"


async def test_pipelined_requests_are_each_answered(server):
    async with raw_connection(*server.bound) as (reader, writer):
        writer.write(request_head("GET", "/healthz") * 3)
        for _ in range(3):
            assert (await read_response(reader)).status == 200


async def test_a_bad_head_behind_pipelined_requests_waits_for_their_replies(server, store):
    # Were the 400 written as soon as the garbage is parsed, it would close the connection
    # under the first two responses: their messages stored and replied to, the client told
    # nothing but "invalid request".
    body = json.dumps({"chat_id": "pipelined", "text": "hi"}).encode()
    message = request_head(
        "POST",
        "/v1/messages",
        {"Content-Type": "application/json", "Content-Length": str(len(body))},
    )
    async with raw_connection(*server.bound) as (reader, writer):
        writer.write(message + body + request_head("GET", "/healthz") + REFUSED["not HTTP"])
        replied = await read_response(reader)
        assert replied.status == 200, replied.body
        assert replied.json()["reply"] == "echo: hi"
        assert (await read_response(reader)).status == 200
        refused = await read_response(reader)
        assert refused.status == 400
        assert refused.headers["connection"] == "close"
        async with asyncio.timeout(GUARD_SECONDS):
            assert await reader.read() == b""
    assert [s.session_key for s in store.list_sessions()] == ["agent:main:api:dm:pipelined"]


async def test_a_chunked_body_and_one_after_100_continue_are_read(server, store):
    chunked = request_head(
        "POST",
        "/v1/messages",
        {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
    )
    chunked += f"{len(_JSON):x}\r\n".encode() + _JSON + b"\r\n0\r\n\r\n"
    expecting = request_head(
        "POST",
        "/v1/messages",
        {
            "Content-Type": "application/json",
            "Content-Length": str(len(_JSON)),
            "Expect": "100-continue",
        },
    )
    async with raw_connection(*server.bound) as (reader, writer):
        writer.write(chunked)
        first = await read_response(reader)
        assert first.status == 200, first.body
        assert first.json()["status"] == "replied"
        writer.write(expecting)
        async with asyncio.timeout(GUARD_SECONDS):
            assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
        writer.write(_JSON)
        second = await read_response(reader)
        assert second.status == 200, second.body
    assert [s.session_key for s in store.list_sessions()] == ["agent:main:api:dm:c"]
    assert json.loads(second.body)["session_key"] == "agent:main:api:dm:c"
