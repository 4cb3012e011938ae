"""SIGKILL in the middle of a streamed tool loop: progress survives, nothing runs twice.

A real gateway process runs a scripted agent (loaded by import path) that makes five tool
calls; it is killed while the fourth runs, after three completed. The next process resumes
the turn: its context holds the three calls and their results, the fourth gets a synthetic
result saying it was interrupted, the resume note says so, and the agent goes on with the
fifth without running any completed call again (the side file records what really ran).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sessiongate import GatewayConfig, SessionStore
from sessiongate.gateway.turn_progress import INTERRUPTED_TOOL_RESULT
from sessiongate.store.lanes import LaneStore, TurnState

if TYPE_CHECKING:
    from asyncio.subprocess import Process

pytestmark = pytest.mark.torture

CHILD = Path(__file__).with_name("stream_crash_child.py")
AGENT = "scripted_agent:ScriptedAgent"
# A safety net so a broken child fails the test instead of hanging it; never a timing check.
HANG_GUARD_SECONDS = 60.0


async def _spawn(home: Path, side: Path, *args: str) -> Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        str(CHILD),
        str(home),
        AGENT,
        str(side),
        *args,
        stdout=asyncio.subprocess.PIPE,
        cwd=home.parent,
    )


async def _read_until(proc: Process, wanted: str) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    while True:
        raw = await asyncio.wait_for(proc.stdout.readline(), HANG_GUARD_SECONDS)
        if not raw:
            raise AssertionError(f"child exited early ({await proc.wait()}): {lines}")
        lines.append(raw.decode().rstrip("\n"))
        if lines[-1].startswith(wanted):
            return lines


async def test_a_turn_killed_after_three_of_five_tool_calls_resumes_without_rerunning_them(
    tmp_path,
):
    home, side = tmp_path / "home", tmp_path / "ran.txt"
    home.mkdir()
    first = await _spawn(home, side, "send")
    before = await _read_until(first, "HANG")
    first.send_signal(signal.SIGKILL)
    assert await first.wait() == -signal.SIGKILL
    assert [line for line in before if line.startswith("DONE")] == ["DONE 1", "DONE 2", "DONE 3"]
    assert side.read_text().split() == ["1", "2", "3", "4"]  # step 4 had started

    # What the kill left: the user message and every completed message, durable.
    config = GatewayConfig()
    store = SessionStore(home / "sessions", config)
    try:
        entry = store.get_session("agent:main:telegram:dm:x")
        stored = store.load_transcript(entry.session_id)
        assert [m["role"] for m in stored] == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]
    finally:
        store.close()

    second = await _spawn(home, side)
    after = await _read_until(second, "IDLE")
    assert await second.wait() == 0

    # The agent ran step 5 only: steps 1-3 completed, step 4 is interrupted, none ran again.
    assert side.read_text().split() == ["1", "2", "3", "4", "5"]
    assert [line for line in after if line.startswith("DONE")] == ["DONE 5"]
    assert "SENT all five steps done" in after
    note = json.loads(next(line for line in after if line.startswith("NOTE"))[len("NOTE ") :])
    assert "interrupted by a gateway restart" in note
    assert "3 tool calls of this turn completed" in note
    assert "1 tool call (step) had no result" in note

    store = SessionStore(home / "sessions", config)
    try:
        messages = store.load_transcript(entry.session_id)
        shape = [
            (m["role"], m.get("tool_call_id") or (m.get("tool_calls") or [{}])[0].get("id"))
            for m in messages
        ]
        assert shape == [
            ("user", None),
            ("assistant", "call_1"),
            ("tool", "call_1"),
            ("assistant", "call_2"),
            ("tool", "call_2"),
            ("assistant", "call_3"),
            ("tool", "call_3"),
            ("assistant", "call_4"),
            ("tool", "call_4"),
            ("assistant", "call_5"),
            ("tool", "call_5"),
            ("assistant", None),
        ]
        assert messages[8]["content"] == INTERRUPTED_TOOL_RESULT
        assert messages[8]["metadata"] == {"interrupted": "restart"}
        assert messages[-1]["content"] == "all five steps done"
        lanes = LaneStore(store)
        assert [t.state for t in lanes.turns_in_state(TurnState.DELIVERED)] == [TurnState.DELIVERED]
        assert lanes.total_queued() == 0
    finally:
        store.close()
