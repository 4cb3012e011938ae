"""Many instances on one database (lanes_torture.py): a CI-sized run, and a long run with
-m torture. Both need a PostgreSQL server and skip (with the one line) without one."""

from __future__ import annotations

import os

import pytest

from lanes_torture import LanesConfig, run_lanes_torture
from postgres_support import SERVER_URL
from sg_process import selected_by_marker


async def _run(cfg: LanesConfig, pg_schema, tmp_path):
    result = await run_lanes_torture(cfg, SERVER_URL, pg_schema.name, tmp_path)
    print(result.summary())
    assert result.ok, result.summary()
    assert result.acked > 0
    assert result.kills == cfg.kills
    assert result.pauses == cfg.pauses
    if cfg.pauses:
        assert result.fenced > 0  # a paused owner woke up and was refused: the test bites
    return result


async def test_three_instances_share_lanes_under_kills_pauses_and_terminations(pg_schema, tmp_path):
    await _run(LanesConfig(seconds=16, kills=2, pauses=2, terminates=1), pg_schema, tmp_path)


async def test_sized_lanes_torture(request, pg_schema, tmp_path):
    if not selected_by_marker(request, "torture"):
        pytest.skip("opt-in: run with -m torture (size: LANES_SECONDS, LANES_FAULTS)")
    faults = int(os.environ.get("LANES_FAULTS", "6"))
    cfg = LanesConfig(
        seconds=float(os.environ.get("LANES_SECONDS", "60")),
        kills=faults,
        pauses=faults,
        terminates=faults,
        seed=int(os.environ.get("LANES_SEED", "1")),
    )
    await _run(cfg, pg_schema, tmp_path)
