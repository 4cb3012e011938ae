"""SIGKILL end to end: a real gateway process is killed mid-turn and a second runner recovers.

Every accepted message must end up in the transcript exactly once and get exactly one reply
(across both processes); the turns cut off by the kill are resumed exactly once; a reply that
was committed but not delivered is delivered. A second test kills a hanging resume again and
again, the loop that only counting *dispatched* resumes can stop.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from gateway_support import Hub

from sessiongate import GatewayConfig, SessionStore
from sessiongate.adapters.loopback import LoopbackAdapter
from sessiongate.gateway import GatewayRunner
from sessiongate.gateway.turns import STUCK_NOTICE
from sessiongate.store.lanes import LaneStore, TurnState

if TYPE_CHECKING:
    from asyncio.subprocess import Process

pytestmark = pytest.mark.torture

CHILD = Path(__file__).with_name("crash_child.py")
# A safety net so a broken child fails the test instead of hanging it; never a timing check.
HANG_GUARD_SECONDS = 60.0


async def _spawn(home: Path, *args: str) -> Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        str(home),
        *args,
        stdout=asyncio.subprocess.PIPE,
        cwd=home.parent,
    )


async def _read_until(proc: Process, *wanted: str) -> list[str]:
    """Child output lines up to and including the first that starts with one of `wanted`."""
    assert proc.stdout is not None
    lines: list[str] = []
    while True:
        raw = await asyncio.wait_for(proc.stdout.readline(), HANG_GUARD_SECONDS)
        if not raw:
            raise AssertionError(f"child exited early ({await proc.wait()}): {lines}")
        line = raw.decode().rstrip("\n")
        lines.append(line)
        if line.startswith(wanted):
            return lines


async def _kill(proc: Process) -> None:
    proc.send_signal(signal.SIGKILL)
    assert await proc.wait() == -signal.SIGKILL


async def test_sigkill_mid_turn_loses_nothing_and_duplicates_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    child = await _spawn(home, "crash")
    before = await _read_until(child, "READY")
    await _kill(child)
    assert not (home / ".clean_shutdown").exists()

    config = GatewayConfig(busy_input_mode="queue")
    store = SessionStore(home / "sessions", config)
    hub, adapter = Hub(), LoopbackAdapter()
    runner = GatewayRunner(store, config, home=home, agent_factory=hub.factory, adapters=[adapter])
    try:
        await runner.start()
        await runner.wait_idle()
        await runner.stop()

        sent_before = [line.split(" ", 3)[3] for line in before if line.startswith("SENT")]
        # The first process delivered one reply (and the `/queue` acknowledgement).
        assert sent_before == ["re: fast b1", "Queued; it runs after 1 other(s)."]
        replies = Counter(sent_before[:1] + [m.text for m in adapter.sent])
        # The second process's agent answers "re: <text>" too (the Hub agent).
        assert replies == Counter(
            ["re: fast b1", "re: d1", "re: slow a1", "re: a2", "re: a3", "re: slow c1"]
        )
        users: dict[str, list[str]] = {}
        for chat in "abcd":
            entry = store.get_session(f"agent:main:telegram:dm:{chat}")
            messages = store.load_transcript(entry.session_id)
            users[chat] = [m["content"] for m in messages if m["role"] == "user"]
            assert sum(m["role"] == "assistant" for m in messages) == len(users[chat])
        assert users == {
            "a": ["slow a1", "a2", "a3"],
            "b": ["fast b1"],
            "c": ["slow c1"],
            "d": ["d1"],
        }
        resumed = sorted(r.messages[-1]["content"] for r in hub.requests if r.resume_note)
        assert resumed == ["slow a1", "slow c1"]
        assert sorted(hub.user_texts()) == ["a2", "a3", "slow a1", "slow c1"]
        lanes = LaneStore(store)
        assert lanes.total_queued() == 0
        for state in (TurnState.ACCEPTED, TurnState.RUNNING, TurnState.REPLIED):
            assert lanes.turns_in_state(state) == []
        assert len(lanes.turns_in_state(TurnState.DELIVERED)) == 6
    finally:
        await runner.stop()
        store.close()


async def test_a_resume_killed_again_and_again_is_suspended_at_the_threshold(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    child = await _spawn(home, "hang", "send")
    await _read_until(child, "RUNNING")
    await _kill(child)
    # Two resumes are dispatched, each counted before it runs, each killed mid-turn: the third
    # start in a row to find the turn cut off suspends the session (spec: 3+ restarts).
    for _ in range(2):
        child = await _spawn(home, "hang")
        await _read_until(child, "RUNNING")
        await _kill(child)
    child = await _spawn(home, "hang")
    last = await _read_until(child, "IDLE", "RUNNING")
    assert last[-1] == "IDLE"
    assert await child.wait() == 0
    assert any(line.endswith(STUCK_NOTICE) for line in last)

    with SessionStore(home / "sessions", GatewayConfig()) as store:
        lanes = LaneStore(store)
        (turn,) = lanes.turns_in_state(TurnState.FAILED)
        assert (turn.error, turn.attempt, turn.resumes) == ("stuck_loop", 3, 2)
        assert store.get_session(turn.session_key).suspended
        first = store.load_transcript(turn.session_id)[0]
        assert first["content"] == "reboot the server"
