"""`McpServers` on its own: restarts with backoff, one warning per outage, a clean stop."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

import pytest

from mcp_servers import HTTP_TOKEN, STDIO_SERVER, HttpMcpServer
from sessiongate.agents.mcp import McpServers
from sessiongate.agents.mcp._results import result_text
from sessiongate.agents.tools import ToolError
from sessiongate.core.mcp import McpServerConfig


class RecordedSleep:
    """The backoff's sleep: records each delay and returns at once, until `limit` delays;
    then it blocks, so the test reads a settled state."""

    def __init__(self, limit: int) -> None:
        self.delays: list[float] = []
        self.limit = limit
        self.reached = asyncio.Event()

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if len(self.delays) >= self.limit:
            self.reached.set()
            await asyncio.Event().wait()


async def test_a_server_that_fails_to_start_is_retried_with_doubling_backoff(
    tmp_path, caplog
) -> None:
    sleep = RecordedSleep(limit=6)
    config = McpServerConfig(
        command=str(tmp_path / "missing"),
        restart_backoff_seconds=0.5,
        restart_backoff_max_seconds=4,
    )
    servers = McpServers({"ghost": config}, sleep=sleep)
    with caplog.at_level(logging.DEBUG, logger="sessiongate"):
        await servers.start()
        await sleep.reached.wait()
        await servers.aclose()
    assert sleep.delays == [0.5, 1, 2, 4, 4, 4]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "MCP server 'ghost' is unavailable: cannot run it" in warnings[0].getMessage()
    [status] = servers.statistics()
    assert status.up is False
    assert status.starts == 0
    assert status.reason is not None
    assert "missing" in status.reason


async def test_start_waits_for_the_listing_and_stop_ends_the_server() -> None:
    servers = McpServers({"files": McpServerConfig(command=sys.executable, args=[STDIO_SERVER])})
    await servers.start()
    [status] = servers.statistics()
    assert status.up is True
    assert status.tools == 6
    assert status.starts == 1
    toolset = servers.toolset(["sessions_list", "mcp:files:read"])
    assert toolset is not None
    [read] = toolset.tools()
    assert await read.function(path="z") == "contents of z"
    await servers.aclose()
    await servers.aclose()  # idempotent
    assert servers.statistics()[0].up is False


async def test_a_stdio_server_that_exits_between_calls_is_restarted_before_the_next(
    caplog,
) -> None:
    servers = McpServers({"files": McpServerConfig(command=sys.executable, args=[STDIO_SERVER])})
    server = servers.servers["files"]
    try:
        with caplog.at_level(logging.INFO, logger="sessiongate"):
            await servers.start()
            pid = int(result_text(await server.call("pid", {})))
            os.kill(pid, signal.SIGKILL)
            while server.starts < 2 or not server.is_up:
                await server.wait_settled()
                await asyncio.sleep(0)
            # No call failed: the next one goes to the new process.
            assert int(result_text(await server.call("pid", {}))) != pid
        [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert warning.getMessage() == "MCP server 'files' is unavailable: it exited"
        assert any(r.getMessage() == "MCP server is back" for r in caplog.records)
    finally:
        await servers.aclose()


def test_a_toolset_of_an_unconfigured_server_is_refused() -> None:
    servers = McpServers({})
    assert servers.toolset(["sessions_list"]) is None
    with pytest.raises(KeyError):
        servers.toolset(["mcp:files:read"])


async def test_an_http_server_that_goes_away_is_reconnected_when_it_is_back() -> None:
    asleep, back = asyncio.Event(), asyncio.Event()

    async def sleep(delay: float) -> None:  # the backoff waits for the server to be back
        asleep.set()
        await back.wait()

    first = HttpMcpServer()
    first.__enter__()
    port = first.port
    config = McpServerConfig(url=first.url, headers={"Authorization": HTTP_TOKEN})
    servers = McpServers({"remote": config}, sleep=sleep)
    server = servers.servers["remote"]
    try:
        await servers.start()
        assert result_text(await server.call("read", {"path": "a"})) == "contents of a"
        await asyncio.to_thread(first.__exit__)
        with pytest.raises(ToolError, match="'remote' is unavailable: its connection closed"):
            await server.call("read", {"path": "b"})
        # Reconnected at once, which fails while the server is away: then the backoff.
        await asleep.wait()
        with pytest.raises(ToolError, match="'remote' is unavailable"):
            await server.call("read", {"path": "b"})
        with HttpMcpServer(port):
            back.set()
            while not server.is_up:
                await server.wait_settled()
                await asyncio.sleep(0)
            assert result_text(await server.call("read", {"path": "c"})) == "contents of c"
            assert server.starts == 2
            await servers.aclose()
    finally:
        await servers.aclose()


def test_without_the_mcp_package_the_error_names_the_extra(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "mcp.client.session", None)
    with pytest.raises(ImportError, match=r"pip install 'sessiongate\[mcp\]'"):
        McpServers({})


async def test_a_call_after_an_http_server_restarted_goes_to_a_new_session(caplog) -> None:
    first = HttpMcpServer()
    first.__enter__()
    port = first.port
    config = McpServerConfig(url=first.url, headers={"Authorization": HTTP_TOKEN})
    servers = McpServers({"remote": config})
    server = servers.servers["remote"]
    try:
        await servers.start()
        assert result_text(await server.call("read", {"path": "a"})) == "contents of a"
        await asyncio.to_thread(first.__exit__)
        with HttpMcpServer(port), caplog.at_level(logging.WARNING, logger="sessiongate"):
            # The new server does not know the old session: refused unrun, sent again.
            assert result_text(await server.call("read", {"path": "b"})) == "contents of b"
            assert server.starts == 2
            await servers.aclose()
        [warning] = [r for r in caplog.records if r.name.startswith("sessiongate")]
        assert "no longer knows the session" in warning.getMessage()
    finally:
        await servers.aclose()
