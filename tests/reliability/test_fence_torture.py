"""The fencing torture (fence_torture.py): a CI-sized run, and a long run with -m torture."""

from __future__ import annotations

import os

import pytest

from fence_torture import FenceConfig, run_fence_torture
from postgres_support import SERVER_URL
from sg_process import selected_by_marker


def _run(cfg, pg_schema, tmp_path):
    result = run_fence_torture(cfg, pg_schema.url, tmp_path, SERVER_URL, pg_schema.name)
    assert result.ok, result.problems
    assert result.committed > 0, result.problems
    assert result.pauses == cfg.pauses
    if cfg.pauses:
        assert result.fenced > 0  # a paused owner woke up and was refused: the test bites
    return result


def test_fencing_under_pauses_kills_and_terminated_sessions(pg_schema, tmp_path):
    _run(FenceConfig(seconds=6, pauses=2, kills=1, terminates=1), pg_schema, tmp_path)


def test_sized_fencing_torture(request, pg_schema, tmp_path):
    if not selected_by_marker(request, "torture"):
        pytest.skip("opt-in: run with -m torture (size: FENCE_SECONDS, FENCE_FAULTS)")
    faults = int(os.environ.get("FENCE_FAULTS", "10"))
    cfg = FenceConfig(
        seconds=float(os.environ.get("FENCE_SECONDS", "60")),
        pauses=faults,
        kills=faults,
        terminates=faults,
        seed=int(os.environ.get("FENCE_SEED", "1")),
    )
    _run(cfg, pg_schema, tmp_path)
