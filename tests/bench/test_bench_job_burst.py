"""The job burst section at a tiny size: a real runner in a child process, every job due in
the same minute by the fake clock. No speed is asserted; the counts and the shape are."""

from __future__ import annotations

import asyncio

import pytest
from rich.console import Console

from sessiongate_bench.harness import _print_job_burst
from sessiongate_bench.job_burst import (
    JobBurstSizes,
    Metered,
    job_burst_lines,
    run_job_burst_section,
)


def test_every_job_due_in_the_minute_runs_once_and_its_reply_is_delivered():
    section = run_job_burst_section(quick=True, sizes=JobBurstSizes(jobs=20), timeout_s=600)
    assert section["status"] == "ok", section
    assert (section["jobs"], section["accepted"], section["delivered"]) == (20, 20, 20)
    for figure in ("tick_seconds", "seconds", "runs_per_s", "turns_per_s", "process_cpu_s"):
        assert section[figure] > 0
    assert isinstance(section["within_minute"], bool)
    assert 0 < section["scheduler_cpu_s"] <= section["process_cpu_s"]
    assert 0 < section["scheduler_cpu_share"] <= 1
    [claimed, cpu] = job_burst_lines(section)[2:4]
    assert claimed.startswith("- 20 jobs due at the same minute")
    assert "the scheduler's own CPU" in cpu
    console = Console(width=100, record=True, color_system=None)
    _print_job_burst(console, section)
    assert "20 jobs due in one minute" in console.export_text()


def test_quick_runs_fewer_jobs_than_the_full_burst():
    assert (JobBurstSizes.quick().jobs, JobBurstSizes().jobs) == (500, 10_000)


def test_a_failed_burst_is_reported_as_not_measured():
    assert job_burst_lines({"status": "error", "reason": "boom"})[2] == "Not measured: boom."


async def test_metered_passes_the_result_and_errors_through_and_counts_its_own_steps():
    async def steps() -> str:
        await asyncio.sleep(0)
        return "done"

    metered = Metered(steps())
    assert await metered == "done"
    assert metered.cpu >= 0

    async def fails() -> None:
        await asyncio.sleep(0)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await Metered(fails())

    gate = asyncio.Event()

    async def waits() -> str:
        await gate.wait()
        return "woken"

    waiting = asyncio.ensure_future(Metered(waits()))
    await asyncio.sleep(0)
    gate.set()
    assert await waiting == "woken"
    cancelled = asyncio.ensure_future(Metered(asyncio.Event().wait()))
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
