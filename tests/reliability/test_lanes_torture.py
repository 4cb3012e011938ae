"""Many instances on one database (lanes_torture.py): a CI-sized run, and a long run with
-m torture. Both restart PostgreSQL, on a cluster of their own (`tests/pg_cluster.py`); where
this machine cannot make one, they run on the suite's server without the restarts (the
reason is printed), and skip (with the one line) without that server either."""

from __future__ import annotations

import dataclasses
import os

import pytest

from lanes_torture import LanesConfig, run_lanes_torture, run_on_private_cluster
from pg_cluster import cluster_problem
from postgres_support import SERVER_URL
from sg_process import selected_by_marker


async def _run(cfg: LanesConfig, request, tmp_path):
    problem = cluster_problem()
    if problem is None:
        result = await run_on_private_cluster(cfg, tmp_path)
    else:
        print(f"no PostgreSQL restarts: {problem}")
        cfg = dataclasses.replace(cfg, restarts=0)
        pg_schema = request.getfixturevalue("pg_schema")
        result = await run_lanes_torture(cfg, SERVER_URL, pg_schema.name, tmp_path)
    print(result.summary())
    assert result.ok, result.summary()
    assert result.acked > 0
    assert result.kills == cfg.kills
    assert result.pauses == cfg.pauses
    assert result.restarts == cfg.restarts
    if cfg.pauses:
        assert result.fenced > 0  # a paused owner woke up and was refused: the test bites
    return result


async def test_three_instances_share_lanes_under_kills_pauses_terminations_restarts_and_cuts(
    request, tmp_path
):
    cfg = LanesConfig(seconds=18, kills=2, pauses=2, terminates=1, restarts=2, cuts=1)
    await _run(cfg, request, tmp_path)


async def test_sized_lanes_torture(request, tmp_path):
    if not selected_by_marker(request, "torture"):
        pytest.skip("opt-in: run with -m torture (size: LANES_SECONDS, LANES_FAULTS)")
    faults = int(os.environ.get("LANES_FAULTS", "6"))
    cfg = LanesConfig(
        seconds=float(os.environ.get("LANES_SECONDS", "60")),
        kills=faults,
        pauses=faults,
        terminates=faults,
        restarts=faults,
        cuts=faults,
        seed=int(os.environ.get("LANES_SEED", "1")),
    )
    await _run(cfg, request, tmp_path)
