"""`mcp_servers` in the configuration, `mcp:` entries in an agent's tools, and the function
names the model calls MCP tools by."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from sessiongate import GatewayConfig
from sessiongate.config import ConfigError, config_as_dict, load_config
from sessiongate.core.mcp import McpToolRef, mcp_function_name, parse_mcp_tool_spec

SENDABLE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def config(tools: list[str], servers: dict[str, object], **agents: object) -> GatewayConfig:
    return GatewayConfig(
        agent={"openai": {"base_url": "http://127.0.0.1:9/v1", "tools": tools}},
        mcp_servers=servers,
        agents=agents,
    )


def test_a_tool_of_an_unknown_server_fails_naming_the_setting() -> None:
    with pytest.raises(ValidationError) as caught:
        config(["sessions_list", "mcp:filez:read"], {"files": {"command": "srv"}})
    message = str(caught.value)
    assert "agent.openai.tools[1]" in message
    assert "'filez'" in message
    assert "files" in message


def test_an_other_agents_unknown_server_names_its_own_setting() -> None:
    with pytest.raises(ValidationError, match=r"agents\.support\.tools\[0\]"):
        config([], {}, support={"kind": "openai", "tools": ["mcp:files:*"]})


@pytest.mark.parametrize("spec", ["mcp:files", "mcp:files:", "mcp::read", "mcp:1x:read"])
def test_a_malformed_mcp_entry_is_refused(spec: str) -> None:
    with pytest.raises(ValidationError, match=r"agent\.openai\.tools\[0\]"):
        config([spec], {"files": {"command": "srv"}})


@pytest.mark.parametrize(
    ("server", "problem"),
    [
        ({"command": "srv", "url": "http://x/mcp"}, "not both"),
        ({}, "not both"),
        ({"url": "http://x/mcp", "env": {"A": "1"}}, "stdio"),
        ({"command": "srv", "headers": {"A": "1"}}, "HTTP"),
        ({"url": "ftp://x/mcp"}, "http://"),
    ],
)
def test_a_server_is_either_stdio_or_http(server: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        config([], {"files": server})


@pytest.mark.parametrize("name", ["my-files", "1files", "a" * 33, "fi.les"])
def test_a_server_name_is_an_identifier(name: str) -> None:
    with pytest.raises(ValidationError, match="invalid MCP server name"):
        config([], {name: {"command": "srv"}})


def test_env_and_headers_are_masked_in_the_printed_config() -> None:
    made = config(
        ["mcp:files:*", "mcp:web:search"],
        {
            "files": {"command": "srv", "env": {"FILES_TOKEN": "s3cret-env"}},
            "web": {"url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer s3"}},
        },
    )
    shown = config_as_dict(made)
    assert shown["mcp_servers"]["files"]["env"] == {"FILES_TOKEN": "***"}
    assert shown["mcp_servers"]["web"]["headers"] == {"Authorization": "***"}
    assert "s3cret-env" not in repr(made)
    assert "Bearer s3" not in str(shown)


def test_parse_mcp_tool_spec() -> None:
    assert parse_mcp_tool_spec("mcp:files:read") == McpToolRef("files", "read")
    assert parse_mcp_tool_spec("mcp:files:*") == McpToolRef("files", None)
    # A tool name may itself hold colons.
    assert parse_mcp_tool_spec("mcp:files:a:b") == McpToolRef("files", "a:b")


@pytest.mark.parametrize(
    "tool", ["read", "fs.read", "fs/read", "read" * 30, "ÿ", "read-file_2", "a b", "fs.read "]
)
def test_function_names_are_sendable(tool: str) -> None:
    assert SENDABLE.fullmatch(mcp_function_name("files", tool))
    assert SENDABLE.fullmatch(mcp_function_name("s" * 32, tool))


def test_a_plain_tool_name_is_kept_and_a_changed_one_stays_distinct() -> None:
    assert mcp_function_name("files", "read") == "mcp__files__read"
    assert mcp_function_name("files", "read-file_2") == "mcp__files__read-file_2"
    dotted, slashed = mcp_function_name("files", "fs.read"), mcp_function_name("files", "fs/read")
    assert dotted.startswith("mcp__files__fs_read_")
    assert dotted != slashed
    assert mcp_function_name("files", "fs_read") not in (dotted, slashed)


def test_mcp_servers_load_from_yaml_and_the_environment(tmp_path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "mcp_servers:\n"
        "  files:\n"
        "    command: python\n"
        "    args: [server.py, --root, /srv]\n"
        "    env: {FILES_TOKEN: abc}\n"
        "agent:\n"
        "  openai:\n"
        "    base_url: http://127.0.0.1:9/v1\n"
        "    tools: ['mcp:files:*']\n",
        encoding="utf-8",
    )
    loaded = load_config(
        path, environ={"SESSIONGATE_MCP_SERVERS__FILES__STARTUP_TIMEOUT_SECONDS": "3"}
    )
    files = loaded.mcp_servers["files"]
    assert files.args == ["server.py", "--root", "/srv"]
    assert files.env["FILES_TOKEN"].get_secret_value() == "abc"
    assert files.startup_timeout_seconds == 3


def test_an_unknown_server_in_yaml_is_a_config_error_naming_the_entry(tmp_path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "agent: {openai: {base_url: 'http://127.0.0.1:9/v1', tools: ['mcp:files:read']}}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"agent\.openai\.tools\[0\]"):
        load_config(path, environ={})
