"""Tools from MCP servers, for the OpenAI-compatible agent.

`McpServers` holds the gateway's servers (`mcp_servers` in the configuration), each supervised
by one task (`_server.py`) from `start()` to `aclose()`: started once per gateway, however
many agents and sessions use them. `start()` waits for each server to list its tools, but no
longer than its `startup_timeout_seconds`: a slow or broken server never holds up the gateway,
it is unavailable until a retry brings it up.

An agent gets an `McpToolset` for the `mcp:<server>:<tool>` entries of its `tools`; each turn
asks it for the tools as they are now (`tools()`): the schemas are the servers' own, the
names those of `sessiongate.core.mcp.mcp_function_name`. A tool of a server that is down
stays listed (as last seen, or with an open schema when named but never seen) and its calls
answer `MCP server '<name>' is unavailable: <reason>`; a server's tools it never listed are
not offered.

Needs the optional `mcp` package (`pip install 'sessiongate[mcp]'`), imported when the servers
are made, never when this module is.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from sessiongate.agents.mcp._results import result_text
from sessiongate.agents.mcp._server import McpServer
from sessiongate.agents.tools import Tool, ToolError
from sessiongate.core.mcp import (
    McpToolRef,
    is_mcp_tool_spec,
    mcp_function_name,
    parse_mcp_tool_spec,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from mcp_types import Tool as McpTool

    from sessiongate.core.mcp import McpServerConfig

__all__ = ["INSTALL_HINT", "McpServerStatus", "McpServers", "McpToolset", "import_mcp"]

INSTALL_HINT = "pip install 'sessiongate[mcp]'"
# What a tool named in the configuration but never listed by its server takes: any object.
_OPEN_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def import_mcp() -> None:
    """Import the `mcp` package, or raise an `ImportError` naming the extra to install."""
    try:
        importlib.import_module("mcp.client.session")
    except ImportError as exc:
        raise ImportError(f"MCP servers need the mcp package: {INSTALL_HINT}") from exc


class _AnyArguments(BaseModel):
    """The arguments of an MCP tool pass as they are: its server checks them against its
    schema and answers a mismatch with an error result the model reads."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True, slots=True)
class McpServerStatus:
    name: str
    transport: str
    up: bool
    tools: int
    starts: int
    reason: str | None


class McpServers:
    """The gateway's MCP servers by name; started by `start()`, stopped by `aclose()`."""

    def __init__(
        self,
        configs: Mapping[str, McpServerConfig],
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        import_mcp()
        self.servers = {name: McpServer(name, cfg, sleep=sleep) for name, cfg in configs.items()}
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start every server; returns once each is up, has failed, or has used up its
        `startup_timeout_seconds` (it then keeps trying in the background)."""
        if self._task is not None or not self.servers:
            return
        self._task = asyncio.create_task(self._supervise(), name="sessiongate-mcp")
        async with asyncio.TaskGroup() as group:
            for server in self.servers.values():
                group.create_task(_wait_started(server))

    async def aclose(self) -> None:
        """Stop every server (each subprocess is ended); idempotent."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        await asyncio.wait([task])
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]  # a supervisor's own bug surfaces

    def statistics(self) -> list[McpServerStatus]:
        return [
            McpServerStatus(
                name=server.name,
                transport=server.config.transport,
                up=server.is_up,
                tools=len(server.tools or {}),
                starts=server.starts,
                reason=None if server.is_up else server.reason,
            )
            for server in self.servers.values()
        ]

    def toolset(self, names: Sequence[str]) -> McpToolset | None:
        """The toolset of the `mcp:` entries of an agent's `tools` (None when there are none);
        `KeyError` for a server not configured (the configuration checks that first)."""
        refs = [parse_mcp_tool_spec(name) for name in names if is_mcp_tool_spec(name)]
        for ref in refs:
            if ref.server not in self.servers:
                raise KeyError(ref.server)
        return McpToolset(self, refs) if refs else None

    async def _supervise(self) -> None:
        async with asyncio.TaskGroup() as group:
            for server in self.servers.values():
                group.create_task(server.run(), name=f"mcp-{server.name}")


async def _wait_started(server: McpServer) -> None:
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(server.config.startup_timeout_seconds):
            await server.wait_settled()
    if not server.is_up and server.tools is None:
        server.reason = (
            f"it did not start within {server.config.startup_timeout_seconds:g} seconds "
            "(startup_timeout_seconds)"
            if server.reason == "it has not started yet"
            else server.reason
        )


class McpToolset:
    """The MCP tools one agent may call, as `Tool`s built at each turn."""

    def __init__(self, servers: McpServers, refs: Sequence[McpToolRef]) -> None:
        self._servers = servers
        self._refs = list(refs)

    def tools(self) -> list[Tool]:
        made: dict[str, Tool] = {}
        for ref in self._refs:
            server = self._servers.servers[ref.server]
            listed = server.tools
            if ref.tool is None:
                for tool in (listed or {}).values():
                    made.setdefault(mcp_function_name(server.name, tool.name), _tool(server, tool))
            else:
                found = (listed or {}).get(ref.tool)
                name = mcp_function_name(server.name, ref.tool)
                made.setdefault(
                    name, _tool(server, found) if found is not None else _placeholder(server, ref)
                )
        return list(made.values())


def _tool(server: McpServer, tool: McpTool) -> Tool:
    schema = tool.input_schema if tool.input_schema.get("type") == "object" else _OPEN_SCHEMA
    return Tool(
        name=mcp_function_name(server.name, tool.name),
        description=tool.description or tool.title or tool.name,
        parameters=schema,
        function=_caller(server, tool.name),
        arguments=_AnyArguments,
    )


def _placeholder(server: McpServer, ref: McpToolRef) -> Tool:
    """A tool named in the configuration that its server has not listed (it is down, or has no
    such tool): offered, so that calling it tells the model why it cannot be used."""
    assert ref.tool is not None
    tool_name = ref.tool

    async def call(**arguments: Any) -> str:
        listed = server.tools
        if server.is_up and listed is not None and tool_name not in listed:
            known = ", ".join(sorted(listed)) or "none"
            raise ToolError(
                f"MCP server {server.name!r} has no tool {tool_name!r} (its tools: {known})"
            )
        return result_text(await server.call(tool_name, arguments))

    return Tool(
        name=mcp_function_name(server.name, tool_name),
        description=f"Tool {tool_name!r} of MCP server {server.name!r} (not available now).",
        parameters=_OPEN_SCHEMA,
        function=call,
        arguments=_AnyArguments,
    )


def _caller(server: McpServer, tool_name: str) -> Callable[..., Awaitable[str]]:
    async def call(**arguments: Any) -> str:
        return result_text(await server.call(tool_name, arguments))

    return call
