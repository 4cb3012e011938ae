"""`sessiongate run` with Slack or Discord enabled: a refused token stops the start at once
with the platform's message; a missing SDK extra stops it with one line naming the extra."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import subprocess
import sys
import threading
from typing import TYPE_CHECKING, Any

import pytest

from sessiongate.testing.stubs import discord as dc, slack as sl

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@contextlib.contextmanager
def serving_in_thread(serve: Any, stub: Any) -> Iterator[str]:
    """An aiohttp stub on an event loop of its own thread (the CLI runs in a subprocess)."""
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


def _config(tmp_path: Path, platform: str, **keys: str) -> Path:
    path = tmp_path / "config.yaml"
    lines = ["platforms:", f"  {platform}:"] + [f"    {k}: '{v}'" for k, v in keys.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_run_with_a_refused_slack_token_exits_at_once(sg, home, tmp_path):
    stub = sl.SlackStub()
    with serving_in_thread(sl.serve_stub, stub) as url:
        config = _config(
            tmp_path,
            "slack",
            bot_token="xoxb-wrong",
            app_token=stub.app_token,
            base_url=url + "/api/",
        )
        result = sg("run", "--home", str(home), "--port", "0", "--config", str(config))
    assert result.returncode == 1
    assert "Slack refused the token: invalid_auth" in result.stderr
    assert "Traceback" not in result.stderr
    assert stub.calls["auth.test"] == 1  # no retry loop


def test_run_with_a_refused_discord_token_exits_at_once(sg, home, tmp_path):
    stub = dc.DiscordStub()
    with serving_in_thread(dc.serve_stub, stub) as url:
        config = _config(tmp_path, "discord", token="wrong", api_base_url=url)
        result = sg("run", "--home", str(home), "--port", "0", "--config", str(config))
    assert result.returncode == 1
    assert "Discord refused the bot token" in result.stderr
    assert "Traceback" not in result.stderr
    assert stub.calls["me"] == 1
    assert stub.identifies == 0


@pytest.mark.parametrize(
    ("platform", "module", "keys"),
    [("slack", "slack_sdk", {"bot_token": "xoxb-x", "app_token": "xapp-x"}),
     ("discord", "discord", {"token": "x"})],
)  # fmt: skip
def test_run_with_a_missing_sdk_names_the_extra(env, home, tmp_path, platform, module, keys):
    config = _config(tmp_path, platform, **keys)
    # The SDK made unimportable for this process only, as if the extra were not installed.
    script = (
        f"import sys; sys.modules[{module!r}] = None; "
        "from sessiongate.cli import main; sys.argv = ['sessiongate'] + sys.argv[1:]; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, "run", "--home", str(home), "--config", str(config)],
        capture_output=True,
        text=True,
        env=env(),
        timeout=60,
        check=False,
    )
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        f"error: platforms.{platform} is enabled but its SDK is not installed: "
        f"pip install 'sessiongate[{platform}]'"
    ]
    assert not (home / "sessions").exists()
