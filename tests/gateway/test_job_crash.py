"""A gateway process killed with SIGKILL while a job's turn runs: the next process runs the
slot's turn to its end once, and never claims or runs the slot again."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from sessiongate import GatewayConfig, SessionStore
from sessiongate.store.jobs import JobStore

if TYPE_CHECKING:
    from asyncio.subprocess import Process

pytestmark = pytest.mark.torture

CHILD = Path(__file__).with_name("job_crash_child.py")
# A safety net so a broken child fails the test instead of hanging it; never a timing check.
HANG_GUARD_SECONDS = 60.0
JOB = {"id": "digest", "every": "1d", "deliver_to": "telegram:chat", "prompt": "digest"}


async def _spawn(home: Path, scenario: str) -> Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), str(home), scenario, stdout=asyncio.subprocess.PIPE
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


async def test_sigkill_while_a_jobs_turn_runs_runs_the_slot_once(tmp_path):
    home = tmp_path / "home"
    store = SessionStore(home / "sessions", GatewayConfig(jobs=[JOB]))
    try:
        jobs = JobStore(store)
        jobs.sync(GatewayConfig(jobs=[JOB]).jobs)
        claimed = jobs.claim_now("digest", owner="cli")
    finally:
        store.close()

    child = await _spawn(home, "hang")
    [running] = await _read_until(child, "RUNNING")
    child.send_signal(signal.SIGKILL)
    assert await child.wait() == -signal.SIGKILL
    turn_id = int(running.split()[1])

    again = await _spawn(home, "run")
    lines = await _read_until(again, "IDLE")
    assert await again.wait() == 0
    assert [line for line in lines if line.startswith("SENT")] == [f"SENT {turn_id} re: digest"]
    # The resumed turn is the slot's first turn: no second turn ran for it.
    assert {int(line.split()[1]) for line in lines if line.startswith("RUNNING")} == {turn_id}

    store = SessionStore(home / "sessions", GatewayConfig(jobs=[JOB]))
    try:
        [run] = JobStore(store).history("digest")
        assert (run.run_id, run.state, run.turn_id) == (claimed.run_id, "accepted", turn_id)
    finally:
        store.close()
