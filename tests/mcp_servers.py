"""Real MCP servers for the tests, written with the `mcp` package the gateway uses.

Run as a script it is a stdio server (`python tests/mcp_servers.py`): the gateway starts it as
a subprocess. `MCP_TEST_STARTUP_DELAY` (seconds) makes it wait before it serves, a server slow
to start. `HttpMcpServer` serves the same tools over streamable HTTP on a loopback port
(uvicorn in a thread), refusing requests without the expected `Authorization` header.

Tools: `read(path)` (text), `stat(path)` (structured content only), `fail()` (an error
result), `crash()` (the process exits mid-call), `hang()` (never answers), `pid()` (its process id).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult

STDIO_SERVER = os.path.abspath(__file__)
HTTP_TOKEN = "Bearer mcp-test-token"


def build_server() -> Any:
    server = MCPServer("files", log_level="CRITICAL")

    @server.tool()
    def read(path: str) -> str:
        """Read a file by its path."""
        return f"contents of {path}"

    @server.tool()
    def stat(path: str) -> CallToolResult:
        """The size of a file."""
        return CallToolResult(content=[], structured_content={"path": path, "size": 42})

    @server.tool()
    def fail() -> str:
        """Always fails."""
        raise ToolError("the disk is on fire")

    @server.tool()
    def crash() -> str:
        """The server dies while answering."""
        os._exit(3)

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    async def hang() -> str:
        """Never answers."""
        await anyio.sleep(3600)
        return "too late"

    return server


class HttpMcpServer:
    """The test server over streamable HTTP at `url`, in a thread, until `__exit__`."""

    def __init__(self, port: int = 0) -> None:
        import uvicorn
        from starlette.responses import JSONResponse

        app = build_server().streamable_http_app()

        async def guarded(scope: Any, receive: Any, send: Any) -> None:
            headers = dict(scope.get("headers") or [])
            if scope["type"] == "http" and headers.get(b"authorization") != HTTP_TOKEN.encode():
                await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
                return
            await app(scope, receive, send)

        config = uvicorn.Config(
            guarded, log_level="critical", lifespan="on", ws="none", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", port))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}/mcp"

    def __enter__(self) -> HttpMcpServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:  # waits for a real server to listen, moves no clock
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.005)
        return self

    def __exit__(self, *_: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()


if __name__ == "__main__":
    delay = float(os.environ.get("MCP_TEST_STARTUP_DELAY") or 0)
    if delay:
        time.sleep(delay)
    build_server().run("stdio")
    sys.exit(0)
