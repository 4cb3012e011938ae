"""Helpers for running the real `sessiongate` command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pytest

from sessiongate import GatewayConfig, Platform, SessionSource, SessionStore
from sessiongate.core.clock import FakeClock

if TYPE_CHECKING:
    from pathlib import Path

# Far in the past, so the CLI's real clock sees these sessions as old (for prune).
SEED_TIME = datetime(2020, 1, 1, tzinfo=UTC)
# Generous: a hang guard for a subprocess, never a timing assertion.
PROCESS_TIMEOUT = 60


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONGATE_")}
    env.update(extra)
    return env


def run_cli(
    *args: str, input: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessiongate", *args],
        input=input,
        capture_output=True,
        text=True,
        env=env if env is not None else cli_env(),
        timeout=PROCESS_TIMEOUT,
        check=False,
    )


@pytest.fixture
def sg():
    """Runs `python -m sessiongate ARGS...` (the real command) and returns the result."""
    return run_cli


@pytest.fixture
def env():
    """Builds a clean environment for `sg(..., env=env(NAME=value))`."""
    return cli_env


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def seeded(home: Path) -> dict[str, str]:
    """Two sessions with messages under `home`; returns {name: session_key}."""
    store = SessionStore(home / "sessions", GatewayConfig(), clock=FakeClock(SEED_TIME))
    keys = {}
    try:
        for name, words in (("alice", "the quick brown fox"), ("bob", "a lazy dog sleeps")):
            entry = store.get_or_create_session(
                SessionSource(
                    platform=Platform.TELEGRAM, chat_id=name, user_id=name, chat_name=name
                )
            )
            store.append_messages(
                entry.session_id,
                [
                    {"role": "user", "content": words, "message_id": f"{name}-1"},
                    {"role": "assistant", "content": f"echo: {words}"},
                ],
            )
            keys[name] = entry.session_key
    finally:
        store.close()
    return keys
