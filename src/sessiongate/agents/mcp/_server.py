"""One MCP server as the gateway keeps it: connected once, restarted when it is lost.

`McpServer.run` is the server's supervisor, a task the gateway owns from start to stop: it
opens the transport (a subprocess over stdio, or streamable HTTP), initialises the session,
lists the tools, and holds the session until a call finds the connection lost; then it opens
a new one. A server that was up and is lost is restarted at once; one that fails to start is
retried after `restart_backoff_seconds`, doubled per failure up to
`restart_backoff_max_seconds`.

An outage is logged once, as one warning with its reason (the failures of the retries that
follow go to debug), and its end once, at info. Calls never wait on a server longer than
their caller lets them (the tool timeout): a call made while an attempt is under way waits
for it; a call made while the server is down fails at once with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, NoReturn

from sessiongate.agents.tools import ToolError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp.client.session import ClientSession
    from mcp_types import CallToolResult, Tool as McpTool

    from sessiongate.core.mcp import McpServerConfig

__all__ = ["McpServer"]

log = logging.getLogger(__name__)

# A tool call's own bound is the caller's (the agent's tool timeout, a scope around the call);
# the session's read timeout, which also bounds start-up requests, must not cut it shorter.
_CALL_READ_TIMEOUT_SECONDS = 24 * 3600.0
_MAX_TOOL_PAGES = 100


class McpServer:
    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.name = name
        self.config = config
        self._sleep = sleep
        self._session: ClientSession | None = None
        # The tools of the last successful listing (kept while the server is down, so an agent
        # keeps seeing them and its calls get the outage as their error); None before any.
        self.tools: dict[str, McpTool] | None = None
        self.reason = "it has not started yet"
        self._attempting = True
        self._settled = asyncio.Event()  # the current attempt is up or failed
        self._lost = asyncio.Event()  # the live session is to be dropped
        self._outage_logged = False
        self.starts = 0  # sessions opened, for tests and statistics

    @property
    def is_up(self) -> bool:
        return self._session is not None

    async def wait_settled(self) -> None:
        """Until the attempt under way (if any) is up or has failed."""
        await self._settled.wait()

    async def run(self) -> None:
        """Connect, hold, reconnect: until cancelled (the gateway's stop)."""
        failures = 0
        while True:
            self._attempting = True
            self._settled.clear()
            self._lost.clear()
            starts = self.starts
            try:
                await self._connect_and_hold()
            except Exception as exc:
                if self.starts == starts:
                    self._down(_describe(exc))
                else:  # it was up: whatever ended it was logged when it was lost
                    log.debug("MCP session ended", extra={"mcp_server": self.name}, exc_info=True)
            finally:
                self._session = None
            if self.starts > starts:
                failures = 0
                continue  # it was up: reconnect at once (calls meanwhile wait for it)
            failures += 1
            self._attempting = False
            self._settled.set()
            delay = self.config.restart_backoff_seconds * 2 ** (failures - 1)
            await self._sleep(min(delay, self.config.restart_backoff_max_seconds))

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        """The server's result of `tool`; `ToolError` when the server is unavailable, the
        connection is lost during the call, or the server answers with a protocol error."""
        from mcp.shared.exceptions import MCPError
        from mcp_types import INVALID_REQUEST, CallToolResult

        for attempt in (1, 2):
            while self._session is None and self._attempting:
                await self._settled.wait()
            session = self._session
            if session is None:
                raise ToolError(f"MCP server {self.name!r} is unavailable: {self.reason}")
            try:
                result = await session.call_tool(
                    tool, arguments, read_timeout_seconds=_CALL_READ_TIMEOUT_SECONDS
                )
            except MCPError as exc:
                if exc.code == INVALID_REQUEST and self.config.url is not None and attempt == 1:
                    # An HTTP server that restarted no longer knows the session and refuses
                    # the call unrun: it is sent once more, on a new session.
                    self._lose(session, f"it no longer knows the session ({exc.message})")
                    continue
                self._failed_call(session, exc)
            except Exception as exc:
                self._failed_call(session, exc)
            if not isinstance(result, CallToolResult):
                raise ToolError(
                    f"MCP server {self.name!r} answered with a {type(result).__name__}, not a "
                    "tool result"
                )
            return result
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _failed_call(self, session: ClientSession, exc: Exception) -> NoReturn:
        from mcp.shared.exceptions import MCPError
        from mcp_types import CONNECTION_CLOSED

        if isinstance(exc, MCPError):
            if exc.code != CONNECTION_CLOSED:
                raise ToolError(
                    f"MCP server {self.name!r} refused the call: {exc.message}"
                ) from exc
            self._lose(session, "its connection closed (the server exited)")
            raise ToolError(
                f"MCP server {self.name!r} is unavailable: its connection closed during the "
                "call (the server exited); it is being restarted"
            ) from exc
        # Anything else out of the client (a dropped HTTP connection, a broken pipe) leaves
        # the session in doubt: it is dropped and a new one opened.
        self._lose(session, _describe(exc))
        raise ToolError(
            f"MCP server {self.name!r} is unavailable: {_describe(exc)}; it is being restarted"
        ) from exc

    async def _connect_and_hold(self) -> None:
        """One session: open, list, hold until lost."""
        from mcp.client.session import ClientSession

        async with AsyncExitStack() as stack:
            read, write = await self._open_transport(stack)
            session = await stack.enter_async_context(
                ClientSession(read, write, read_timeout_seconds=self.config.startup_timeout_seconds)
            )
            await session.initialize()
            tools = await _list_tools(session)
            self._up(session, tools)
            await self._lost.wait()

    async def _open_transport(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        config = self.config
        if config.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(
                command=config.command,
                args=list(config.args),
                env={name: value.get_secret_value() for name, value in config.env.items()},
                cwd=config.cwd,
            )
            streams = await stack.enter_async_context(stdio_client(params))
            return await self._watch_exit(stack, streams[0]), streams[1]
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            assert config.url is not None  # the config has `command` or `url`
            client = create_mcp_http_client(
                headers={name: value.get_secret_value() for name, value in config.headers.items()},
                timeout=httpx2.Timeout(config.startup_timeout_seconds, read=None),
            )
            await stack.enter_async_context(client)
            streams = await stack.enter_async_context(
                streamable_http_client(config.url, http_client=client)
            )
        return streams[0], streams[1]

    async def _watch_exit(self, stack: AsyncExitStack, source: Any) -> Any:
        """The stdio server's messages, relayed: the relay sees the process's output end, so a
        server that exits between calls is restarted before the next call, not by it."""
        import anyio

        send, receive = anyio.create_memory_object_stream[Any](0)
        stack.callback(receive.close)
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(group.cancel_scope.cancel)  # runs first at exit: the relay stops

        async def relay() -> None:
            try:
                async with send:
                    async for item in source:
                        await send.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return  # the session is gone: nothing is waiting for the server
            if self._session is not None:
                self._lose(self._session, "it exited")

        group.start_soon(relay)
        return receive

    def _up(self, session: ClientSession, tools: dict[str, McpTool]) -> None:
        self._session = session
        self.tools = tools
        self.starts += 1
        self._attempting = False
        self._settled.set()
        if self._outage_logged:
            log.info("MCP server is back", extra={"mcp_server": self.name, "tools": len(tools)})
        else:
            log.info("MCP server started", extra={"mcp_server": self.name, "tools": len(tools)})
        self._outage_logged = False

    def _lose(self, session: ClientSession, reason: str) -> None:
        """Drop `session` (once, whichever call notices first); the supervisor reconnects."""
        if self._session is not session:
            return
        self._session = None
        # The supervisor reconnects at once: calls from now on wait for that attempt.
        self._attempting = True
        self._settled.clear()
        self._down(reason)
        self._lost.set()

    def _down(self, reason: str) -> None:
        self.reason = reason
        if self._outage_logged:
            log.debug(
                "MCP server still unavailable", extra={"mcp_server": self.name, "reason": reason}
            )
            return
        self._outage_logged = True
        log.warning(
            f"MCP server {self.name!r} is unavailable: {reason}",
            extra={"mcp_server": self.name, "transport": self.config.transport},
        )


async def _list_tools(session: ClientSession) -> dict[str, McpTool]:
    tools: dict[str, McpTool] = {}
    cursor: str | None = None
    for _ in range(_MAX_TOOL_PAGES):
        if cursor is None:
            listing = await session.list_tools()
        else:
            from mcp_types import PaginatedRequestParams

            listing = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        tools.update((made.name, made) for made in listing.tools)
        cursor = listing.next_cursor
        if not cursor:
            break
    return tools


def _describe(exc: BaseException) -> str:
    """A one-line reason for an operator, from whatever ended an attempt (task groups wrap
    the real error in exception groups)."""
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        if exc.code == CONNECTION_CLOSED:
            return "it closed the connection before it was ready (did it exit?)"
        if exc.code == REQUEST_TIMEOUT:
            return "it did not answer in time (startup_timeout_seconds)"
        return f"it answered with an error: {exc.message}"
    if isinstance(exc, FileNotFoundError):
        return f"cannot run it: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if str(exc) else text
