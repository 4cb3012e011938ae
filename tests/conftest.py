"""Fixtures shared by the whole suite.

Add a fixture here only when several test packages need it; one package's helpers stay in that
package's own `conftest.py`.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest
from hypothesis import settings

from sessiongate.core.clock import FakeClock

# No per-example time limit: these machines are shared, and a property test fails on what it
# finds, never on how long an example took (speed is measured in `sessiongate bench`).
settings.register_profile("sessiongate", deadline=None)
settings.load_profile("sessiongate")

# Where every test's clock starts: fixed, so ids and timestamps in assertions are stable.
CLOCK_START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """No `SESSIONGATE_*` variable of the developer's shell leaks into a test."""
    for name in list(os.environ):
        if name.startswith("SESSIONGATE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def clock() -> FakeClock:
    """Time that only moves when a test calls `advance()`; nothing sleeps."""
    return FakeClock(CLOCK_START)


@pytest.fixture
def pg_schema():
    """A private PostgreSQL schema for this test (dropped after it); skips without a server."""
    from postgres_support import REQUIRED, Schema, server_problem

    problem = server_problem()
    if problem is not None:
        if REQUIRED:
            pytest.fail(problem)
        pytest.skip(problem)
    schema = Schema()
    yield schema
    schema.drop()


@pytest.fixture(scope="session")
def private_cluster():
    """A PostgreSQL cluster of this run's own (`pg_cluster.py`), which a test may restart or
    crash; skips when this machine cannot make one (the reason says why)."""
    from pg_cluster import PrivateCluster, cluster_problem

    problem = cluster_problem()
    if problem is not None:
        pytest.skip(problem)
    with PrivateCluster() as cluster:
        yield cluster
