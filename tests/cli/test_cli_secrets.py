"""No configured secret is ever printed: a start that fails (a platform refusing its token, a
database that does not answer) is run as the real command with a recognisable value in every
secret field the settings model has, and all its output is searched for any of them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import threading
import uuid
from typing import TYPE_CHECKING, Any, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel, SecretStr

from sessiongate.core.config import PLATFORM_CONFIGS, GatewayConfig, OpenAIAgentSpec
from sessiongate.testing.stubs import discord as dc, slack as sl, telegram as tg

if TYPE_CHECKING:
    from collections.abc import Iterator

# Every secret's value holds this, so a fragment of any of them is found, whatever the rest.
MARK = f"Zq{uuid.uuid4().hex[:12]}"


def _secret_fields(model: type[BaseModel], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths of every SecretStr field under `model`, read from the model itself."""
    paths = []
    for name, field in model.model_fields.items():
        if get_origin(field.annotation) in (dict, list):
            continue  # maps and lists (MCP servers, outbound webhooks): `_secret_config`
        kinds = {field.annotation, *get_args(field.annotation)}
        if SecretStr in kinds:
            paths.append((*prefix, name))
        for kind in kinds:
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                paths += _secret_fields(kind, (*prefix, name))
    return paths


def _all_secret_fields() -> list[tuple[str, ...]]:
    paths = _secret_fields(GatewayConfig)
    for platform, model in PLATFORM_CONFIGS.items():
        paths += _secret_fields(model, ("platforms", platform))
    paths += _secret_fields(OpenAIAgentSpec, ("agents", "helper"))
    return sorted(set(paths))


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        data = data.setdefault(name, {})
    data[path[-1]] = value


def _secret_config(**urls: str) -> dict[str, Any]:
    data: dict[str, Any] = {"agents": {"helper": {"kind": "openai", "model": "m"}}}
    for number, path in enumerate(_all_secret_fields()):
        # Prefixes some SDKs check before they send anything.
        prefix = {"bot_token": "xoxb-", "app_token": "xapp-", "token": "1000:"}.get(path[-1], "")
        _put(data, path, f"{prefix}{MARK}s{number}")
    for platform in PLATFORM_CONFIGS:
        _put(data, ("platforms", platform, "enabled"), False)
    _put(data, ("agents", "helper", "base_url"), "http://127.0.0.1:9/v1")
    data["store"] = {"url": f"postgresql://sg:{MARK}pw@127.0.0.1:1/none"}
    hook = {"url": "http://127.0.0.1:9/hook", "events": ["turn.finished"], "secret": f"{MARK}wh"}
    data["webhooks"] = {"outbound": [hook]}
    # Inbound webhooks: an HMAC key and a bearer token per route.
    data["hooks"] = {
        "routes": [
            {"name": "signed", "secret": f"{MARK}hin", "session_key": "x", "prompt": "p"},
            {"name": "bearer", "bearer": f"{MARK}hbr", "session_key": "x", "prompt": "p"},
        ]
    }
    # MCP servers keep their secrets in maps: an environment and HTTP headers.
    data["mcp_servers"] = {
        "local": {"command": "mcp-server", "env": {"API_KEY": f"{MARK}env"}},
        "remote": {
            "url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": f"Bearer {MARK}hdr"},
        },
    }
    for key, value in urls.items():
        _put(data, tuple(key.split(".")), value)
    return data


@contextlib.contextmanager
def _serving(serve: Any, stub: Any) -> Iterator[str]:
    """An aiohttp or uvicorn stub on an event loop of its own thread."""
    started: queue.Queue[str] = queue.Queue()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def main() -> None:
        async with serve(stub) as url:
            started.put(url)
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    try:
        yield started.get(timeout=30)
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=30)
        loop.close()


def test_the_discovered_secret_fields_cover_every_kind_of_credential():
    # Should a new secret field not be a SecretStr, this list (and the scan) would miss it.
    names = {path[-1] for path in _all_secret_fields()}
    assert {"token", "api_key", "webhook_secret", "signing_secret", "bot_token"} <= names
    assert ("api", "token") in _all_secret_fields()


@pytest.mark.parametrize("failing", ["telegram", "slack", "discord", "store"])
def test_a_failing_start_prints_no_configured_secret(sg, home, tmp_path, failing):
    servers = {
        "telegram": (tg.serve_stub, tg.BotApiStub(), "base_url", ""),
        "slack": (sl.serve_stub, sl.SlackStub(), "base_url", "/api/"),
        "discord": (dc.serve_stub, dc.DiscordStub(), "api_base_url", ""),
    }
    with contextlib.ExitStack() as stack:
        overrides = {}
        if failing in servers:
            serve, stub, key, suffix = servers[failing]
            url = stack.enter_context(_serving(serve, stub))
            overrides = {
                f"platforms.{failing}.{key}": url + suffix,
                f"platforms.{failing}.enabled": True,
                "store.url": None,
            }
        data = _secret_config()
        for key, value in overrides.items():
            _put(data, tuple(key.split(".")), value)
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump(data))
        result = sg(
            "run", "--home", str(home), "--port", "0", "--config", str(config),
            "--log-level", "debug",
        )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "refused" in output or "cannot connect" in output, output  # it failed as meant
    assert MARK not in output
    assert "Traceback" not in result.stderr
    # A JSON log line per record: each one parsed, so nothing was cut to hide a secret.
    for line in result.stderr.splitlines():
        if line.startswith("{"):
            json.loads(line)
