"""A real uvicorn server on 127.0.0.1 (a free port) around a block, and a raw HTTP/1.1 client
for what httpx will not send (a body that stops halfway)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sessiongate.api.server import GatewayServer, build_server

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from fastapi import FastAPI

# A hang guard for a server that never answers; never a timing assertion.
GUARD_SECONDS = 30.0


@contextlib.asynccontextmanager
async def serving(
    app: FastAPI, *, graceful_timeout: float = 5, **options: Any
) -> AsyncIterator[GatewayServer]:
    """`app` served until the block ends (`server.bound` is the address); `options` go to
    `build_server`."""
    ready = asyncio.Event()
    server = build_server(
        app,
        host="127.0.0.1",
        port=0,
        graceful_timeout=graceful_timeout,
        install_signal_handlers=False,
        on_ready=lambda host, port: ready.set(),
        **options,
    )
    task = asyncio.create_task(server.serve())
    waiting = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    assert server.bound is not None, "the server did not start"
    try:
        yield server
    finally:
        server.should_exit = True
        async with asyncio.timeout(GUARD_SECONDS):
            await task


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request_head(
    method: str, path: str, headers: dict[str, str] | None = None, *, host: str = "127.0.0.1"
) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@contextlib.asynccontextmanager
async def raw_connection(
    host: str, port: int
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def read_response(reader: asyncio.StreamReader) -> RawResponse:
    """One response (with a Content-Length, as every JSON answer here has)."""
    async with asyncio.timeout(GUARD_SECONDS):
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return RawResponse(int(status_line.split()[1]), headers, body)
