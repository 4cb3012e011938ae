"""MCP servers in the configuration, and how their tools are named.

`mcp_servers.<name>` starts a server as a subprocess speaking MCP over stdio (`command`,
`args`, `env`, `cwd`) or reaches one over streamable HTTP (`url`, `headers`). An agent names
the tools it may call in its `tools` list as `mcp:<server>:<tool>` (one tool) or
`mcp:<server>:*` (every tool the server lists).

The model sees each MCP tool under a function name chat APIs accept (`[A-Za-z0-9_-]`, at most
64): `mcp__<server>__<tool>`. A tool name with other characters (`fs.read`) has them replaced
by `_`, and a name changed that way or cut to fit gets 8 hex digits of its original's SHA-1
appended, so two tools never share a function name. The gateway keeps the mapping back, so
nothing ever parses a function name.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

__all__ = [
    "MCP_PREFIX",
    "MCP_SERVER_NAME",
    "McpServerConfig",
    "McpToolRef",
    "is_mcp_tool_spec",
    "mcp_function_name",
    "parse_mcp_tool_spec",
]

MCP_PREFIX = "mcp:"
# A server name is an identifier: it is part of every function name its tools get.
MCP_SERVER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_FUNCTION_NAME = 64


class McpServerConfig(BaseModel):
    """One MCP server: `command` (stdio) or `url` (streamable HTTP), never both."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, coerce_numbers_to_str=True)

    command: str | None = Field(
        None,
        description="The program that runs a stdio server (e.g. `npx`, `python`); the gateway "
        "starts it once, with the gateway's own privileges.",
    )
    args: list[str] = Field(default_factory=list, description="The stdio server's arguments.")
    env: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Environment variables for the stdio server, over a minimal default "
        "environment (PATH, HOME, ...); values are secrets, never printed.",
    )
    cwd: str | None = Field(None, description="The stdio server's working directory.")
    url: str | None = Field(
        None, description="The endpoint of a streamable HTTP server (`http://host:port/mcp`)."
    )
    headers: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="HTTP headers sent to that server (e.g. `Authorization`); values are "
        "secrets, never printed.",
    )
    startup_timeout_seconds: float = Field(
        10.0,
        gt=0,
        description="How long the server may take to start and list its tools; after that it "
        "counts as unavailable (its tools answer with an error) and is retried.",
    )
    restart_backoff_seconds: float = Field(
        1.0,
        ge=0,
        description="Wait before retrying a server that failed to start, doubled for each "
        "next failure. A server that was up and died is restarted at once.",
    )
    restart_backoff_max_seconds: float = Field(
        60.0, ge=0, description="The longest wait between two restarts of a server."
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a stdio server) or `url` (HTTP), not both")
        if self.url is not None and (self.args or self.env or self.cwd is not None):
            raise ValueError("`args`, `env` and `cwd` are for a stdio server (`command`)")
        if self.command is not None and self.headers:
            raise ValueError("`headers` are for an HTTP server (`url`)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("`url` must start with http:// or https://")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


@dataclass(frozen=True, slots=True)
class McpToolRef:
    """`mcp:<server>:<tool>`; `tool` is None for `mcp:<server>:*`."""

    server: str
    tool: str | None


def is_mcp_tool_spec(spec: str) -> bool:
    return spec.startswith(MCP_PREFIX)


def parse_mcp_tool_spec(spec: str) -> McpToolRef:
    """The server and tool an `mcp:<server>:<tool>` entry names; `ValueError` saying what is
    wrong with any other shape."""
    server, sep, tool = spec.removeprefix(MCP_PREFIX).partition(":")
    if not sep or not tool:
        raise ValueError(f"{spec!r} is not mcp:<server>:<tool> or mcp:<server>:*")
    if not MCP_SERVER_NAME.fullmatch(server):
        raise ValueError(f"{spec!r}: {server!r} is no server name")
    return McpToolRef(server=server, tool=None if tool == "*" else tool)


def mcp_function_name(server: str, tool: str) -> str:
    """The function name the model calls tool `tool` of server `server` by."""
    prefix = f"mcp__{server}__"
    safe = _UNSAFE.sub("_", tool)
    if safe == tool and len(prefix) + len(tool) <= _MAX_FUNCTION_NAME:
        return prefix + tool
    digest = hashlib.sha1(tool.encode(), usedforsecurity=False).hexdigest()[:8]
    room = _MAX_FUNCTION_NAME - len(prefix) - len(digest) - 1
    return f"{prefix}{safe[:room]}_{digest}"
